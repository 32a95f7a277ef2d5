defmodule Plugboard do
  @moduledoc """
  Runs StableHLO programs on whichever accelerator target the release booted: one release carries
  several PJRT plugins (a *bundle*) and picks one when it starts (`Plugboard.Application`).

      {:ok, client} = Plugboard.client()
      {:ok, exe} = Plugboard.compile(client, File.read!("add.mlir"))
      {:ok, x} = Plugboard.buffer(client, <<1.0::float-32-little, 2.0::float-32-little>>, :f32, {2})
      {:ok, [y]} = Plugboard.run(exe, [x, x])
      {:ok, bytes} = Plugboard.to_binary(y)

  Nothing here holds a normal BEAM scheduler for more than a millisecond: compilation, executions
  that may run long (the plugin may run a program inside its launch call), large copies and a
  client's teardown run on plugboard's threads or on dirty schedulers and answer by message;
  `compile/3`, `run/3` and `to_binary/2` wait for that message in a `receive`. Waiting is never
  shared: an execution held up in a host callback holds a thread of its own, never one that a
  compilation or another execution needs. A caller that gives up (`timeout:`) cancels what it waited
  for: no message for it arrives later, and its pending host calls fail.

  Native objects (clients, executables, buffers) are owned by the garbage collector; `free/1` lets go
  of a buffer's device memory now. Every function returns `{:ok, value}` or
  `{:error, %Plugboard.Error{}}` (every option is checked, and a bad one named); the bang variants
  raise the error. A cache keyed on a client keys on `client_id/1` and evicts on the message of
  `notify_when_dropped/3`: it never keeps the client alive.

  Device memory crosses to and from other libraries by address, without a copy: `device_pointer/1`
  (a buffer's address) and `buffer_from_pointer/5` (a view of memory someone else owns and keeps
  alive; never donatable).

  Host callbacks: a program's blocking custom calls (`stablehlo.custom_call @name` with results) go to
  an Elixir function run by the process waiting in `run/3` (or to a handler process), its ordered
  calls (`plugboard.print`, and names bound as ordered) to a process or to `Logger`, in program order.
  Routing is per execution: many processes may run one executable at once, each getting its own calls.
  """

  alias Plugboard.{Buffer, Call, Client, Error, Executable, HostTensor, Native, Options, OrderedCall, Report, Run, Telemetry}

  @typedoc "Element types, by plugboard's names."
  @type dtype ::
          :bool | :i8 | :i16 | :i32 | :i64 | :u8 | :u16 | :u32 | :u64 | :f16 | :bf16 | :f32 | :f64 | :c64 | :c128
          | :f8e5m2 | :f8e4m3fn
  @type result(t) :: {:ok, t} | {:error, Error.t()}

  @doc "The version of the native library."
  @spec version() :: String.t()
  def version, do: Native.version()

  # ------------------------------------------------------------------------------------------------
  # Selection

  @doc """
  The client the application booted (see `Plugboard.Application` for how the target is chosen).
  `{:error, %Error{code: :not_found}}` when no target was configured; `:unavailable` when the boot
  did not start one; `:failed_precondition` when the NIF could not be loaded on this host (the
  message names the missing libraries).
  """
  @spec client() :: result(Client.t())
  def client do
    case :persistent_term.get({__MODULE__, :boot}, nil) do
      %{client: %Client{} = client} -> {:ok, client}
      %{error: %Error{} = error} -> {:error, error}
      nil -> {:error, Native.load_error() || Error.new(:not_found, "plugboard has not booted a target (configure :plugboard, :bundle or set PLUGBOARD_TARGET)")}
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

  @doc "What every node of the cluster booted and runs: `Plugboard.Cluster.report/1`."
  @spec cluster_report(timeout()) :: [map()]
  defdelegate cluster_report(timeout \\ 2_000), to: Plugboard.Cluster, as: :report

  @selection_keys [:bundle, :target, :targets, :probes, :isolate, :use_environment, :policy_source]

  @doc """
  Chooses a target and starts it: `bundle:` (a bundle folder), `target:` (that one or fail),
  `targets:` (a preference list, falling back in order), `probes:` (device probes before loading,
  default true), `isolate:` (load in a child process first), `use_environment:` (default true: also
  read `PLUGBOARD_TARGET`, `PLUGBOARD_TARGETS`, `PLUGBOARD_PLUGIN_PATH`; what is given here wins),
  `policy_source:` (what the report names as where `target:`/`targets:` came from; default "the
  caller's settings").

  Runs on a dirty I/O scheduler. Returns the client with the report, or the error with the report
  (nil when the settings themselves were malformed).
  """
  @spec boot(keyword()) :: {:ok, Client.t(), Report.t()} | {:error, Error.t(), Report.t() | nil}
  def boot(opts \\ []) do
    start = Telemetry.boot_start()

    answer =
      with {:ok, settings} <- settings(opts),
           {:ok, resource, report, status} <- Native.boot(settings) do
        case {resource, status} do
          {nil, {:error, error}} -> {:error, error, report}
          {resource, :ok} ->
            case Client.wrap(resource, report.chosen) do
              {:ok, client} -> {:ok, client, report}
              {:error, error} -> {:error, error, report}
            end
        end
      else
        {:error, error} -> {:error, error, nil}
      end

    Telemetry.booted(answer, start)
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
           use_environment: Keyword.get(opts, :use_environment, true),
           policy_source: opts[:policy_source] && to_string(opts[:policy_source])
         }}

      unknown ->
        {:error, Error.new(:invalid_argument, "unknown selection option(s) #{inspect(unknown)}; known: #{inspect(@selection_keys)}")}
    end
  end

  @doc """
  Loads one plugin file and starts a client, without selection. `create_options` are the plugin's
  client options (`[{"cpu_device_count", 2}]`). The options plugboard knows are checked for type and
  range before the plugin sees them (`cpu_device_count`: an integer in 1..4096): `:invalid_argument`
  naming the option, the value, what is allowed and the plugin; others go to the plugin as given, and
  its refusal names the options. Runs on a dirty I/O scheduler.

  As one node of a multi-host job (`opts`): `kv_store:` a `Plugboard.KeyValueStore` (open on this
  node) that the plugin's `kv_get` / `kv_put` / `kv_try_get` reach, `node_id:` and `num_nodes:`
  passed as the create options of those names (only when given; 0 <= node_id < num_nodes), and
  `timeout:` (ms or `:infinity`, the default) for `PJRT_Client_Create`, which may wait for the other
  nodes. The client is then created on a plugboard thread, never a scheduler. A call that times
  out lets go of the client created after it gave up (no late reply reaches the caller).
  """
  @spec open(Path.t(), [{String.t(), term()}], keyword()) :: result(Client.t())
  def open(plugin, create_options \\ [], opts \\ [])

  def open(plugin, create_options, []) do
    with {:ok, resource} <- Native.open(Path.expand(plugin), create_options), do: Client.wrap(resource)
  end

  def open(plugin, create_options, opts) do
    with :ok <- Options.known(opts, [:kv_store, :node_id, :num_nodes, :timeout], "open"),
         {:ok, timeout} <- Options.timeout(opts, :timeout, :infinity),
         {:ok, node_id} <- Options.optional_index(opts, :node_id),
         {:ok, num_nodes} <- Options.optional_index(opts, :num_nodes),
         {:ok, store} <- kv_resource(opts[:kv_store]) do
      open_through_proxy(plugin, fn ref -> Native.open_distributed(Path.expand(plugin), create_options, store, node_id, num_nodes, ref) end, timeout)
    end
  end

  # The client is created for a process of its own, which hands it on: a caller that gives up
  # (`timeout:`) ends that process, and so does a caller that exits (the process monitors it), so a
  # client created later finds nobody to send to and is destroyed, rather than kept alive by a reply
  # left in the caller's mailbox or by a process waiting for a caller that is gone.
  defp open_through_proxy(plugin, start, timeout) do
    tag = make_ref()
    caller = self()

    {proxy, monitor} =
      spawn_monitor(fn ->
        caller_gone = Process.monitor(caller)
        ref = make_ref()

        case start.(ref) do
          :ok ->
            receive do
              {^ref, result} -> send(caller, {tag, result})
              {:DOWN, ^caller_gone, :process, _, _} -> :ok
            end

          error ->
            send(caller, {tag, error})
        end
      end)

    receive do
      {^tag, result} ->
        Process.demonitor(monitor, [:flush])
        opened(result)

      {:DOWN, ^monitor, :process, ^proxy, reason} ->
        {:error, Error.new(:internal, "open: #{plugin}: the process opening it exited: #{inspect(reason, limit: 5)}")}
    after
      timeout ->
        Process.exit(proxy, :kill)
        receive do: ({:DOWN, ^monitor, :process, ^proxy, _} -> :ok)

        # What the proxy sent before it ended is here now (signals between two processes keep their order).
        receive do
          {^tag, result} -> opened(result)
        after
          0 -> {:error, Error.new(:deadline_exceeded, "open: #{plugin} did not create its client within #{timeout} ms")}
        end
    end
  end

  defp opened({:ok, resource}), do: Client.wrap(resource)
  defp opened({:error, _} = error), do: error

  defp kv_resource(nil), do: {:ok, nil}
  defp kv_resource(%Plugboard.KeyValueStore{} = kv), do: Plugboard.KeyValueStore.resource(kv)
  defp kv_resource(other), do: Options.invalid("open: kv_store must be a %Plugboard.KeyValueStore{}, got #{inspect(other, limit: 3)}")

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

  @doc """
  An integer that identifies this client for the life of the VM: never given to another client, even
  after this one is gone. A cache keyed on it (rather than on the client term) does not keep the
  client alive; pair it with `notify_when_dropped/3` to evict the entries. Costs no more than a field
  read; still valid after `close/1`.
  """
  @spec client_id(Client.t()) :: non_neg_integer()
  def client_id(%Client{id: id}) when is_integer(id), do: id
  def client_id(%Client{resource: r}), do: Native.client_id(r)

  @doc """
  Registers plugboard's LAPACK kernels on the client's plugin, for programs that call them
  (`Plugboard.Nx` lowers `Nx.LinAlg.eigh` and `svd` to them on a CPU client): the custom-call
  targets `plugboard_lapack_ssyevd` / `_dsyevd` (symmetric eigendecomposition: `a {..., n, n}` to
  `w {..., n}` ascending and `v {..., n, n}`, eigenvectors as columns) and `plugboard_lapack_sgesdd` /
  `_dgesdd` (SVD: `a {..., m, n}` to `u`, `s` descending, `vt`, full or reduced as the results'
  shapes say), `api_version = 4`. LAPACK is the system's `liblapack.so.3` (Debian: `liblapack3`;
  the environment variable `PLUGBOARD_LAPACK` names another, unless a boot with `use_environment:
  false` succeeded in this VM: then the variable is not read; a CPU boot report's notes name the
  LAPACK), opened at the first call (a boot opens none). Errors:
  `:unimplemented` for a plugin that is not a CPU plugin (or has no FFI extension), `:not_found`
  without LAPACK. Later calls cost a lookup.
  """
  @spec declare_lapack(Client.t()) :: :ok | {:error, Error.t()}
  def declare_lapack(%Client{resource: r}), do: Native.client_declare_lapack(r)

  def declare_lapack(client), do: Options.invalid("declare_lapack: expected a %Plugboard.Client{}, got #{inspect(client, limit: 3)}")

  @doc """
  Sends `message` to `pid` once the client is gone: when the garbage collector destroys the client
  resource, that is once no term refers to it any more (neither this `%Plugboard.Client{}` nor any
  copy of it, in any process). `close/1` is not the end: the term still exists. Executables and
  buffers made from the client do not keep it (they hold the native client, not the term), so a cache
  that holds executables and keys them on `client_id/1` gets its message. Several processes may watch
  one client (each call adds one watcher); a watcher that has exited is skipped. The message is
  copied on a dirty CPU scheduler (a large one never holds a normal scheduler) and moved, not copied
  again, when it is sent.

      Plugboard.notify_when_dropped(client, self(), {:client_dropped, Plugboard.client_id(client)})
  """
  @spec notify_when_dropped(Client.t(), pid(), term()) :: :ok | {:error, Error.t()}
  def notify_when_dropped(%Client{resource: r}, pid, message) when is_pid(pid),
    do: Native.client_notify_when_dropped(r, pid, message)

  def notify_when_dropped(client, pid, _message),
    do: Options.invalid("notify_when_dropped: expected a %Plugboard.Client{} and a local pid, got #{inspect(client, limit: 3)} and #{inspect(pid)}")

  @doc """
  Live native objects by kind (`%{client: n, executable: n, buffer: n, call: n, ...}`): a leak check;
  and two counts since the VM loaded the NIF: `buffer_destroys_on_schedulers`, the device buffers
  destroyed (their last reference let go of) on a normal scheduler thread, and
  `message_copies_on_schedulers`, the `notify_when_dropped/3` messages copied on one. The garbage
  collector's destructors run on the collecting scheduler: a scheduler destroys the first 512 small
  buffers of a burst (at most 250 µs of them) itself and hands the rest, and any buffer over 1 MiB, to
  plugboard's threads, batched; a burst ends once the scheduler has run other work.
  """
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

  Several devices (SPMD): `partitions:` (how many parts XLA splits the program into, one per device),
  `partitioner:` (`:gspmd`, the program's `mhlo.sharding` attributes, or `:shardy`, its `sdy`
  dialect; which a plugin accepts is in the guide "Nx on plugboard", "Many devices"), `devices:` (the device indices
  partition by partition; default the first `partitions:`). The executable's `devices` lists where
  it runs; `run_partitioned/3` runs it.
  """
  @spec compile(Client.t(), binary() | {:file, Path.t()}, keyword()) :: result(Executable.t())
  def compile(client, program, opts \\ [])

  def compile(%Client{} = client, {:file, path}, opts) do
    case File.read(path) do
      {:ok, bytes} -> compile(client, bytes, Keyword.put_new(opts, :name, Path.basename(path)))
      {:error, reason} -> {:error, Error.new(:not_found, "cannot read program #{path}: #{:file.format_error(reason)}")}
    end
  end

  def compile(%Client{resource: r, target: target}, program, opts) when is_binary(program) do
    with :ok <- Options.known(opts, [:name, :callbacks, :xla_options, :plugin_defaults, :portable, :compile_cache, :timeout,
                                     :partitions, :partitioner, :devices], "compile"),
         {:ok, callbacks} <- Options.names(opts, :callbacks),
         {:ok, xla_options} <- Options.names(opts, :xla_options),
         {:ok, plugin_defaults} <- Options.boolean(opts, :plugin_defaults, false),
         {:ok, portable} <- Options.boolean(opts, :portable, false),
         {:ok, compile_cache} <- Options.boolean(opts, :compile_cache, true),
         {:ok, timeout} <- Options.timeout(opts, :timeout, :infinity),
         {:ok, partitioning} <- partitioning(opts),
         name = to_string(Keyword.get(opts, :name, "<inline>")),
         options = Map.merge(%{callbacks: callbacks, xla_options: xla_options, plugin_defaults: plugin_defaults, portable: portable,
                               compile_cache: compile_cache}, partitioning),
         ref = make_ref(),
         start = System.monotonic_time(),
         {:started, gate} <- Native.compile(r, program, name, options, self(), ref) do
      outcome =
        receive do
          {:plugboard_compiled, ^ref, outcome} -> outcome
        after
          timeout -> give_up(gate, ref, :plugboard_compiled, "compiling #{name} did not finish in #{timeout} ms")
        end

      # The NIF's executable has no target: its client's.
      outcome = with {:ok, exe} <- outcome, do: {:ok, Map.put(exe, :target, target)}
      Telemetry.compiled(outcome, name, target, start)
    end
  end

  def compile(client, program, _opts),
    do: Options.invalid("compile: expected a %Plugboard.Client{} and a program binary or {:file, path}, got #{inspect(client, limit: 3)} and #{inspect(program, limit: 3)}")

  # partitions:, partitioner:, devices: as the NIF takes them (none of them: nothing to add).
  defp partitioning(opts) do
    partitions = Keyword.get(opts, :partitions, 1)
    partitioner = Keyword.get(opts, :partitioner, if(partitions == 1, do: :none, else: nil))
    devices = Keyword.get(opts, :devices, [])

    cond do
      not (is_integer(partitions) and partitions >= 1 and partitions <= 32_768) ->
        Options.invalid("partitions: must be an integer in 1..32768, got #{inspect(partitions)}")

      partitioner not in [:none, :gspmd, :shardy] ->
        Options.invalid("partitioner: must be :gspmd or :shardy for #{partitions} partitions, got #{inspect(partitioner)}")

      not (is_list(devices) and Enum.all?(devices, &(is_integer(&1) and &1 >= 0 and &1 <= 2_147_483_647))) ->
        Options.invalid("devices: must be a list of device indices, got #{inspect(devices, limit: 5)}")

      devices != [] and length(devices) != partitions ->
        Options.invalid("devices: names #{length(devices)} device(s) for #{partitions} partition(s)")

      opts == [] or not Enum.any?([:partitions, :partitioner, :devices], &Keyword.has_key?(opts, &1)) ->
        {:ok, %{}}

      true ->
        {:ok, %{num_partitions: partitions, partitioner: Atom.to_string(partitioner), devices: devices}}
    end
  end

  @doc "Same as `compile/3`, raising the error."
  @spec compile!(Client.t(), binary() | {:file, Path.t()}, keyword()) :: Executable.t()
  def compile!(client, program, opts \\ []), do: unwrap!(compile(client, program, opts))

  # ------------------------------------------------------------------------------------------------
  # Buffers

  @doc """
  A device buffer from a binary of row-major little-endian elements (`byte_size` must be what dtype
  and shape call for; `:bool` elements are the bytes 0 and 1). A binary over 64 bytes is adopted
  rather than copied where the platform allows it (zero-copy on CPU when its bytes are 64-byte
  aligned); the binary is kept alive as long as the device uses it, and such a buffer is never
  donatable, wherever its bytes lie. Options: `device:` (index, default 0), `copy:` (default false:
  true copies the bytes, and the buffer can be donated). Copies of more than a MiB run on a dirty
  scheduler.
  """
  @spec buffer(Client.t(), binary(), dtype(), tuple(), keyword()) :: result(Buffer.t())
  def buffer(client, data, dtype, shape, opts \\ [])

  def buffer(%Client{resource: r}, data, dtype, shape, opts) when is_binary(data) and is_tuple(shape) do
    with :ok <- Options.known(opts, [:device, :copy], "buffer"),
         {:ok, device} <- Options.index(opts, :device, 0),
         {:ok, copy} <- Options.boolean(opts, :copy, false),
         do: Native.buffer_from_binary(r, data, dtype, shape, device, copy)
  end

  def buffer(client, data, _dtype, shape, _opts) do
    cond do
      not match?(%Client{}, client) -> Options.invalid("buffer: expected a %Plugboard.Client{}, got #{inspect(client, limit: 3)}")
      not is_binary(data) -> Options.invalid("buffer: data must be a binary, got #{inspect(data, limit: 3)}")
      true -> Options.invalid("buffer: shape must be a tuple of dimension sizes, got #{inspect(shape, limit: 5)}")
    end
  end

  @doc "Same as `buffer/5`, raising the error."
  @spec buffer!(Client.t(), binary(), dtype(), tuple(), keyword()) :: Buffer.t()
  def buffer!(client, data, dtype, shape, opts \\ []), do: unwrap!(buffer(client, data, dtype, shape, opts))

  @doc "The buffer's contents as a binary (waits for them to be computed)."
  @spec to_binary(Buffer.t(), timeout()) :: result(binary())
  def to_binary(buffer, timeout \\ :infinity)

  def to_binary(%Buffer{resource: r}, timeout) do
    ref = make_ref()

    with {:ok, timeout} <- Options.timeout([timeout: timeout], :timeout, :infinity),
         {:started, gate} <- Native.buffer_to_binary(r, self(), ref) do
      receive do
        {:plugboard_binary, ^ref, outcome} -> outcome
      after
        timeout -> give_up(gate, ref, :plugboard_binary, "the buffer was not read in #{timeout} ms")
      end
    end
  end

  def to_binary(other, _timeout), do: Options.invalid("to_binary: expected a %Plugboard.Buffer{}, got #{inspect(other, limit: 3)}")

  @doc "Same as `to_binary/2`, raising the error."
  @spec to_binary!(Buffer.t(), timeout()) :: binary()
  def to_binary!(buffer, timeout \\ :infinity), do: unwrap!(to_binary(buffer, timeout))

  @doc "The buffer's contents as a `Plugboard.HostTensor`."
  @spec to_host(Buffer.t(), timeout()) :: result(HostTensor.t())
  def to_host(%Buffer{} = buffer, timeout \\ :infinity) do
    with {:ok, data} <- to_binary(buffer, timeout),
         do: {:ok, %HostTensor{data: data, dtype: buffer.dtype, shape: buffer.shape}}
  end

  @doc "False once the buffer was donated to an execution or freed."
  @spec valid?(Buffer.t()) :: boolean()
  def valid?(%Buffer{resource: r}), do: Native.buffer_valid(r)

  @doc """
  Whether `run/3`'s `donate:` could take the buffer at the time of the call: it owns its memory (it
  is not a view of an immutable binary, as `buffer/5` makes of a binary over 64 bytes without
  `copy: true`, nor of an address, `buffer_from_pointer/5`), was neither donated nor freed, and
  nothing else is using it (a read in progress, an execution of it still starting). A library
  donating on a user's behalf passes the others as plain arguments (the plugin then copies what the
  program aliases); `run/3` refuses to donate them, naming the argument. The last condition can change
  the next moment: `run/3` refuses a buffer in use with `:aborted`, before anything runs, so the
  caller can run again without donating it.
  """
  @spec donatable?(Buffer.t()) :: boolean()
  def donatable?(%Buffer{resource: r}), do: Native.buffer_donatable(r)

  @doc """
  Releases the buffer's device memory now, rather than when the garbage collector finds its term
  unused (a term is small, so the GC may not hurry while device memory runs out). Every later use of
  the buffer is `:failed_precondition`, naming it. An execution running on it keeps the memory until
  it is done. Freeing twice is `:ok`; a donated buffer is an error.
  """
  @spec free(Buffer.t()) :: :ok | {:error, Error.t()}
  def free(%Buffer{resource: r}), do: Native.buffer_free(r)
  def free(other), do: Options.invalid("free: expected a %Plugboard.Buffer{}, got #{inspect(other, limit: 3)}")

  @doc """
  The address of the buffer's memory on its device (platform-dependent; on CPU a host address), for
  handing it to another library without a copy (as Nx's `to_pointer`). The address is valid only as
  long as the buffer lives and is neither freed nor donated: the caller keeps the `%Plugboard.Buffer{}`
  referenced while anything uses the address (a variable that is not used again may be garbage
  collected at once, and the device memory with it). Runs on a dirty CPU scheduler (the plugin may wait for the
  contents to be computed). `:unimplemented`, naming the plugin and `PJRT_Buffer_UnsafePointer`, for a
  plugin without it.
  """
  @spec device_pointer(Buffer.t()) :: result(non_neg_integer())
  def device_pointer(%Buffer{resource: r}), do: Native.buffer_device_pointer(r)
  def device_pointer(other), do: Options.invalid("device_pointer: expected a %Plugboard.Buffer{}, got #{inspect(other, limit: 3)}")

  @doc """
  A buffer over device memory at `address` (as `device_pointer/1` or another library gives it; on CPU
  a host address) holding a row-major array of `dtype` and `shape`: no copy, and no ownership. The
  buffer is a view: it keeps nothing alive, so whoever owns the memory (a `%Plugboard.Buffer{}`,
  another library) must keep it valid for as long as the view, or any output computed from it that
  may alias it, is in use. An address is just an integer: nothing can check it, and a wrong one
  crashes the VM; an address of 0 is refused. The view is never donatable. Options: `device:` (index,
  default 0); `size:` (the bytes the memory at `address` holds, as an `Nx.Pointer`'s `data_size`: a
  shape that needs more is refused, naming both, instead of reading past the end). The plugin may
  refuse an address (XLA's CPU client refuses a misaligned one); `:unimplemented`, naming the plugin
  and `PJRT_Client_CreateViewOfDeviceBuffer`, for a plugin without it.
  """
  @spec buffer_from_pointer(Client.t(), non_neg_integer(), dtype(), tuple(), keyword()) :: result(Buffer.t())
  def buffer_from_pointer(client, address, dtype, shape, opts \\ [])

  def buffer_from_pointer(%Client{resource: r}, address, dtype, shape, opts)
      when is_integer(address) and address >= 0 and is_tuple(shape) do
    with :ok <- Options.known(opts, [:device, :size], "buffer_from_pointer"),
         {:ok, device} <- Options.index(opts, :device, 0),
         {:ok, size} <- Options.optional_bytes(opts, :size),
         do: Native.buffer_from_pointer(r, address, dtype, shape, device, size)
  end

  def buffer_from_pointer(client, address, _dtype, shape, _opts) do
    cond do
      not match?(%Client{}, client) -> Options.invalid("buffer_from_pointer: expected a %Plugboard.Client{}, got #{inspect(client, limit: 3)}")
      not (is_integer(address) and address >= 0) -> Options.invalid("buffer_from_pointer: address must be a non-negative integer, got #{inspect(address, limit: 3)}")
      true -> Options.invalid("buffer_from_pointer: shape must be a tuple of dimension sizes, got #{inspect(shape, limit: 5)}")
    end
  end

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
    * `donate: [index]` — arguments given up to the execution (they become invalid). One that
      something else is using at that moment (a read, another execution still starting) is refused
      with `:aborted` before anything runs.
    * `device:` — device index (a program compiled `portable: true` for another than 0).
    * `callback_timeout:` — how long a blocking call waits for its answer (ms, default 60_000, or
      `:infinity`); `timeout:` — how long this call waits for the outputs (default `:infinity`).
      A call that gives up cancels the execution's waiting: its pending host calls fail, its thread
      is freed, and no message for it arrives later (a program already running on the device runs
      to its end: PJRT cannot stop it).

  A callback function that raises, throws or exits fails the execution with the reason; a handler
  process that dies fails its pending calls. While a blocking call waits for a process's answer, a
  run that process starts on the same device of the same client fails at once with
  `:failed_precondition`: XLA's CPU client may run the waiting execution in order with the device's
  others, so the new one would wait for it, and it for the answer (compute on the operands, or on
  another device or client). A call that is not answered holds the later executions on its device
  (any process's) until `callback_timeout:`, and nothing else (compiles, transfers, other devices).
  """
  @spec run(Executable.t(), [Buffer.t()], keyword()) :: result([Buffer.t()])
  def run(exe, args, opts \\ [])

  # The common call: a program without host callbacks, no options (nothing to check). The run is
  # awaited here, so nobody else can await it (a private Plugboard.Run: `shared?` false).
  def run(%Executable{callbacks: []} = exe, args, []) when is_list(args) do
    with {:ok, run} <- start(exe, args, [], 0, [], nil, %{}, %{}, false), do: await(run, :infinity)
  end

  def run(exe, args, opts) do
    with {:ok, timeout} <- Options.timeout(if(Keyword.keyword?(opts), do: opts, else: []), :timeout, :infinity),
         {:ok, run} <- launch(exe, args, opts, false),
         do: await(run, timeout)
  end

  @doc "Same as `run/3`, raising the error."
  @spec run!(Executable.t(), [Buffer.t()], keyword()) :: [Buffer.t()]
  def run!(exe, args, opts \\ []), do: unwrap!(run(exe, args, opts))

  @doc """
  Runs a program compiled for several devices (`compile/3` with `partitions:`) on all of them at
  once: `args_per_device` has one list of buffers per device in `exe.devices`, in that order, each
  on its device (that device's part of each array). Returns `{:ok, outputs_per_device}`, one list
  of output buffers per device, in the same order, each on its device.

  Options: `donate:` (argument indices given up, in every device's list), `timeout:` (as `run/3`).
  Host callbacks are not carried across devices: a program that calls any is refused.
  """
  @spec run_partitioned(Executable.t(), [[Buffer.t()]], keyword()) :: result([[Buffer.t()]])
  def run_partitioned(exe, args_per_device, opts \\ [])

  def run_partitioned(%Executable{resource: r} = exe, [_ | _] = args_per_device, opts) when is_list(opts) do
    with :ok <- Options.known(opts, [:donate, :timeout], "run_partitioned"),
         {:ok, timeout} <- Options.timeout(opts, :timeout, :infinity),
         {:ok, donate} <- donate(opts),
         true <- Enum.all?(args_per_device, &is_list/1) || Options.invalid("run_partitioned: each device's arguments must be a list of buffers"),
         ref = make_ref(),
         span = Telemetry.run_start(exe.name, exe.target, exe.devices, false) do
      case Native.execute_partitioned(r, args_per_device, donate, self(), ref) do
        {:started, gate} ->
          await(%Run{ref: ref, gate: gate, blocking: %{}, ordered: %{}, executable: exe.name, telemetry: span}, timeout)

        error -> Telemetry.run_stop(span, error)
      end
    end
  end

  def run_partitioned(exe, args, _opts),
    do: Options.invalid("run_partitioned: expected a %Plugboard.Executable{} and a non-empty list of argument lists, got #{inspect(exe, limit: 3)} and #{inspect(args, limit: 3)}")

  @doc "Same as `run_partitioned/3`, raising the error."
  @spec run_partitioned!(Executable.t(), [[Buffer.t()]], keyword()) :: [[Buffer.t()]]
  def run_partitioned!(exe, args_per_device, opts \\ []), do: unwrap!(run_partitioned(exe, args_per_device, opts))

  @doc """
  Starts an execution and returns at once with a `Plugboard.Run`; `await/2` collects the outputs.
  Host callbacks bound to functions run while this process is in `await/2`.
  """
  @spec run_async(Executable.t(), [Buffer.t()], keyword()) :: result(Run.t())
  def run_async(exe, args, opts \\ [])

  def run_async(exe, args, opts), do: launch(exe, args, opts, true)

  # run_async/3, and run/3 with options (`shared?` false: run/3 awaits it itself).
  defp launch(%Executable{callbacks: []} = exe, args, [], shared?) when is_list(args),
    do: start(exe, args, [], 0, [], nil, %{}, %{}, shared?)

  defp launch(%Executable{} = exe, args, opts, shared?) when is_list(args) do
    with :ok <- Options.known(opts, [:callbacks, :ordered, :donate, :device, :callback_timeout, :timeout], "run"),
         {:ok, _} <- Options.timeout(opts, :timeout, :infinity),
         {:ok, limit} <- Options.timeout(opts, :callback_timeout, 60_000),
         {:ok, device} <- Options.index(opts, :device, 0),
         {:ok, donate} <- donate(opts),
         {:ok, routes, blocking, ordered} <- bindings(exe, opts) do
      start(exe, args, donate, device, routes, if(limit == :infinity, do: nil, else: limit), blocking, ordered, shared?)
    end
  end

  defp launch(exe, args, _opts, _shared?),
    do: Options.invalid("run: expected a %Plugboard.Executable{} and a list of buffers, got #{inspect(exe, limit: 3)} and #{inspect(args, limit: 3)}")

  defp start(%Executable{resource: r} = exe, args, donate, device, routes, limit, blocking, ordered, shared?) do
    ref = make_ref()
    span = Telemetry.run_start(exe.name, exe.target, device, shared?)

    case Native.execute(r, args, donate, device, routes, limit, self(), ref) do
      {:started, gate} ->
        {:ok, %Run{ref: ref, gate: gate, blocking: blocking, ordered: ordered, executable: exe.name, telemetry: span}}

      # Finished inside the call (a small program on CPU): nothing to wait for.
      {:done, outcome} -> {:ok, %Run{ref: ref, blocking: %{}, ordered: %{}, executable: exe.name, done: outcome, telemetry: span}}
      {:error, _} = error -> Telemetry.run_stop(span, error)
      # A trace is being recorded: the NIF says so with the run's start (Plugboard.Trace), which
      # costs the untraced run nothing (no check of its own).
      {:started, gate, t0} ->
        {:ok, %Run{ref: ref, gate: gate, blocking: blocking, ordered: ordered, executable: exe.name, telemetry: span, trace: t0}}

      {:done, outcome, t0} -> {:ok, %Run{ref: ref, blocking: %{}, ordered: %{}, executable: exe.name, done: outcome, telemetry: span, trace: t0}}
    end
  end

  defp donate(opts) do
    case Keyword.get(opts, :donate, []) do
      list when is_list(list) -> {:ok, list}
      other -> Options.invalid("donate: must be a list of argument indices, got #{inspect(other, limit: 5)}")
    end
  end

  # The routes of the program's host callbacks, and the functions this process runs for them.
  defp bindings(%Executable{callbacks: []}, opts) do
    # Checked even when the program calls nothing: a malformed binding is the caller's mistake.
    with {:ok, _} <- blocking_bindings(opts), {:ok, _} <- ordered_bindings(opts), do: {:ok, [], %{}, %{}}
  end

  defp bindings(exe, opts) do
    with {:ok, blocking} <- blocking_bindings(opts),
         {:ok, ordered} <- ordered_bindings(opts),
         ordered = Map.put_new(ordered, "plugboard.print", :logger),
         {:ok, routes} <- routes(exe, blocking, ordered) do
      functions = fn map -> for {k, f} <- map, is_function(f), into: %{}, do: {k, f} end
      {:ok, routes, functions.(blocking), functions.(ordered)}
    end
  end

  defp blocking_bindings(opts),
    do: Options.bindings(opts, :callbacks, &(is_function(&1, 1) or is_function(&1, 2) or is_pid(&1) or registered_name?(&1)),
                         "a function of arity 1 or 2, a pid or a registered process name")

  defp ordered_bindings(opts),
    do: Options.bindings(opts, :ordered, &(is_function(&1, 1) or is_pid(&1) or registered_name?(&1)),
                         "a function of arity 1, a pid, a registered process name or :logger")

  defp registered_name?(name), do: is_atom(name) and name not in [nil, true, false]

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
  failed callback's, or the first error of an ordered callback function run here). `timeout` (ms or
  `:infinity`) bounds the whole wait; when it passes, the execution is cancelled (as `run/3`'s
  `timeout:`) and the result is `{:error, %Plugboard.Error{code: :deadline_exceeded}}`, unless its
  outcome arrived meanwhile. Awaiting a cancelled run again is `:cancelled` at once.
  """
  @spec await(Run.t(), timeout()) :: result([Buffer.t()])
  def await(run, timeout \\ :infinity)

  def await(%Run{done: nil} = run, timeout) do
    with {:ok, timeout} <- Options.timeout([timeout: timeout], :timeout, :infinity) do
      if Native.cancelled?(run.gate) do
        {:error, Error.new(:cancelled, "#{run.executable}: this run was cancelled when an earlier wait for it gave up")}
      else
        deadline = if timeout == :infinity, do: :infinity, else: System.monotonic_time(:millisecond) + timeout
        outcome = Telemetry.run_stop(run.telemetry, await_loop(run, deadline, nil, timeout))
        if run.trace, do: traced(run, outcome), else: outcome
      end
    end
  end

  def await(%Run{done: outcome, telemetry: span, trace: nil}, _timeout), do: Telemetry.run_stop(span, outcome)
  def await(%Run{done: outcome, telemetry: span} = run, _timeout), do: traced(run, Telemetry.run_stop(span, outcome))

  # The run's span in the trace: from the launch (the NIF's start) to the outcome in this process.
  defp traced(%Run{trace: t0, executable: executable}, outcome) do
    Plugboard.Trace.own("run", "elixir", t0, %{executable: executable, result: if(match?({:ok, _}, outcome), do: "ok", else: "error")})
    outcome
  end

  # Only the calls bound to functions are this loop's; those bound to this very process stay in its
  # mailbox for it to read afterwards.
  defp await_loop(%Run{ref: ref, blocking: blocking, ordered: ordered} = run, deadline, ordered_error, timeout) do
    receive do
      {:plugboard_call, ^ref, %Call{name: name} = call} when is_map_key(blocking, name) ->
        # Past the deadline this process has stopped waiting: a call found in its mailbox then is not
        # answered (a run with timeout: 0 never waits on its callbacks), cancel fails it.
        if remaining(deadline) == 0 do
          :ok = Native.cancel(run.gate)
          drain(run, ordered_error, timeout)
        else
          answer(call, Map.get(run.blocking, call.name), run.executable)
          await_loop(run, deadline, ordered_error, timeout)
        end

      {:plugboard_ordered, ^ref, %OrderedCall{name: name} = call} when is_map_key(ordered, name) ->
        error = deliver_ordered(call, Map.get(run.ordered, call.name), run.executable)
        await_loop(run, deadline, ordered_error || error, timeout)

      {:plugboard_done, ^ref, outcome} ->
        finish(outcome, ordered_error)
    after
      remaining(deadline) ->
        :ok = Native.cancel(run.gate)
        drain(run, ordered_error, timeout)
    end
  end

  defp finish({:ok, _}, %Error{} = ordered_error), do: {:error, ordered_error}
  defp finish(outcome, _), do: outcome

  defp remaining(:infinity), do: :infinity
  defp remaining(deadline), do: max(deadline - System.monotonic_time(:millisecond), 0)

  # After cancel/1 nothing more comes for this run. What came already: ordered calls are delivered
  # (they happened, in program order, all before the outcome), blocking calls are dropped (cancel
  # failed them), and an outcome that arrived before the cancel is still the answer.
  defp drain(%Run{ref: ref, ordered: ordered} = run, ordered_error, timeout) do
    receive do
      {:plugboard_ordered, ^ref, %OrderedCall{name: name} = call} when is_map_key(ordered, name) ->
        drain(run, ordered_error || deliver_ordered(call, Map.get(ordered, name), run.executable), timeout)

      {:plugboard_done, ^ref, outcome} ->
        flush(ref)
        finish(outcome, ordered_error)
    after
      0 ->
        flush(ref)
        {:error, Error.new(:deadline_exceeded, "#{run.executable} did not finish in #{timeout} ms (cancelled)")}
    end
  end

  # The caller stops waiting: nothing more is sent for `ref` (its pending host calls fail), and what
  # was sent already leaves the mailbox. An outcome that arrived meanwhile is still the answer.
  defp give_up(gate, ref, outcome_tag, message) do
    :ok = Native.cancel(gate)

    result =
      receive do
        {^outcome_tag, ^ref, outcome} -> outcome
      after
        0 -> {:error, Error.new(:deadline_exceeded, message)}
      end

    flush(ref)
    result
  end

  defp flush(ref) do
    receive do
      {tag, ^ref, _} when tag in [:plugboard_call, :plugboard_ordered, :plugboard_done, :plugboard_compiled, :plugboard_binary] ->
        flush(ref)
    after
      0 -> :ok
    end
  end

  defp answer(%Call{} = call, fun, executable) when is_function(fun) do
    result =
      try do
        Telemetry.span([:plugboard, :host_callback], %{name: call.name, ordered: false, executable: executable}, fn ->
          results =
            Plugboard.Trace.span("host_callback", "elixir", %{target: call.name, executable: executable}, fn ->
              if is_function(fun, 2), do: fun.(call.operands, call.attributes), else: fun.(call.operands)
            end)

          {results, %{name: call.name, ordered: false, executable: executable, result: if(match?({:error, _}, results), do: :error, else: :ok)}}
        end)
      rescue
        e -> {:raised, Exception.format(:error, e, __STACKTRACE__)}
      catch
        kind, value -> {:raised, Exception.format(kind, value, __STACKTRACE__)}
      end

    case result do
      {:raised, text} -> fail(call, "raised " <> text)
      {:error, message} when is_binary(message) -> fail(call, message)
      {:error, reason} -> fail(call, inspect(reason))
      results -> reply(call, results)
    end
  end

  defp deliver_ordered(%OrderedCall{} = call, fun, executable) when is_function(fun, 1) do
    metadata = %{name: call.name, ordered: true, executable: executable}

    try do
      Telemetry.span([:plugboard, :host_callback], metadata, fn ->
        Plugboard.Trace.span("ordered_host_callback", "elixir", %{target: call.name, executable: executable, sequence: call.sequence}, fn -> fun.(call) end)
        {:ok, Map.put(metadata, :result, :ok)}
      end)
      nil
    rescue
      e -> Error.new(:unknown, "ordered host callback #{call.name} raised #{Exception.message(e)}")
    catch
      kind, value -> Error.new(:unknown, "ordered host callback #{call.name} failed: #{Exception.format_banner(kind, value)}")
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
  def fail(%Call{resource: r}, message) when is_binary(message), do: Native.fail_call(r, message)
  def fail(%Call{} = call, reason), do: fail(call, inspect(reason))

  defp unwrap!({:ok, value}), do: value
  defp unwrap!({:error, %Error{} = error}), do: raise(error)
end
