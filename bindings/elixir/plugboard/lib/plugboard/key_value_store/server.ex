defmodule Plugboard.KeyValueStore.Server do
  @moduledoc false
  # The cluster's data (see Plugboard.KeyValueStore): one process, registered in :global, started
  # under Plugboard.KeyValueStore.Supervisor (the :plugboard application's tree), holding
  #   data:      %{namespace => %{key => value}}
  #   waiting:   %{namespace => %{key => %{id => {from, deadline | :infinity, timeout}}}}
  #   deadlines: :gb_sets of {deadline, id, namespace, key} (deadline: monotonic ms), and one timer,
  #              for the earliest of them
  #   members:   %{namespace => MapSet of handler pids}, monitored (handlers: pid => namespace)
  # Every operation is a few map or gb_sets operations (O(log n)): expiring a get never walks the
  # others, and the gets due at one time expire in batches of @expire_batch, each its own message,
  # so calls that came meanwhile are answered between them. A namespace whose last handler is gone
  # (its job finished: every store opened on it closed, or its nodes left) is deleted with its keys.
  use GenServer
  require Logger

  alias Plugboard.{Error, Telemetry}

  @expire_batch 200

  # The longest timer (and GenServer.call limit) the VM takes: `receive ... after` refuses more.
  @max_timeout 4_294_967_295

  def max_timeout, do: @max_timeout

  def name(cluster), do: {Plugboard.KeyValueStore, cluster}

  def whereis(cluster), do: :global.whereis_name(name(cluster))

  @doc false
  def child_spec(cluster), do: %{id: __MODULE__, start: {__MODULE__, :start_link, [cluster]}, restart: :temporary}

  @doc false
  def start_link(cluster), do: GenServer.start_link(__MODULE__, cluster)

  # The leader's pid; started on this node, under this node's Plugboard.KeyValueStore.Supervisor
  # (it outlives the caller, for as long as the :plugboard application runs), when none runs in the
  # cluster. Before starting one, :global is brought in step with the nodes this one is connected
  # to (a node that has just joined would otherwise not see the leader yet).
  def whereis_or_start(cluster) do
    case whereis(cluster) do
      pid when is_pid(pid) -> {:ok, pid}
      :undefined -> sync_then_start(cluster)
    end
  end

  defp sync_then_start(cluster) do
    :global.sync()

    with :undefined <- whereis(cluster),
         {:started, _} <- {:started, start_leader(cluster)},
         pid when is_pid(pid) <- whereis(cluster) do
      {:ok, pid}
    else
      pid when is_pid(pid) -> {:ok, pid}
      {:started, {:error, %Error{} = error}} -> {:error, error}
      :undefined -> {:error, Error.new(:unavailable, "key-value store: the leader of #{inspect(cluster)} stopped as it started")}
    end
  end

  defp start_leader(cluster) do
    # :ignore: another node registered its leader first (init lost the race); whereis finds it.
    DynamicSupervisor.start_child(Plugboard.KeyValueStore.Supervisor, {__MODULE__, cluster})
  catch
    :exit, _ ->
      {:error,
       Error.new(:failed_precondition,
         "key-value store: the :plugboard application is not started on #{node()} (its supervisor holds the cluster's leader)")}
  end

  # A call to the leader (started when none runs). `wait` is how long the leader may take (a get's
  # timeout, :infinity included); the leader answers every request itself, so the call's own limit
  # only guards a stuck one. A leader lost meanwhile is :unavailable; one that merged into another
  # (a healed split) is asked again there, a get for what is left of its timeout.
  def request(cluster, request, wait) do
    with {:ok, pid} <- whereis_or_start(cluster) do
      limit = if wait == :infinity or wait > @max_timeout - 5_000, do: :infinity, else: wait + 5_000
      start = System.monotonic_time(:millisecond)

      try do
        GenServer.call(pid, request, limit)
      catch
        :exit, {{:shutdown, {:merged_into, _}}, _} ->
          left = if wait == :infinity, do: :infinity, else: max(wait - (System.monotonic_time(:millisecond) - start), 0)
          request(cluster, with_timeout(request, left), left)

        :exit, {:timeout, _} ->
          {:error, Error.new(:deadline_exceeded, "key-value store: the leader on #{node(pid)} did not answer within #{limit} ms")}

        :exit, {reason, _} ->
          {:error, Error.new(:unavailable, "key-value store: the leader on #{node(pid)} is gone (#{inspect(reason, limit: 5)})")}
      end
    end
  end

  defp with_timeout({:get, handler, ns, key, _}, left), do: {:get, handler, ns, key, left}
  defp with_timeout(request, _left), do: request

  # A timeout as the leader takes it: an integer of ms (a native get passes what the plugin gave,
  # up to int64's maximum) beyond the longest timer is no deadline at all.
  def leader_timeout(ms) when is_integer(ms) and ms > @max_timeout, do: :infinity
  def leader_timeout(ms) when is_integer(ms), do: max(ms, 0)
  def leader_timeout(:infinity), do: :infinity

  # :global keeps one of two leaders when a split cluster heals (the pids, registered on each side):
  # the one on the lower node name, so both sides agree. The other hands its keys and its
  # namespaces' handlers to the one kept, which merges them (see merge/3) and reports what could not
  # be merged, then stops with {:shutdown, {:merged_into, keep}}: the calls waiting there (its gets)
  # and those still in its mailbox are asked again of the one kept (request/3).
  def resolve(_name, pid1, pid2) do
    [keep, other] = Enum.sort_by([pid1, pid2], &{node(&1), &1})
    send(other, {:merge_into, keep})
    keep
  end

  @impl true
  def init(cluster) do
    Process.flag(:trap_exit, true)

    case :global.register_name(name(cluster), self(), &__MODULE__.resolve/3) do
      :yes -> {:ok, %{cluster: cluster, data: %{}, waiting: %{}, deadlines: :gb_sets.empty(), timer: nil, members: %{}, handlers: %{}}}
      :no -> :ignore
    end
  end

  @impl true
  def handle_call({:join, ns, handler}, _from, state), do: {:reply, :ok, join(state, ns, handler)}

  def handle_call({:put, handler, ns, key, value}, _from, state) do
    state = join(state, ns, handler)
    {:reply, :ok, store(state, ns, key, value)}
  end

  def handle_call({:try_get, handler, ns, key}, _from, state) do
    state = join(state, ns, handler)

    case fetch(state, ns, key) do
      {:ok, value} -> {:reply, {:ok, value}, state}
      :error -> {:reply, {:error, Error.new(:not_found, "key-value store: no value for key #{inspect(key)} in namespace #{inspect(ns)}")}, state}
    end
  end

  def handle_call({:get, handler, ns, key, timeout}, from, state) do
    state = join(state, ns, handler)

    case fetch(state, ns, key) do
      {:ok, value} -> {:reply, {:ok, value}, state}
      :error -> {:noreply, state |> add_waiter(ns, key, from, leader_timeout(timeout), deadline(leader_timeout(timeout))) |> arm()}
    end
  end

  @impl true
  def handle_cast({:merge, from_node, other}, state), do: {:noreply, merge(state, from_node, other)}

  @impl true
  def handle_info(:expire_due, state) do
    now = System.monotonic_time(:millisecond)
    state = expire_due(%{state | timer: nil}, now, @expire_batch)

    case next_deadline(state) do
      # More are due: the next batch after what is in the mailbox now.
      at when is_integer(at) and at <= now ->
        send(self(), :expire_due)
        {:noreply, %{state | timer: {:queued, at}}}

      _ ->
        {:noreply, arm(state)}
    end
  end

  def handle_info({:DOWN, _, :process, handler, _}, state) do
    case Map.pop(state.handlers, handler) do
      {nil, _} -> {:noreply, state}
      {ns, handlers} -> {:noreply, leave(%{state | handlers: handlers}, ns, handler)}
    end
  end

  # This leader lost :global's resolution of a healed split (resolve/3): everything goes to `keep`.
  def handle_info({:merge_into, keep}, state) do
    GenServer.cast(keep, {:merge, node(), Map.take(state, [:data, :handlers])})
    {:stop, {:shutdown, {:merged_into, keep}}, %{state | data: %{}, waiting: %{}}}
  end

  # A crash (or a shutdown) loses the data: the callers waiting here get an error that says so, and
  # the loss is reported (Logger, and the [:plugboard, :key_value_store, :lost] event) rather than a
  # later get finding an empty store. A leader that handed its data over stops with nothing to lose.
  @impl true
  def terminate(reason, state) do
    keys = Enum.reduce(state.data, 0, fn {_, keys}, n -> n + map_size(keys) end)
    waiters = waiters(state)

    if keys > 0 or waiters != [] do
      message =
        "key-value store: the leader of #{inspect(state.cluster)} on #{node()} stopped (#{inspect(reason, limit: 5)}): " <>
          "#{keys} key(s) in #{map_size(state.data)} namespace(s) lost, #{length(waiters)} waiting get(s) failed"

      for {_, _, {from, _, _}} <- waiters, do: GenServer.reply(from, {:error, Error.new(:unavailable, message)})
      # A stop of the application (or the node) is no fault: said, not alarmed.
      if reason == :shutdown or match?({:shutdown, _}, reason), do: Logger.info(message), else: Logger.error(message)
      Telemetry.execute([:plugboard, :key_value_store, :lost], %{keys: keys, waiters: length(waiters)}, %{cluster: state.cluster, reason: reason, node: node()})
    end

    :ok
  end

  # ------------------------------------------------------------------------------------------------

  defp fetch(state, ns, key), do: state.data |> Map.get(ns, %{}) |> Map.fetch(key)

  defp store(state, ns, key, value) do
    {waiters, state} = pop_waiters(state, ns, key)
    for {from, _, _} <- waiters, do: GenServer.reply(from, {:ok, value})

    %{state | data: Map.update(state.data, ns, %{key => value}, &Map.put(&1, key, value))}
  end

  defp deadline(:infinity), do: :infinity
  defp deadline(ms), do: System.monotonic_time(:millisecond) + ms

  defp add_waiter(state, ns, key, from, timeout, deadline) do
    id = make_ref()
    keys = Map.get(state.waiting, ns, %{})
    ids = keys |> Map.get(key, %{}) |> Map.put(id, {from, deadline, timeout})
    deadlines = if deadline == :infinity, do: state.deadlines, else: :gb_sets.add({deadline, id, ns, key}, state.deadlines)
    %{state | waiting: Map.put(state.waiting, ns, Map.put(keys, key, ids)), deadlines: deadlines}
  end

  # The waiters of `key`, as a list, taken out of the state (and out of the deadline index).
  defp pop_waiters(state, ns, key) do
    keys = Map.get(state.waiting, ns, %{})
    {ids, keys} = Map.pop(keys, key, %{})
    deadlines = Enum.reduce(ids, state.deadlines, fn {id, {_, deadline, _}}, set -> :gb_sets.del_element({deadline, id, ns, key}, set) end)
    {Map.values(ids), %{state | waiting: put_keys(state.waiting, ns, keys), deadlines: deadlines}}
  end

  defp put_keys(waiting, ns, keys) when keys == %{}, do: Map.delete(waiting, ns)
  defp put_keys(waiting, ns, keys), do: Map.put(waiting, ns, keys)

  # At most `left` of the gets whose deadline is `now` or before, answered :deadline_exceeded.
  defp expire_due(state, now, left) do
    with true <- left > 0 and not :gb_sets.is_empty(state.deadlines),
         {{deadline, id, ns, key}, deadlines} when deadline <= now <- :gb_sets.take_smallest(state.deadlines) do
      keys = Map.fetch!(state.waiting, ns)
      {{from, _, timeout}, ids} = keys |> Map.fetch!(key) |> Map.pop(id)
      GenServer.reply(from, {:error, Error.new(:deadline_exceeded, "key-value store: no value for key #{inspect(key)} in namespace #{inspect(ns)} within #{timeout} ms")})
      keys = if ids == %{}, do: Map.delete(keys, key), else: Map.put(keys, key, ids)
      expire_due(%{state | waiting: put_keys(state.waiting, ns, keys), deadlines: deadlines}, now, left - 1)
    else
      _ -> state
    end
  end

  defp next_deadline(state) do
    if :gb_sets.is_empty(state.deadlines), do: nil, else: elem(:gb_sets.smallest(state.deadlines), 0)
  end

  # One timer, for the earliest deadline (a timer set for an earlier time is kept: it re-arms).
  defp arm(state) do
    case {next_deadline(state), state.timer} do
      {nil, _} -> state
      {at, {_, armed}} when armed <= at -> state
      {at, timer} ->
        with {ref, _} when is_reference(ref) <- timer, do: Process.cancel_timer(ref)
        %{state | timer: {Process.send_after(self(), :expire_due, at, abs: true), at}}
    end
  end

  # Every waiter, as {namespace, key, {from, deadline, timeout}}.
  defp waiters(state), do: for({ns, keys} <- state.waiting, {key, ids} <- keys, {_, w} <- ids, do: {ns, key, w})

  defp join(state, _ns, nil), do: state

  defp join(state, ns, handler) do
    if Map.has_key?(state.handlers, handler) do
      state
    else
      Process.monitor(handler)
      members = Map.update(state.members, ns, MapSet.new([handler]), &MapSet.put(&1, handler))
      %{state | members: members, handlers: Map.put(state.handlers, handler, ns)}
    end
  end

  # A handler gone; the namespace's last one: its job is finished, its keys and waiters go.
  defp leave(state, ns, handler) do
    left = state.members |> Map.get(ns, MapSet.new()) |> MapSet.delete(handler)

    if MapSet.size(left) > 0 do
      %{state | members: Map.put(state.members, ns, left)}
    else
      {keys, waiting} = Map.pop(state.waiting, ns, %{})
      deadlines = :gb_sets.filter(fn {_, _, n, _} -> n != ns end, state.deadlines)

      for {key, ids} <- keys, {from, _, _} <- Map.values(ids) do
        GenServer.reply(from, {:error, Error.new(:unavailable, "key-value store: namespace #{inspect(ns)} was deleted (every store opened on it closed) while a get of #{inspect(key)} waited")})
      end

      %{state | members: Map.delete(state.members, ns), data: Map.delete(state.data, ns), waiting: waiting, deadlines: deadlines}
    end
  end

  # The other leader's data and handlers, after a healed split. A key both sides put with
  # different values keeps this side's value: the other's is lost, and reported.
  defp merge(state, from_node, other) do
    {state, conflicts} =
      Enum.reduce(other.data, {state, []}, fn {ns, keys}, acc ->
        Enum.reduce(keys, acc, fn {key, value}, {st, conflicts} ->
          case fetch(st, ns, key) do
            :error -> {store(st, ns, key, value), conflicts}
            {:ok, ^value} -> {st, conflicts}
            {:ok, _} -> {st, [{ns, key} | conflicts]}
          end
        end)
      end)

    state = Enum.reduce(other.handlers, state, fn {handler, ns}, st -> join(st, ns, handler) end)
    merged = Enum.reduce(other.data, 0, fn {_, keys}, n -> n + map_size(keys) end)

    if conflicts != [] do
      Logger.warning(
        "key-value store: #{inspect(state.cluster)} healed a split with #{from_node}: #{length(conflicts)} key(s) put on both sides with different values " <>
          "kept this side's (#{node()}) value, the other's was lost: #{inspect(Enum.take(conflicts, 10))}"
      )
    end

    Telemetry.execute([:plugboard, :key_value_store, :merged], %{keys: merged, conflicts: length(conflicts)},
      %{cluster: state.cluster, node: node(), from_node: from_node, conflicting: conflicts})

    state
  end
end
