defmodule Plugboard do
  @moduledoc """
  Runs StableHLO programs on whichever accelerator target the release booted: one release carries
  several PJRT plugins (a *bundle*) and picks one when it starts (`Plugboard.Application`).

      {:ok, client} = Plugboard.client()
      {:ok, exe} = Plugboard.compile(client, File.read!("add.mlir"))
      {:ok, x} = Plugboard.buffer(client, <<1.0::float-32-little, 2.0::float-32-little>>, :f32, {2})
      {:ok, [y]} = Plugboard.run(exe, [x, x])
      {:ok, bytes} = Plugboard.to_binary(y)

  Nothing here holds a BEAM scheduler while a plugin works: compilation, executions and reads run on
  plugboard's threads and answer by message; `compile/3`, `run/3` and `to_binary/2` wait for that
  message in a `receive`. Native objects (clients, executables, buffers) are owned by the garbage
  collector. Every function returns `{:ok, value}` or `{:error, %Plugboard.Error{}}`; the bang
  variants raise the error.

  Host callbacks: a program's blocking custom calls (`stablehlo.custom_call @name` with results) go to
  an Elixir function run by the process waiting in `run/3` (or to a handler process), its ordered
  calls (`plugboard.print`, and names bound as ordered) to a process or to `Logger`, in program order.
  Routing is per execution: many processes may run one executable at once, each getting its own calls.
  """

  alias Plugboard.{Buffer, Call, Client, Error, Executable, HostTensor, Native, OrderedCall, Report, Run}

  @typedoc "Element types, by plugboard's names."
  @type dtype ::
          :bool | :i8 | :i16 | :i32 | :i64 | :u8 | :u16 | :u32 | :u64 | :f16 | :bf16 | :f32 | :f64 | :c64 | :c128
          | :f8e5m2 | :f8e4m3fn
  @type result(t) :: {:ok, t} | {:error, Error.t()}

  # Binaries above this are copied on a dirty scheduler (a copy this size takes ~0.1 ms).
  @dirty_copy_bytes 1_048_576

  @doc "The version of the native library."
  @spec version() :: String.t()
  def version, do: Native.version()

  # ------------------------------------------------------------------------------------------------
  # Selection

  @doc """
  The client the application booted (see `Plugboard.Application` for how the target is chosen).
  `{:error, %Error{code: :not_found}}` when no target was configured; `:unavailable` when the boot
  did not start one.
  """
  @spec client() :: result(Client.t())
  def client do
    case :persistent_term.get({__MODULE__, :boot}, nil) do
      %{client: %Client{} = client} -> {:ok, client}
      %{error: %Error{} = error} -> {:error, error}
      nil -> {:error, Error.new(:not_found, "plugboard has not booted a target (configure :plugboard, :bundle or set PLUGBOARD_TARGET)")}
    end
  end

  @doc "Same as `client/0`, raising the error."
  @spec client!() :: Client.t()
  def client!, do: unwrap!(client())

  @doc "The booted target's selection report, or nil when plugboard did not boot."
  @spec report() :: Report.t() | nil
  def report do
    case :persistent_term.get({__MODULE__, :boot}, nil) do
      %{report: report} -> report
      nil -> nil
    end
  end

  @selection_keys [:bundle, :target, :targets, :probes, :isolate, :use_environment]

  @doc """
  Chooses a target and starts it: `bundle:` (a bundle folder), `target:` (that one or fail),
  `targets:` (a preference list, falling back in order), `probes:` (device probes before loading,
  default true), `isolate:` (load in a child process first), `use_environment:` (default true: also
  read `PLUGBOARD_TARGET`, `PLUGBOARD_TARGETS`, `PLUGBOARD_PLUGIN_PATH`; what is given here wins).

  Runs on a dirty I/O scheduler. Returns the client with the report, or the error with the report
  (nil when the settings themselves were malformed).
  """
  @spec boot(keyword()) :: {:ok, Client.t(), Report.t()} | {:error, Error.t(), Report.t() | nil}
  def boot(opts \\ []) do
    with {:ok, settings} <- settings(opts),
         {:ok, resource, report, status} <- Native.boot(settings) do
      case {resource, status} do
        {nil, {:error, error}} -> {:error, error, report}
        {resource, :ok} ->
          case Client.wrap(resource) do
            {:ok, client} -> {:ok, client, report}
            {:error, error} -> {:error, error, report}
          end
      end
    else
      {:error, error} -> {:error, error, nil}
    end
  end

  @doc "Lists the candidates `boot/1` would consider, judged without loading anything."
  @spec discover(keyword()) :: result(Report.t())
  def discover(opts \\ []) do
    with {:ok, settings} <- settings(opts), do: Native.discover(settings)
  end

  defp settings(opts) do
    case Keyword.keys(opts) -- @selection_keys do
      [] ->
        {:ok,
         %{
           bundle: opts[:bundle] && Path.expand(opts[:bundle]),
           target: opts[:target] && to_string(opts[:target]),
           preference: opts[:targets] && Enum.map(List.wrap(opts[:targets]), &to_string/1),
           probes: opts[:probes],
           isolate: opts[:isolate],
           use_environment: Keyword.get(opts, :use_environment, true)
         }}

      unknown ->
        {:error, Error.new(:invalid_argument, "unknown selection option(s) #{inspect(unknown)}; known: #{inspect(@selection_keys)}")}
    end
  end

  @doc """
  Loads one plugin file and starts a client, without selection. `create_options` are the plugin's
  client options (`[{"cpu_device_count", 2}]`). Runs on a dirty I/O scheduler.
  """
  @spec open(Path.t(), [{String.t(), term()}]) :: result(Client.t())
  def open(plugin, create_options \\ []) do
    with {:ok, resource} <- Native.open(Path.expand(plugin), create_options), do: Client.wrap(resource)
  end

  @doc "The client's addressable devices, with memory figures where the plugin reports them."
  @spec devices(Client.t()) :: result([map()])
  def devices(%Client{resource: r}) do
    with {:ok, info} <- Native.client_info(r), do: {:ok, info.devices}
  end

  @doc """
  Lets go of this client handle now rather than at garbage collection: later calls with it are
  `:failed_precondition`. Executables and buffers made from it keep working (they hold the client).
  """
  @spec close(Client.t()) :: :ok
  def close(%Client{resource: r}), do: Native.client_close(r)

  @doc "Live native objects by kind (`%{client: n, executable: n, buffer: n, call: n}`): a leak check."
  @spec native_objects() :: %{atom() => non_neg_integer()}
  def native_objects, do: Native.resource_counts()

  # ------------------------------------------------------------------------------------------------
  # Compilation

  @doc """
  Compiles a StableHLO program (MLIR text or portable bytecode, or `{:file, path}`) on a compile
  thread; this process waits for the outcome in a `receive`.

  Options: `name:` (what messages call it), `callbacks:` (the host-callback names the program calls:
  they are declared on the plugin before compiling), `xla_options:` (`["name=value"]`),
  `plugin_defaults:` (leave out the options plugboard adds for JAX's numerics), `portable:` (runs on
  any device), `compile_cache:` (default `true`: the release bundle's precompiled programs, then the
  persistent compile cache, are looked in before compiling; see `Plugboard.Executable`'s `source`),
  `timeout:` (default `:infinity`).
  """
  @spec compile(Client.t(), binary() | {:file, Path.t()}, keyword()) :: result(Executable.t())
  def compile(client, program, opts \\ [])

  def compile(%Client{} = client, {:file, path}, opts) do
    case File.read(path) do
      {:ok, bytes} -> compile(client, bytes, Keyword.put_new(opts, :name, Path.basename(path)))
      {:error, reason} -> {:error, Error.new(:not_found, "cannot read program #{path}: #{:file.format_error(reason)}")}
    end
  end

  def compile(%Client{resource: r}, program, opts) when is_binary(program) do
    options = %{
      callbacks: Enum.map(Keyword.get(opts, :callbacks, []), &to_string/1),
      xla_options: Keyword.get(opts, :xla_options, []),
      plugin_defaults: Keyword.get(opts, :plugin_defaults, false),
      portable: Keyword.get(opts, :portable, false),
      compile_cache: Keyword.get(opts, :compile_cache, true)
    }

    ref = make_ref()

    with :ok <- Native.compile(r, program, Keyword.get(opts, :name, "<inline>"), options, self(), ref) do
      receive do
        {:plugboard_compiled, ^ref, outcome} -> outcome
      after
        Keyword.get(opts, :timeout, :infinity) ->
          {:error, Error.new(:deadline_exceeded, "compilation did not finish in #{opts[:timeout]} ms")}
      end
    end
  end

  @doc "Same as `compile/3`, raising the error."
  @spec compile!(Client.t(), binary() | {:file, Path.t()}, keyword()) :: Executable.t()
  def compile!(client, program, opts \\ []), do: unwrap!(compile(client, program, opts))

  # ------------------------------------------------------------------------------------------------
  # Buffers

  @doc """
  A device buffer from a binary of row-major little-endian elements (`byte_size` must be what dtype
  and shape call for). A large binary is adopted rather than copied where the platform allows it
  (zero-copy on CPU when its bytes are 64-byte aligned); the binary is kept alive as long as the
  device uses it, and such a buffer cannot be donated. Option `device:` (index, default 0).
  """
  @spec buffer(Client.t(), binary(), dtype(), tuple(), keyword()) :: result(Buffer.t())
  def buffer(%Client{resource: r}, data, dtype, shape, opts \\ []) when is_binary(data) and is_tuple(shape) do
    device = Keyword.get(opts, :device, 0)

    if byte_size(data) > @dirty_copy_bytes,
      do: Native.buffer_from_binary_dirty(r, data, dtype, shape, device),
      else: Native.buffer_from_binary(r, data, dtype, shape, device)
  end

  @doc "Same as `buffer/5`, raising the error."
  @spec buffer!(Client.t(), binary(), dtype(), tuple(), keyword()) :: Buffer.t()
  def buffer!(client, data, dtype, shape, opts \\ []), do: unwrap!(buffer(client, data, dtype, shape, opts))

  @doc "The buffer's contents as a binary (waits for them to be computed)."
  @spec to_binary(Buffer.t(), timeout()) :: result(binary())
  def to_binary(%Buffer{resource: r}, timeout \\ :infinity) do
    ref = make_ref()

    with :ok <- Native.buffer_to_binary(r, self(), ref) do
      receive do
        {:plugboard_binary, ^ref, outcome} -> outcome
      after
        timeout -> {:error, Error.new(:deadline_exceeded, "the buffer was not read in #{timeout} ms")}
      end
    end
  end

  @doc "Same as `to_binary/2`, raising the error."
  @spec to_binary!(Buffer.t(), timeout()) :: binary()
  def to_binary!(buffer, timeout \\ :infinity), do: unwrap!(to_binary(buffer, timeout))

  @doc "The buffer's contents as a `Plugboard.HostTensor`."
  @spec to_host(Buffer.t(), timeout()) :: result(HostTensor.t())
  def to_host(%Buffer{} = buffer, timeout \\ :infinity) do
    with {:ok, data} <- to_binary(buffer, timeout),
         do: {:ok, %HostTensor{data: data, dtype: buffer.dtype, shape: buffer.shape}}
  end

  @doc "False once the buffer was donated to an execution."
  @spec valid?(Buffer.t()) :: boolean()
  def valid?(%Buffer{resource: r}), do: Native.buffer_valid(r)

  # ------------------------------------------------------------------------------------------------
  # Executions

  @doc """
  Runs an executable on buffers and waits for its outputs: `{:ok, [Buffer.t()]}`.

  The execution holds no scheduler: it starts, and its completion arrives as a message. Options:

    * `callbacks: %{name => fun | pid}` — blocking host callbacks. A function (arity 1: the operands
      as `Plugboard.HostTensor`s; arity 2: also the call's attributes) runs in this process and
      returns the results (a list of binaries or `HostTensor`s, or one of them, or `{:error, message}`);
      a pid receives `{:plugboard_call, ref, %Plugboard.Call{}}` and answers with `reply/2`.
    * `ordered: %{name => fun | pid | :logger}` — ordered host calls, in program order: a function
      (arity 1, given the `Plugboard.OrderedCall`) runs in this process, a pid receives
      `{:plugboard_ordered, ref, call}`, `:logger` logs them. `"plugboard.print"` goes to `:logger`
      unless bound here.
    * `donate: [index]` — arguments given up to the execution (they become invalid).
    * `device:` — device index (a program compiled `portable: true` for another than 0).
    * `callback_timeout:` — how long a blocking call waits for its answer (ms, default 60_000, or
      `:infinity`); `timeout:` — how long this call waits for the outputs (default `:infinity`).

  A callback function that raises fails the execution with the exception's message; a handler
  process that dies fails its pending calls.
  """
  @spec run(Executable.t(), [Buffer.t()], keyword()) :: result([Buffer.t()])
  def run(%Executable{} = exe, args, opts \\ []) do
    with {:ok, run} <- run_async(exe, args, opts), do: await(run, Keyword.get(opts, :timeout, :infinity))
  end

  @doc "Same as `run/3`, raising the error."
  @spec run!(Executable.t(), [Buffer.t()], keyword()) :: [Buffer.t()]
  def run!(exe, args, opts \\ []), do: unwrap!(run(exe, args, opts))

  @doc """
  Starts an execution and returns at once with a `Plugboard.Run`; `await/2` collects the outputs.
  Host callbacks bound to functions run while this process is in `await/2`.
  """
  @spec run_async(Executable.t(), [Buffer.t()], keyword()) :: result(Run.t())
  def run_async(%Executable{resource: r} = exe, args, opts \\ []) when is_list(args) do
    with {:ok, routes, blocking, ordered} <- bindings(exe, opts) do
      ref = make_ref()

      limit =
        case Keyword.get(opts, :callback_timeout, 60_000) do
          :infinity -> nil
          ms when is_integer(ms) and ms >= 0 -> ms
        end

      case Native.execute(r, args, Keyword.get(opts, :donate, []), Keyword.get(opts, :device, 0), routes, limit, self(), ref) do
        :ok -> {:ok, %Run{ref: ref, blocking: blocking, ordered: ordered, executable: exe.name}}
        # Finished inside the call (a small program on CPU): nothing to wait for.
        {:done, outcome} -> {:ok, %Run{ref: ref, blocking: %{}, ordered: %{}, executable: exe.name, done: outcome}}
        {:error, _} = error -> error
      end
    end
  end

  # The routes of the program's host callbacks, and the functions this process runs for them.
  defp bindings(%Executable{callbacks: []}, _opts), do: {:ok, [], %{}, %{}}

  defp bindings(exe, opts) do
    blocking = Map.new(Keyword.get(opts, :callbacks, %{}), fn {k, v} -> {to_string(k), v} end)
    ordered = Map.new(Keyword.get(opts, :ordered, %{}), fn {k, v} -> {to_string(k), v} end)
    ordered = Map.put_new(ordered, "plugboard.print", :logger)
    functions = fn map -> for {k, f} <- map, is_function(f), into: %{}, do: {k, f} end

    with {:ok, routes} <- routes(exe, blocking, ordered),
         do: {:ok, routes, functions.(blocking), functions.(ordered)}
  end

  # One route per host callback the program calls that is bound here: {name, pid, ordered?}.
  defp routes(%Executable{callbacks: needed}, blocking, ordered) do
    Enum.reduce_while(needed, {:ok, []}, fn name, {:ok, acc} ->
      route =
        cond do
          Map.has_key?(blocking, name) -> {name, target(blocking[name]), false}
          Map.has_key?(ordered, name) -> {name, target(ordered[name]), true}
          true -> nil
        end

      case route do
        nil -> {:cont, {:ok, acc}}
        {_, nil, _} -> {:halt, {:error, Error.new(:unavailable, "the process for host callback #{name} is not running")}}
        {_, pid, _} = r when is_pid(pid) -> {:cont, {:ok, [r | acc]}}
      end
    end)
  end

  defp target(fun) when is_function(fun), do: self()
  defp target(pid) when is_pid(pid), do: pid
  defp target(:logger), do: Process.whereis(Plugboard.Printer)
  defp target(name) when is_atom(name), do: Process.whereis(name)

  @doc """
  Waits for an execution started by `run_async/3`: its outputs, or its error (the execution's own, a
  failed callback's, or the first error of an ordered callback function run here).
  """
  @spec await(Run.t(), timeout()) :: result([Buffer.t()])
  def await(run, timeout \\ :infinity)
  def await(%Run{done: nil} = run, timeout), do: await_loop(run, timeout, nil)
  def await(%Run{done: outcome}, _timeout), do: outcome

  # Only the calls bound to functions are this loop's; those bound to this very process stay in its
  # mailbox for it to read afterwards.
  defp await_loop(%Run{ref: ref, blocking: blocking, ordered: ordered} = run, timeout, ordered_error) do
    receive do
      {:plugboard_call, ^ref, %Call{name: name} = call} when is_map_key(blocking, name) ->
        answer(call, Map.get(run.blocking, call.name))
        await_loop(run, timeout, ordered_error)

      {:plugboard_ordered, ^ref, %OrderedCall{name: name} = call} when is_map_key(ordered, name) ->
        error = deliver_ordered(call, Map.get(run.ordered, call.name))
        await_loop(run, timeout, ordered_error || error)

      {:plugboard_done, ^ref, outcome} ->
        case {outcome, ordered_error} do
          {{:ok, _}, %Error{} = error} -> {:error, error}
          _ -> outcome
        end
    after
      timeout -> {:error, Error.new(:deadline_exceeded, "#{run.executable} did not finish in #{timeout} ms")}
    end
  end

  defp answer(%Call{} = call, fun) when is_function(fun) do
    result =
      try do
        if is_function(fun, 2), do: fun.(call.operands, call.attributes), else: fun.(call.operands)
      rescue
        e -> {:raised, Exception.format(:error, e, __STACKTRACE__)}
      catch
        kind, value -> {:raised, Exception.format(kind, value, __STACKTRACE__)}
      end

    case result do
      {:raised, text} -> fail(call, "raised " <> text)
      {:error, message} -> fail(call, to_string(message))
      results -> reply(call, results)
    end
  end

  defp deliver_ordered(%OrderedCall{} = call, fun) when is_function(fun, 1) do
    try do
      fun.(call)
      nil
    rescue
      e -> Error.new(:unknown, "ordered host callback #{call.name} raised #{Exception.message(e)}")
    end
  end

  @doc """
  Answers a blocking host call with its results: a list with one binary or `Plugboard.HostTensor`
  per result (or a single one), of the types in `call.results`. An answer that does not fit fails the
  call (and so the execution) with the same error it returns.
  """
  @spec reply(Call.t(), [binary() | HostTensor.t()] | binary() | HostTensor.t()) :: :ok | {:error, Error.t()}
  def reply(%Call{resource: r}, results), do: Native.reply(r, List.wrap(results))

  @doc "Fails a blocking host call: the execution fails with `message`."
  @spec fail(Call.t(), String.t()) :: :ok | {:error, Error.t()}
  def fail(%Call{resource: r}, message), do: Native.fail_call(r, message)

  defp unwrap!({:ok, value}), do: value
  defp unwrap!({:error, %Error{} = error}), do: raise(error)
end
