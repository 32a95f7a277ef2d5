defmodule Plugboard.Native do
  @moduledoc false
  # The NIF (c_src/nif.cpp). Every function returns {:error, %Plugboard.Error{}} rather than raise;
  # compile/6, buffer_to_binary/3 and execute/8 answer by message (see Plugboard): they return
  # {:started, gate}, and cancel/1 on the gate stops the answer (a caller that gave up waiting).
  @on_load :load_nif

  def load_nif do
    path = Path.join([:code.priv_dir(:plugboard), "lib", "plugboard_nif"])
    :erlang.load_nif(String.to_charlist(path), 0)
  end

  def version, do: :erlang.nif_error(:not_loaded)
  def discover(_settings), do: :erlang.nif_error(:not_loaded)
  def boot(_settings), do: :erlang.nif_error(:not_loaded)
  def open(_plugin, _create_options), do: :erlang.nif_error(:not_loaded)
  def await_teardowns(_ms), do: :erlang.nif_error(:not_loaded)
  def client_info(_client), do: :erlang.nif_error(:not_loaded)
  def client_close(_client), do: :erlang.nif_error(:not_loaded)
  def client_id(_client), do: :erlang.nif_error(:not_loaded)
  def client_declare_lapack(_client), do: :erlang.nif_error(:not_loaded)
  def client_notify_when_dropped(_client, _pid, _message), do: :erlang.nif_error(:not_loaded)
  def resource_counts, do: :erlang.nif_error(:not_loaded)
  def compile(_client, _program, _name, _options, _pid, _ref), do: :erlang.nif_error(:not_loaded)
  def buffer_from_binary(_client, _data, _dtype, _shape, _device, _copy), do: :erlang.nif_error(:not_loaded)
  def buffer_to_binary(_buffer, _pid, _ref), do: :erlang.nif_error(:not_loaded)
  def buffer_valid(_buffer), do: :erlang.nif_error(:not_loaded)
  def buffer_free(_buffer), do: :erlang.nif_error(:not_loaded)
  def buffer_device_pointer(_buffer), do: :erlang.nif_error(:not_loaded)
  def buffer_from_pointer(_client, _address, _dtype, _shape, _device), do: :erlang.nif_error(:not_loaded)
  def execute(_exe, _args, _donate, _device, _routes, _limit, _caller, _ref), do: :erlang.nif_error(:not_loaded)
  def execute_partitioned(_exe, _args_per_device, _donate, _caller, _ref), do: :erlang.nif_error(:not_loaded)
  def cancel(_gate), do: :erlang.nif_error(:not_loaded)
  def cancelled?(_gate), do: :erlang.nif_error(:not_loaded)
  def measure_execute(_exe, _args, _iterations), do: :erlang.nif_error(:not_loaded)
  def reply(_call, _results), do: :erlang.nif_error(:not_loaded)
  def fail_call(_call, _message), do: :erlang.nif_error(:not_loaded)
  # Multi-host PJRT (c_src/nif_key_value.cpp): a KeyValueStore answered by a handler process, calls
  # through it on a launch thread (answer {ref, result}), and a client opened as a node of a job.
  def kv_store_new(_handler, _call_timeout), do: :erlang.nif_error(:not_loaded)
  def kv_reply(_store, _id, _reply), do: :erlang.nif_error(:not_loaded)
  def kv_call(_store, _op, _key, _arg, _ref), do: :erlang.nif_error(:not_loaded)
  def open_distributed(_plugin, _create_options, _store, _node_id, _num_nodes, _ref), do: :erlang.nif_error(:not_loaded)
end
