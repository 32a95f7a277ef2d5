defmodule Plugboard.Clients do
  @moduledoc """
  Choosing a target and starting its client (`boot/1`, what the application does at start), or
  opening one plugin directly (`open/3`); what a client has (`devices/1`) and how it ends (`close/1`,
  `notify_when_dropped/3`). `Plugboard` delegates these calls here.
  """
  alias Plugboard.{Client, Error, Native, Options, Report, Telemetry}

  @doc """
  The client the application booted (see `Plugboard.Application` for how the target is chosen).
  `{:error, %Error{code: :not_found}}` when no target was configured; `:unavailable` when the boot
  did not start one; `:failed_precondition` when the NIF could not be loaded on this host (the
  message names the missing libraries).

      iex> {:ok, client} = Plugboard.client()
      iex> client.platform
      "cpu"
  """
  @spec client() :: Plugboard.result(Client.t())
  def client do
    case :persistent_term.get({Plugboard, :boot}, nil) do
      %{client: %Client{} = client} -> {:ok, client}
      %{error: %Error{} = error} -> {:error, error}
      nil -> {:error, Native.load_error() || Error.new(:not_found, "plugboard has not booted a target (configure :plugboard, :bundle or set PLUGBOARD_TARGET)")}
    end
  end

  @doc "Same as `client/0`, raising the error."
  @spec client!() :: Client.t()
  def client!, do: Error.unwrap!(client())

  @doc """
  The booted target's selection report, or nil when plugboard did not boot: every candidate with its
  verdict and, for a failure, the stage and the reason (`Plugboard.Report`).

      iex> report = Plugboard.report()
      iex> report.chosen
      "cpu"
      iex> [candidate] = report.candidates
      iex> candidate.verdict
      :chosen
  """
  @spec report() :: Report.t() | nil
  def report do
    case :persistent_term.get({Plugboard, :boot}, nil) do
      %{report: report} -> report
      nil -> nil
    end
  end

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
  @spec discover(keyword()) :: Plugboard.result(Report.t())
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
  @spec open(Path.t(), [{String.t(), term()}], keyword()) :: Plugboard.result(Client.t())
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

  @doc """
  The client's addressable devices, with memory figures where the plugin reports them.

      iex> {:ok, [first | _]} = Plugboard.devices(Plugboard.client!())
      iex> {first.index, first.kind}
      {0, "cpu"}
  """
  @spec devices(Client.t()) :: Plugboard.result([map()])
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
end
