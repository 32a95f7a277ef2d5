defmodule Plugboard.KeyValueStore do
  @moduledoc """
  The key-value store a multi-host PJRT job needs, over Erlang distribution.

  A plugin whose client spans several hosts (the CUDA plugin with `num_nodes > 1`) publishes what
  each host has under keys of its own and waits for the other hosts' keys, through the `kv_get` /
  `kv_put` / `kv_try_get` callbacks given to `PJRT_Client_Create`. Open a store on every node of the
  job with the same namespace and pass it to `Plugboard.open/3`:

      {:ok, kv} = Plugboard.KeyValueStore.open("job-42")
      {:ok, client} = Plugboard.open(plugin, [], kv_store: kv, node_id: 0, num_nodes: 2)

  ## Design

    * **Who holds the data**: one process per cluster (a `Plugboard.KeyValueStore` server), registered
      in `:global` under `{Plugboard.KeyValueStore, cluster}` (`cluster:` option, default
      `:plugboard`), started by the first `open/2` on any node, on that node (the *leader*,
      `leader/1`), under the `:plugboard` application's `Plugboard.KeyValueStore.Supervisor` (so
      the application must run there). Every value lives there, per namespace; a `get` that finds
      no value waits there until a `put` of that key or its timeout (an ordered index of deadlines:
      thousands of gets expiring at once cost O(log n) each and are answered in batches, between
      which other calls are served).
    * **Timeouts**: an integer of ms in `0..4_294_967_295` (the longest timer the VM takes) or
      `:infinity`; anything else is refused with `:invalid_argument` naming it, before it reaches
      the leader. A plugin's `timeout_in_ms` beyond that range is no deadline.
    * **A leader that crashes** is not restarted with an empty store behind the job's back: its
      data is lost and reported: the gets waiting there fail `:unavailable` with a message naming
      how many keys were lost, the log says so, and `[:plugboard, :key_value_store, :lost]` is
      emitted (`%{keys, waiters}`, `%{cluster, reason, node}`); the next call starts an empty
      leader, as when the leader's node leaves.
    * **Keys namespaced per client**: a store handle carries its namespace, and every key it reads
      or writes is taken within it: two jobs (two clients) of one cluster never see each other's
      keys, while the nodes of one job share theirs by opening the same namespace.
    * **A finished job's keys are deleted**: the leader monitors every store (handler) opened on a
      namespace; when the last of them is gone (closed, or its opener exited), the namespace's keys
      go with it (logged), and a get still waiting on it fails `:unavailable`. A handle of a closed
      store is refused (`:unavailable`) rather than bringing the namespace back. A store on a node
      the leader lost the connection to (a partition, or the node stopped) is not known to be gone:
      it stays a member for `config :plugboard, key_value_store_away_ms:` (default 300_000) and is
      monitored again when its node is back; past that time it is dropped. A namespace dropped that
      way, or because its last store crashed, is data lost to a job that may still run: a warning
      and `[:plugboard, :key_value_store, :lost]` (metadata with `namespace`).
    * **The C++ side**: `open/2` starts a handler process on the calling node that owns a native
      `KeyValueStore` (c_src/nif_key_value.h). The plugin calls it from its own threads; each call
      sends the handler a message and waits (never on a scheduler) for the answer the handler
      gives through a NIF, after asking the leader from a process of its own (a slow `get` holds up
      no other call). `native_get/3`, `native_try_get/2` and `native_put/3` drive that very object,
      as the plugin would.
    * **A node leaving**: a node other than the leader takes nothing with it: what it put stays
      (the job's other nodes may still read it); its waiting gets simply end with it. When the
      leader leaves, the data goes with it: calls waiting there fail at once with `:unavailable`
      (the job cannot go on: its nodes exchanged keys through it, as PJRT's own coordination
      service would fail the job), and the next call from a surviving node starts an empty
      leader on that node (a new job can start). A handler process that exits makes its store's
      calls fail `:unavailable` at once.
    * **A split cluster heals by merging**: each side of a split runs a leader of its own; when
      they meet again `:global` asks `Server.resolve/3`, which keeps the leader on the lower node
      name. The other hands it its keys and its namespaces' stores (a call, answered once merged)
      and then stops; the calls waiting there are asked again of the kept leader (a get for what is
      left of its timeout), which holds the merged data by then. A key put
      on both sides with different values keeps the kept leader's value: the other is lost, and
      that is reported (a warning naming the keys, and `[:plugboard, :key_value_store, :merged]`
      with `%{keys, conflicts}` and `%{cluster, node, from_node, conflicting}`).
    * **Errors**: `get` past its timeout is `:deadline_exceeded`, `try_get` of a missing key
      `:not_found`, a lost leader `:unavailable`: the codes PJRT expects, and what reaches the
      plugin through the callbacks.
  """

  alias Plugboard.{Error, Native, Options}
  alias Plugboard.KeyValueStore.{Handler, Server}

  @enforce_keys [:namespace, :cluster, :handler]
  defstruct [:namespace, :cluster, :handler]

  @typedoc "A store handle: its namespace, its cluster, and the handler process (on this node)."
  @type t :: %__MODULE__{namespace: String.t(), cluster: atom(), handler: pid()}
  @type store :: t() | atom() | pid()

  @open_keys [:cluster, :call_timeout, :name, :link]

  @doc """
  Opens the store of `namespace` on this node: a handler process, which stops when the caller exits
  (whatever the reason) unless `link: false`, registered locally under `name:` when given (then
  `store` arguments may be that name). `cluster:` (default `:plugboard`) picks the cluster's leader; `call_timeout:` (ms, default
  10000) bounds how long a native `try_get` / `put` (and a `get`, beyond its own timeout) waits for
  the handler's answer.
  """
  @spec open(String.t(), keyword()) :: {:ok, t()} | {:error, Error.t()}
  def open(namespace, opts \\ []) do
    with :ok <- Options.known(opts, @open_keys, "KeyValueStore.open"),
         :ok <- check_namespace(namespace),
         {:ok, call_timeout} <- Options.timeout(opts, :call_timeout, 10_000),
         :ok <- check_cluster(opts[:cluster] || :plugboard),
         {:ok, _leader} <- Server.whereis_or_start(opts[:cluster] || :plugboard) do
      cluster = opts[:cluster] || :plugboard
      owner = if Keyword.get(opts, :link, true), do: self()
      gen_opts = if opts[:name], do: [name: opts[:name]], else: []
      timeout = if call_timeout == :infinity, do: 4_294_967_295, else: call_timeout

      case GenServer.start(Handler, {namespace, cluster, timeout, owner}, gen_opts) do
        {:ok, pid} -> join(%__MODULE__{namespace: namespace, cluster: cluster, handler: pid})
        {:error, {:already_started, _}} -> Options.invalid("KeyValueStore.open: name #{inspect(opts[:name])} is taken")
        {:error, {%Error{} = error, _}} -> {:error, error}
        {:error, reason} -> {:error, Error.new(:internal, "KeyValueStore.open: #{inspect(reason)}")}
      end
    end
  end

  # The leader counts the store among its namespace's (the namespace lives while one is open).
  defp join(%__MODULE__{namespace: ns, cluster: cluster, handler: pid} = kv) do
    case Server.request(cluster, {:join, ns, pid}, 10_000) do
      :ok ->
        {:ok, kv}

      {:error, _} = error ->
        GenServer.stop(pid)
        error
    end
  end

  @doc """
  Stops the store's handler: native calls through it, and Elixir calls through its handle, fail
  `:unavailable` from then on. The last store of a namespace closed (on every node) deletes the
  namespace's keys. A store already closed is `{:error, %Error{code: :unavailable}}`, an argument
  that is no store `{:error, %Error{code: :invalid_argument}}`.
  """
  @spec close(store()) :: :ok | {:error, Error.t()}
  def close(store) do
    with {:ok, pid} <- handler(store, "close") do
      GenServer.stop(pid)
    end
  catch
    :exit, _ -> closed(store)
  end

  @doc "The node holding the cluster's data (its leader), or nil when none runs."
  @spec leader(atom()) :: node() | nil
  def leader(cluster \\ :plugboard) do
    case Server.whereis(cluster) do
      pid when is_pid(pid) -> node(pid)
      :undefined -> nil
    end
  end

  @doc """
  Puts `value` under `key` in the store's namespace, from Elixir (not through the native store).

      iex> {:ok, store} = Plugboard.KeyValueStore.open("doc-example")
      iex> Plugboard.KeyValueStore.put(store, "rank0/address", "10.0.0.2:1234")
      :ok
      iex> Plugboard.KeyValueStore.try_get(store, "rank0/address")
      {:ok, "10.0.0.2:1234"}
      iex> {:error, error} = Plugboard.KeyValueStore.try_get(store, "rank1/address")
      iex> error.code
      :not_found
      iex> Plugboard.KeyValueStore.close(store)
      :ok
  """
  @spec put(store(), String.t(), binary()) :: :ok | {:error, Error.t()}
  def put(store, key, value) when is_binary(key) and is_binary(value) do
    with {:ok, {namespace, cluster, handler}} <- where(store, "put"),
         do: Server.request(cluster, {:put, handler, namespace, key, value}, 10_000)
  end

  def put(_store, key, value), do: bad_args("put", key: key, value: value)

  @doc """
  The value under `key`, waiting up to `timeout` for a put, from Elixir: an integer number of ms in
  `0..4_294_967_295` (the longest timer the VM takes, about 49.7 days) or `:infinity`; any other is
  refused with an error naming it.
  """
  @spec get(store(), String.t(), timeout()) :: {:ok, binary()} | {:error, Error.t()}
  def get(store, key, timeout) when is_binary(key) do
    with {:ok, timeout} <- check_timeout("get", timeout),
         {:ok, {namespace, cluster, handler}} <- where(store, "get"),
         do: Server.request(cluster, {:get, handler, namespace, key, timeout}, timeout)
  end

  def get(_store, key, timeout), do: bad_args("get", key: key, timeout: timeout)

  @doc "The value under `key` now, or `:not_found`, from Elixir."
  @spec try_get(store(), String.t()) :: {:ok, binary()} | {:error, Error.t()}
  def try_get(store, key) when is_binary(key) do
    with {:ok, {namespace, cluster, handler}} <- where(store, "try_get"),
         do: Server.request(cluster, {:try_get, handler, namespace, key}, 10_000)
  end

  def try_get(_store, key), do: bad_args("try_get", key: key)

  @doc """
  `get` through the native `KeyValueStore` object a client's plugin calls (on a plugboard thread,
  C++ -> handler -> leader -> back): what `kv_get` with `timeout_in_ms` does. `timeout` as for
  `get/3` (`:infinity` is the C++ store's `milliseconds::max()`).
  """
  @spec native_get(store(), binary(), timeout()) :: {:ok, binary()} | {:error, Error.t()}
  def native_get(store, key, timeout) when is_binary(key) do
    with {:ok, timeout} <- check_timeout("native_get", timeout), do: native(store, :get, key, timeout)
  end

  def native_get(_store, key, timeout), do: bad_args("native_get", key: key, timeout: timeout)

  @doc "`try_get` through the native store (what `kv_try_get` does)."
  @spec native_try_get(store(), binary()) :: {:ok, binary()} | {:error, Error.t()}
  def native_try_get(store, key) when is_binary(key), do: native(store, :try_get, key, nil)

  def native_try_get(_store, key), do: bad_args("native_try_get", key: key)

  @doc "`put` through the native store (what `kv_put` does)."
  @spec native_put(store(), binary(), binary()) :: :ok | {:error, Error.t()}
  def native_put(store, key, value) when is_binary(key) and is_binary(value), do: native(store, :put, key, value)

  def native_put(_store, key, value), do: bad_args("native_put", key: key, value: value)

  @doc false
  # The native store (a NIF resource) behind a handle, for Plugboard.open/3: resources do not cross
  # nodes, so it is always asked of the handler on this node.
  def resource(store), do: ask_handler(store, :resource, "resource")

  defp native(store, op, key, arg) do
    ref = make_ref()

    with {:ok, resource} <- resource(store),
         :ok <- Native.kv_call(resource, op, key, arg, ref) do
      receive do
        {^ref, result} -> result
      end
    end
  end

  # {namespace, cluster, handler}: a closed store (its handler gone) is refused here, so no call
  # through a stale handle brings a deleted namespace back.
  defp where(%__MODULE__{namespace: ns, cluster: cluster, handler: pid} = store, _function) do
    if node(pid) == node() and not Process.alive?(pid), do: closed(store), else: {:ok, {ns, cluster, pid}}
  end

  defp where(store, function), do: ask_handler(store, :where, function)

  defp ask_handler(store, question, function) do
    with {:ok, pid} <- handler(store, function), do: {:ok, GenServer.call(pid, question)}
  catch
    :exit, _ -> closed(store)
  end

  defp closed(store), do: {:error, Error.new(:unavailable, "key-value store: the handler of #{inspect(store, limit: 5)} is gone (the store is closed)")}

  defp handler(%__MODULE__{handler: pid}, _function) when is_pid(pid), do: {:ok, pid}
  defp handler(pid, function) when is_pid(pid), do: handler_or_invalid(pid, pid, function)

  defp handler(name, function) when is_atom(name) and name not in [nil, true, false] do
    case Process.whereis(name) do
      nil -> closed(name)
      pid -> handler_or_invalid(pid, name, function)
    end
  end

  defp handler(other, function), do: not_a_store(other, function)

  # A local process that is not a store's handler (another process's name or pid) is refused: it
  # must not be stopped by close/1 or asked a handler's questions. A gone one is a closed store.
  # Handlers register in Plugboard.KeyValueStore.Registry (an ETS lookup of the one pid: nothing of
  # the other process is copied).
  defp handler_or_invalid(pid, store, function) do
    cond do
      node(pid) != node() -> {:ok, pid}
      Registry.lookup(Plugboard.KeyValueStore.Registry, pid) != [] -> {:ok, pid}
      Process.alive?(pid) -> not_a_store(store, function)
      true -> closed(store)
    end
  rescue
    # No registry: the :plugboard application is not running here, so neither is any handler.
    ArgumentError -> not_a_store(store, function)
  end

  defp not_a_store(other, function),
    do: Options.invalid("KeyValueStore.#{function}: store must be a %Plugboard.KeyValueStore{}, the name it was opened under or its handler's pid, got #{inspect(other, limit: 5)}")

  # :infinity or 0..4_294_967_295 ms (the longest timer, and receive-after, the VM takes).
  defp check_timeout(function, timeout) do
    case Options.timeout([timeout: timeout], :timeout, nil) do
      {:ok, t} -> {:ok, t}
      {:error, %Error{} = e} -> {:error, %{e | message: "KeyValueStore.#{function}: " <> e.message}}
    end
  end

  defp bad_args(function, args) do
    Options.invalid(
      "KeyValueStore.#{function}: keys and values are binaries, got " <>
        Enum.map_join(args, ", ", fn {k, v} -> "#{k}: #{inspect(v, limit: 5)}" end)
    )
  end

  defp check_namespace(ns) when is_binary(ns) and ns != "", do: :ok
  defp check_namespace(ns), do: Options.invalid("KeyValueStore.open: the namespace must be a non-empty string, got #{inspect(ns)}")

  defp check_cluster(c) when is_atom(c), do: :ok
  defp check_cluster(c), do: Options.invalid("KeyValueStore.open: cluster must be an atom, got #{inspect(c)}")
end
