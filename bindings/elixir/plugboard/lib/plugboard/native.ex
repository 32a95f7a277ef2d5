defmodule Plugboard.Native do
  @moduledoc false
  # The NIF (c_src/nif.cpp). Every function returns {:error, %Plugboard.Error{}} rather than raise;
  # compile/6, buffer_to_binary/3 and execute/8 answer by message (see Plugboard): they return
  # {:started, gate}, and cancel/1 on the gate stops the answer (a caller that gave up waiting).
  #
  # A NIF that cannot load (a library it needs missing on this host: the usual case on a deploy host)
  # leaves the module loaded: its functions then return the reason, `load_error/0` (version/0 raises
  # it), and Plugboard.Application's start fails with it in one line.
  #
  # A hot upgrade (new code loaded while this module's code is current) whose NIF cannot load is
  # refused when the current code has its NIF: the old code and its NIF go on working, as they did. A
  # first load (no current code: the first in this VM, or after the module was deleted), or an upgrade
  # over code whose NIF did not load either, always loads the module and records the reason: the
  # functions then answer it rather than raise undef.
  #
  # One persistent term is the truth about the current code: :loaded, or {:error, %Plugboard.Error{}}
  # (what the functions answer; read back whole, so that their type stays open, as nif_error's
  # would), absent before any load.
  @on_load :load_nif
  @state {__MODULE__, :load_state}

  def load_nif do
    # During @on_load the code being loaded is not current yet: module_loaded/1 says whether older
    # code is (a hot upgrade).
    upgrade? = :erlang.module_loaded(__MODULE__)

    case :code.priv_dir(:plugboard) do
      {:error, _} ->
        failed(upgrade?, {:error, :no_priv}, Plugboard.Error.new(:failed_precondition, "cannot load the NIF: the :plugboard application has no priv folder here"))

      priv ->
        path = Path.join([to_string(priv), "lib", "plugboard_nif"])

        case :erlang.load_nif(String.to_charlist(path), 0) do
          :ok ->
            :persistent_term.put(@state, :loaded)
            :ok

          {:error, reason} = error ->
            failed(upgrade?, error, load_failure(path <> ".so", reason))
        end
    end
  end

  # A hot upgrade over code whose NIF works: refused (the current code stays); else recorded.
  defp failed(upgrade?, error, reason) do
    if upgrade? and :persistent_term.get(@state, nil) == :loaded do
      error
    else
      :persistent_term.put(@state, {:error, reason})
      :ok
    end
  end

  @doc false
  # Why the NIF did not load (a %Plugboard.Error{}), or nil when it did.
  def load_error do
    case :persistent_term.get(@state, nil) do
      {:error, error} -> error
      _ -> nil
    end
  end

  @doc false
  # The error for a NIF at `so` that :erlang.load_nif/2 refused with `reason`: one line naming every
  # library the dynamic loader cannot find for it (and every symbol version this host's libraries
  # lack), and what to do.
  def load_failure(so, reason) do
    text = load_reason_text(reason)

    missing =
      if text =~ "cannot open shared object file" or text =~ "not found",
        do: missing_libraries(so, text),
        else: []

    message =
      case missing do
        [] ->
          "cannot load #{so}: #{text} (build the native part on this host with PLUGBOARD_BUILD=true mix compile)"

        [one] ->
          "cannot load #{so}: #{one} not found on this host (the native part must be self-contained; install it, " <>
            "or build the native part on this host with PLUGBOARD_BUILD=true mix compile)"

        many ->
          "cannot load #{so}: #{Enum.join(many, ", ")} not found on this host (the native part must be self-contained; " <>
            "install them, or build the native part on this host with PLUGBOARD_BUILD=true mix compile)"
      end

    Plugboard.Error.new(:failed_precondition, message)
  end

  defp load_reason_text({_kind, text}) when is_list(text) or is_binary(text), do: one_line(to_string(text))
  defp load_reason_text(other), do: one_line(inspect(other))

  defp one_line(text), do: text |> String.replace(~r/\s*\n\s*/, "; ") |> String.trim()

  @doc false
  # What the dynamic loader, tracing the objects `so` needs (what ldd does: `ld.so --list` stops at
  # the first missing one), cannot find: "libzip.so.4", and "GLIBC_2.38 of libc.so.6" for a symbol
  # version this host's library lacks. Falls back to the library named in load_nif's `text`.
  def missing_libraries(so, text \\ "") do
    traced =
      with loader when is_binary(loader) <- loader(),
           {out, _status} <- trace(loader, so) do
        out
        |> String.split("\n")
        |> Enum.flat_map(fn line ->
          cond do
            m = Regex.run(~r/^\s*(\S+) => not found/, line) -> [Enum.at(m, 1)]
            m = Regex.run(~r/(?:^|\s)(\S+): version `([^']+)' not found/, line) -> ["#{Enum.at(m, 2)} of #{Path.basename(Enum.at(m, 1))}"]
            true -> []
          end
        end)
        |> Enum.uniq()
      else
        _ -> []
      end

    case {traced, Regex.run(~r/([^\s':]+): cannot open shared object file/, text)} do
      {[], [_, lib]} -> [lib]
      {traced, _} -> traced
    end
  end

  @loaders ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1", "/lib64/ld-linux-aarch64.so.1",
            "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1"]
  defp loader, do: Enum.find(@loaders, &File.exists?/1)

  # The trace runs while the module loads (@on_load, in the code server's time): bounded.
  @trace_timeout_ms 5_000
  defp trace(loader, so), do: run_bounded(loader, [so], [{"LD_TRACE_LOADED_OBJECTS", "1"}], @trace_timeout_ms)

  @doc false
  # Runs `program` with `args` (and `env` added), its stderr with its stdout: {output, exit_status}, or
  # :timeout when it runs past `timeout_ms` (it is killed), :error when it cannot be started.
  def run_bounded(program, args, env, timeout_ms) do
    port =
      Port.open({:spawn_executable, program}, [
        :binary,
        :exit_status,
        :stderr_to_stdout,
        :hide,
        args: args,
        env: Enum.map(env, fn {k, v} -> {String.to_charlist(k), String.to_charlist(v)} end)
      ])

    os_pid = Port.info(port, :os_pid)
    collect(port, os_pid, System.monotonic_time(:millisecond) + timeout_ms, [])
  rescue
    _ -> :error
  end

  defp collect(port, os_pid, deadline, acc) do
    receive do
      {^port, {:data, data}} -> collect(port, os_pid, deadline, [acc | data])
      {^port, {:exit_status, status}} -> {IO.iodata_to_binary(acc), status}
    after
      max(deadline - System.monotonic_time(:millisecond), 0) ->
        # Closing the port closes its pipes only: the program itself is killed. (The port may have
        # closed by itself meanwhile.)
        try do
          Port.close(port)
        rescue
          ArgumentError -> :ok
        end

        with {:os_pid, pid} <- os_pid, do: :os.cmd(~c"kill -KILL #{pid} 2> /dev/null")
        flush(port)
        :timeout
    end
  end

  defp flush(port) do
    receive do
      {^port, _} -> flush(port)
    after
      0 -> :ok
    end
  end

  # What the functions below answer when the NIF did not load (they are replaced when it did): the
  # recorded {:error, reason}, read back whole (see @state).
  # (Only the states that are not an answer are matched: the answer itself keeps its open type.)
  defp not_loaded do
    case :persistent_term.get(@state, nil) do
      state when state in [nil, :loaded] -> {:error, Plugboard.Error.new(:failed_precondition, "the plugboard NIF is not loaded")}
      answer -> answer
    end
  end

  def version, do: raise(load_error() || Plugboard.Error.new(:failed_precondition, "the plugboard NIF is not loaded"))
  def discover(_settings), do: not_loaded()
  def boot(_settings), do: not_loaded()
  def open(_plugin, _create_options), do: not_loaded()
  def await_teardowns(_ms), do: not_loaded()
  def client_info(_client), do: not_loaded()
  def client_close(_client), do: not_loaded()
  def client_id(_client), do: not_loaded()
  def client_declare_lapack(_client), do: not_loaded()
  def client_notify_when_dropped(_client, _pid, _message), do: not_loaded()
  def resource_counts, do: not_loaded()
  def compile(_client, _program, _name, _options, _pid, _ref), do: not_loaded()
  def buffer_from_binary(_client, _data, _dtype, _shape, _device, _copy), do: not_loaded()
  def buffer_to_binary(_buffer, _pid, _ref), do: not_loaded()
  def buffer_valid(_buffer), do: not_loaded()
  def buffer_donatable(_buffer), do: not_loaded()
  def buffer_free(_buffer), do: not_loaded()
  def buffer_device_pointer(_buffer), do: not_loaded()
  def buffer_from_pointer(_client, _address, _dtype, _shape, _device, _size), do: not_loaded()
  def execute(_exe, _args, _donate, _device, _routes, _limit, _caller, _ref), do: not_loaded()
  def execute_partitioned(_exe, _args_per_device, _donate, _caller, _ref), do: not_loaded()
  def cancel(_gate), do: not_loaded()
  def cancelled?(_gate), do: not_loaded()
  def measure_execute(_exe, _args, _iterations), do: not_loaded()
  def reply(_call, _results), do: not_loaded()
  def fail_call(_call, _message), do: not_loaded()
  # %{count, errors, total_ns, last_ns, in_flight}: what the runs started here came to (c_src/run_counts.h).
  def run_counts, do: not_loaded()
  # Multi-host PJRT (c_src/nif_key_value.cpp): a KeyValueStore answered by a handler process, calls
  # through it on a launch thread (answer {ref, result}), and a client opened as a node of a job.
  def kv_store_new(_handler, _call_timeout), do: not_loaded()
  def kv_reply(_store, _id, _reply), do: not_loaded()
  def kv_call(_store, _op, _key, _arg, _ref), do: not_loaded()
  def open_distributed(_plugin, _create_options, _store, _node_id, _num_nodes, _ref), do: not_loaded()
  # Traces (c_src/nif_trace.cpp; Plugboard.Trace).
  def trace_start(_max_spans, _process_name), do: not_loaded()
  def trace_stop, do: not_loaded()
  def trace_spans(_stopped, _budget), do: not_loaded()
  def trace_now, do: not_loaded()
  def trace_record(_name, _category, _start_ns, _end_ns, _track, _args), do: not_loaded()
end
