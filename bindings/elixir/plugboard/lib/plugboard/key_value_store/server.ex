defmodule Plugboard.KeyValueStore.Server do
  @moduledoc false
  # The cluster's data (see Plugboard.KeyValueStore): one process, registered in :global, started
  # under Plugboard.KeyValueStore.Supervisor (the :plugboard application's tree), holding
  #   data:      %{namespace => %{key => value}}
  #   waiting:   %{namespace => %{key => %{id => {from, deadline | :infinity, timeout}}}}
  #   deadlines: :gb_sets of {deadline, id, namespace, key} (deadline: monotonic ms), and one timer,
  #              for the earliest of them
  #   members:   %{namespace => MapSet of handler pids}, monitored (handlers: pid => namespace)
  #   away:      %{handler pid => timer}: handlers on a node this one lost the connection to
  #              (:noconnection), still members: monitored again when their node is back
  #              (nodeup, or their next request), dropped when the timer (away_ms/0) fires first
  # Every operation is a few map or gb_sets operations (O(log n)): expiring a get never walks the
  # others, and the gets due at one time expire in batches of @expire_batch, each its own message,
  # so calls that came meanwhile are answered between them. A namespace whose last handler is gone
  # (its job finished: every store opened on it closed; or its handlers' nodes stayed away past
  # away_ms/0, or a handler crashed: reported as lost) is deleted with its keys, at the cost of its
  # own waiters (their deadline entries are found through `waiting`, not by walking the index).
  use GenServer
  require Logger

  alias Plugboard.{Error, Telemetry}

  @expire_batch 200

  # The longest timer (and GenServer.call limit) the VM takes: `receive ... after` refuses more.
  @max_timeout 4_294_967_295

  def max_timeout, do: @max_timeout

  # How long a namespace's handlers on a node this one lost sight of (a partition, or the node
  # stopped) stay members: config :plugboard, key_value_store_away_ms: (default 5 minutes), read
  # when the connection is lost.
  @away_ms 300_000
  def away_ms, do: Application.get_env(:plugboard, :key_value_store_away_ms, @away_ms)

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
    with {:ok, pid} <- whereis_or_start(cluster), do: call(pid, request, wait)
  end

  # The call itself, to the leader `pid`. One that merged into another is asked again there, at the
  # pid it names (not through :global, which may not name it on this node yet): it stopped only
  # after the one kept had merged its data (the handover is a call), so the retry sees that data.
  @doc false
  def call(pid, request, wait) do
    limit = if wait == :infinity or wait > @max_timeout - 5_000, do: :infinity, else: wait + 5_000
    start = System.monotonic_time(:millisecond)

    try do
      GenServer.call(pid, request, limit)
    catch
      :exit, {{:shutdown, {:merged_into, keep}}, _} ->
        left = if wait == :infinity, do: :infinity, else: max(wait - (System.monotonic_time(:millisecond) - start), 0)
        call(keep, with_timeout(request, left), left)

      :exit, {:timeout, _} ->
        {:error, Error.new(:deadline_exceeded, "key-value store: the leader on #{node(pid)} did not answer within #{limit} ms")}

      :exit, {reason, _} ->
        {:error, Error.new(:unavailable, "key-value store: the leader on #{node(pid)} is gone (#{inspect(reason, limit: 5)})")}
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
  # namespaces' handlers to the one kept, with a call answered once it merged them (see merge/3;
  # what could not be merged is reported), then stops with {:shutdown, {:merged_into, keep}}: the
  # calls waiting there (its gets) and those still in its mailbox are asked again of the one kept
  # (call/3), which holds the merged data by then.
  def resolve(_name, pid1, pid2) do
    [keep, other] = Enum.sort_by([pid1, pid2], &{node(&1), &1})
    send(other, {:merge_into, keep})
    keep
  end

  @impl true
  def init(cluster) do
    Process.flag(:trap_exit, true)
    # {:nodeup, node}: the handlers away on it are monitored again.
    :ok = :net_kernel.monitor_nodes(true)

    case :global.register_name(name(cluster), self(), &__MODULE__.resolve/3) do
      :yes -> {:ok, %{cluster: cluster, data: %{}, waiting: %{}, deadlines: :gb_sets.empty(), timer: nil, members: %{}, handlers: %{}, away: %{}}}
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

  # Another leader's data (a healed split), answered once merged: that leader stops only then.
  def handle_call({:merge, from_node, other}, _from, state), do: {:reply, :ok, merge(state, from_node, other)}

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

  # A handler on a node this one lost the connection to is not known to be gone (a partition heals,
  # and its job goes on): it stays a member, away, until its node is back or away_ms/0 passes.
  def handle_info({:DOWN, _, :process, handler, :noconnection}, state) do
    if Map.has_key?(state.handlers, handler) do
      timer = Process.send_after(self(), {:away_expired, handler}, away_ms())
      {:noreply, %{state | away: Map.put(state.away, handler, timer)}}
    else
      {:noreply, state}
    end
  end

  def handle_info({:DOWN, _, :process, handler, reason}, state), do: {:noreply, drop_handler(state, handler, reason)}

  def handle_info({:nodeup, node}, state) do
    back = for {handler, _} <- state.away, node(handler) == node, do: handler
    {:noreply, Enum.reduce(back, state, &monitor_again(&2, &1))}
  end

  def handle_info({:nodedown, _node}, state), do: {:noreply, state}

  def handle_info({:away_expired, handler}, state) do
    if Map.has_key?(state.away, handler) do
      state = %{state | away: Map.delete(state.away, handler)}
      {:noreply, drop_handler(state, handler, {:node_away, node(handler), away_ms()})}
    else
      {:noreply, state}
    end
  end

  # This leader lost :global's resolution of a healed split (resolve/3): everything goes to `keep`,
  # and it stops once `keep` has merged it (calls here are then asked again of `keep`).
  def handle_info({:merge_into, keep}, state) do
    case hand_over(keep, Map.take(state, [:data, :handlers])) do
      {:ok, kept} -> {:stop, {:shutdown, {:merged_into, kept}}, %{state | data: %{}, waiting: %{}}}
      # The one kept is gone too: what this one holds is lost, and reported (terminate/2).
      {:error, reason} -> {:stop, {:shutdown, {:merge_failed, keep, reason}}, state}
    end
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

  # A `keep` that itself merged into another (three sides healing) hands over to that one.
  defp hand_over(keep, payload) do
    :ok = GenServer.call(keep, {:merge, node(), payload}, :infinity)
    {:ok, keep}
  catch
    :exit, {{:shutdown, {:merged_into, next}}, _} -> hand_over(next, payload)
    :exit, {reason, _} -> {:error, reason}
  end

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
    cond do
      # A request from a handler away: its node is back (before nodeup got here).
      Map.has_key?(state.away, handler) -> monitor_again(state, handler)
      Map.has_key?(state.handlers, handler) -> state
      true -> add_member(state, ns, handler)
    end
  end

  defp add_member(state, ns, handler) do
    Process.monitor(handler)
    members = Map.update(state.members, ns, MapSet.new([handler]), &MapSet.put(&1, handler))
    %{state | members: members, handlers: Map.put(state.handlers, handler, ns)}
  end

  # A handler away whose node is back: monitored again (a gone one is then DOWN with :noproc).
  defp monitor_again(state, handler) do
    {timer, away} = Map.pop(state.away, handler)
    Process.cancel_timer(timer)
    Process.monitor(handler)
    %{state | away: away}
  end

  defp drop_handler(state, handler, reason) do
    case Map.pop(state.handlers, handler) do
      {nil, _} -> state
      {ns, handlers} -> leave(%{state | handlers: handlers}, ns, handler, reason)
    end
  end

  # A handler gone; the namespace's last one: its keys and waiters go (its own waiters' deadline
  # entries come out of the index, found through `waiting`). A job that finished (its stores closed
  # or their openers exited: the handler stopped :normal) is said in the log; any other end (a
  # handler crashed, or its node stayed away past away_ms/0) loses data the job may still need: a
  # warning and [:plugboard, :key_value_store, :lost].
  defp leave(state, ns, handler, reason) do
    left = state.members |> Map.get(ns, MapSet.new()) |> MapSet.delete(handler)

    if MapSet.size(left) > 0 do
      %{state | members: Map.put(state.members, ns, left)}
    else
      {keys, waiting} = Map.pop(state.waiting, ns, %{})

      deadlines =
        for {key, ids} <- keys, {id, {_, deadline, _}} <- ids, deadline != :infinity, reduce: state.deadlines do
          set -> :gb_sets.del_element({deadline, id, ns, key}, set)
        end

      {values, data} = Map.pop(state.data, ns, %{})
      waiters = for {key, ids} <- keys, {from, _, _} <- Map.values(ids), do: {key, from}
      why = if finished?(reason), do: "every store opened on it closed", else: "its last store #{inspect(handler)} ended: #{inspect(reason, limit: 5)}"

      for {key, from} <- waiters do
        GenServer.reply(from, {:error, Error.new(:unavailable, "key-value store: namespace #{inspect(ns)} was deleted (#{why}) while a get of #{inspect(key)} waited")})
      end

      if map_size(values) > 0 or waiters != [], do: report_deleted(state, ns, why, reason, map_size(values), length(waiters))
      %{state | members: Map.delete(state.members, ns), data: data, waiting: waiting, deadlines: deadlines}
    end
  end

  defp finished?(reason), do: reason in [:normal, :shutdown] or match?({:shutdown, _}, reason)

  defp report_deleted(state, ns, why, reason, keys, waiters) do
    message = "key-value store: #{inspect(state.cluster)} on #{node()} deleted namespace #{inspect(ns)} (#{why}): #{keys} key(s), #{waiters} waiting get(s) failed"

    if finished?(reason) do
      Logger.info(message)
    else
      Logger.warning(message)
      Telemetry.execute([:plugboard, :key_value_store, :lost], %{keys: keys, waiters: waiters}, %{cluster: state.cluster, reason: reason, node: node(), namespace: ns})
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
