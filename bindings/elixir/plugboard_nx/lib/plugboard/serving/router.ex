defmodule Plugboard.Serving.Router do
  @moduledoc """
  The caller's side of `Plugboard.Serving`: what this node knows of every serving member in the
  cluster (its node, weight, target and last published load) and how many requests this node has sent
  each and not had back. One process per node (started by `:plugboard_nx`), a public ETS table read
  by callers directly: choosing a node takes no message.

  **Choice** (`pick/2`, over `members/1`):
    * `:load` (the default): the member with the least expected wait, `rtt × (load + 1) / weight`
      (the cost of Finagle's peak-EWMA balancer, with the weight for the node's devices): `load`
      is the larger of what the member last published (every caller's requests, a few ms old) and
      what this node has in flight there now (exact, for this node's own requests); `rtt` is the
      smoothed round-trip time of this node's requests to it (an exponential average, 1/5 per
      answer; a member not yet measured counts as the fastest measured). Ties broken at random. A
      slow node answers slowly and so gets new requests only while the fast ones are much busier.
    * `:weighted`: one member at random by weight, as `Nx.Serving.batched_run/2` chooses.
  """
  use GenServer
  require Logger
  import Bitwise

  alias Plugboard.Cluster.Directory

  @table __MODULE__

  @doc false
  def start_link(_), do: GenServer.start_link(__MODULE__, [], name: __MODULE__)

  @typedoc "A member as the router sees it."
  @type member :: %{pid: pid(), node: node(), weight: pos_integer(), load: non_neg_integer(), rtt: float() | nil, info: map()}

  @doc """
  The members of `name`'s serving now (one per node) whose `:info` this node has learned, with their
  weight and load as this node sees them. Never waits on a member: one not seen before is asked for
  its `:info` by the router, in a process of its own (bounded by 1 s), and is left out until it has
  answered. One that does not answer, or answers with a malformed `:info` (not a map with a positive
  integer `weight`, a non-negative integer `load` and a boolean `idempotent`; logged once), is asked
  again after 1 s, then 2, 4, ... up to 30 s, for as long as it stays in the group.
  """
  @spec members(atom()) :: [member()]
  def members(name) do
    for pid <- Directory.members(name), member = known(name, pid), do: member
  end

  @doc "Chooses one of `members` (as `members/1` gives them) by `routing`; nil for none."
  @spec pick([member()], :load | :weighted) :: member() | nil
  def pick([], _routing), do: nil
  def pick(members, :weighted), do: weighted(members)
  def pick(members, :load), do: least_loaded(members)

  @doc false
  # A request of this process sent to member `pid`: counted until finish/1, or until the sweep finds
  # this process dead (a caller killed mid-request runs no `after`). Returns the request's key.
  def begin(name, pid) do
    key = {:request, make_ref()}
    :ets.insert(@table, {key, name, pid, self()})
    :ets.update_counter(@table, {:in_flight, name, pid}, 1, {{:in_flight, name, pid}, 0})
    key
  end

  @doc false
  # The request answered or given up: uncounted once, by whoever takes its row first (finish or sweep).
  def finish(key) do
    case :ets.take(@table, key) do
      [{_, name, pid, _caller}] -> uncount(name, pid)
      [] -> :ok
    end
  end

  defp uncount(name, pid) do
    :ets.update_counter(@table, {:in_flight, name, pid}, -1)
    :ok
  rescue
    # The member went (its rows deleted): nothing to count down.
    ArgumentError -> :ok
  end

  defp known(name, pid) do
    case :ets.lookup(@table, {:member, name, pid}) do
      [{_, info, load}] -> member(name, pid, info, load)
      [] -> learn(name, pid)
    end
  end

  # Not known: the router asked to learn it, once (the :learning row stays while it is asked and
  # while it waits to be asked again). Left out meanwhile.
  defp learn(name, pid) do
    if :ets.insert_new(@table, {{:learning, name, pid}}), do: GenServer.cast(__MODULE__, {:learn, name, pid, 0})
    nil
  end

  defp member(name, pid, info, published) do
    %{pid: pid, node: node(pid), weight: info.weight, load: max(published, counter(name, pid)),
      rtt: rtt(name, pid), info: info}
  end

  defp counter(name, pid) do
    case :ets.lookup(@table, {:in_flight, name, pid}) do
      [{_, n}] -> n
      [] -> 0
    end
  end

  defp rtt(name, pid) do
    case :ets.lookup(@table, {:rtt, name, pid}) do
      [{_, us}] -> us
      [] -> nil
    end
  end

  @doc false
  # Folds one round trip (microseconds) of a request answered by `pid` into its smoothed rtt. Two
  # callers at once may lose one sample: an estimate, not a count.
  def observe(name, pid, us) do
    smoothed = case rtt(name, pid) do
      nil -> us * 1.0
      old -> old + (us - old) / 5
    end

    # Only for a member still known (a late answer from one that went would leave a row behind).
    if :ets.member(@table, {:member, name, pid}), do: :ets.insert(@table, {{:rtt, name, pid}, smoothed})
    :ok
  end

  defp least_loaded(members) do
    known = for %{rtt: rtt} when rtt != nil <- members, do: rtt
    default = if known == [], do: 1.0, else: Enum.min(known)
    score = fn m -> (m.rtt || default) * (m.load + 1) / m.weight end
    best = members |> Enum.map(score) |> Enum.min()
    members |> Enum.filter(&(score.(&1) == best)) |> Enum.random()
  end

  defp weighted(members) do
    pick = :rand.uniform(Enum.sum(Enum.map(members, & &1.weight)))

    Enum.reduce_while(members, pick, fn m, left ->
      if left <= m.weight, do: {:halt, m}, else: {:cont, left - m.weight}
    end)
  end

  @sweep_ms 1_000
  @info_timeout_ms 1_000
  @backoff_ms 1_000
  @max_backoff_ms 30_000
  # 1_000 <<< 5 is past @max_backoff_ms already.
  @max_backoff_shift 5

  @doc false
  # 1, 2, 4 ... 30 s after the failures so far; the shift is capped too (a member failing for days
  # would otherwise make an ever larger integer, and past 2^32 or so a system_limit raise).
  def backoff_ms(failures), do: min(@backoff_ms <<< min(failures, @max_backoff_shift), @max_backoff_ms)

  @impl true
  def init(_) do
    :ets.new(@table, [:named_table, :public, :set, read_concurrency: true, write_concurrency: true])
    :ok = Directory.join_router()
    Process.send_after(self(), :sweep, @sweep_ms)
    {:ok, %{watched: MapSet.new(), logged: MapSet.new()}}
  end

  # Asks `pid` for its :info from a process of its own (the router never waits on a member); the
  # answer comes back as {:learned, ...}. The member is watched from the first ask: its :DOWN ends
  # the learning too.
  @impl true
  def handle_cast({:learn, name, pid, failures}, state) do
    router = self()

    spawn(fn ->
      send(router, {:learned, name, pid, failures, Directory.ask_info(pid, @info_timeout_ms)})
    end)

    {:noreply, watch(state, pid)}
  end

  @impl true
  # The row goes in only while the member is still in the group and watched: a :DOWN always finds it.
  def handle_info({:learned, name, pid, failures, answer}, state) do
    cond do
      # Gone meanwhile (its :DOWN handled: no longer watched) or out of the group.
      not MapSet.member?(state.watched, pid) or not present?(name, pid) ->
        :ets.delete(@table, {:learning, name, pid})
        {:noreply, state}

      match?({:ok, _}, answer) ->
        {:ok, info} = answer
        :ets.insert(@table, {{:member, name, pid}, info, info.load})
        :ets.delete(@table, {:learning, name, pid})
        {:noreply, state}

      true ->
        {_, why} = answer
        state = log_once(state, pid, answer, "plugboard: serving #{inspect(name)}: member #{inspect(pid)} on #{node(pid)} left out: #{why}")
        Process.send_after(self(), {:relearn, name, pid, failures + 1}, backoff_ms(failures))
        {:noreply, state}
    end
  end

  def handle_info({:relearn, name, pid, failures}, state) do
    if present?(name, pid),
      do: handle_cast({:learn, name, pid, failures}, state),
      else: (:ets.delete(@table, {:learning, name, pid}); {:noreply, state})
  end

  def handle_info({:DOWN, _, :process, pid, _}, state) do
    forget(pid)
    {:noreply, %{state | watched: MapSet.delete(state.watched, pid), logged: MapSet.delete(state.logged, pid)}}
  end

  # Every second: requests whose caller died uncounted; rows of members no longer known removed
  # (a write that raced the member's :DOWN). Nothing stays in the table for a member that went.
  def handle_info(:sweep, state) do
    for {key, _name, _pid, caller} <- :ets.match_object(@table, {{:request, :_}, :_, :_, :_}),
        not Process.alive?(caller),
        do: finish(key)

    known = MapSet.new(:ets.select(@table, [{{{:member, :_, :"$1"}, :_, :_}, [], [:"$1"]}]))

    for kind <- [:in_flight, :rtt],
        pid <- :ets.select(@table, [{{{kind, :_, :"$1"}, :_}, [], [:"$1"]}]),
        not MapSet.member?(known, pid),
        do: forget(pid)

    Process.send_after(self(), :sweep, @sweep_ms)
    {:noreply, state}
  end

  # A member's published load (Directory.publish_load/2): a member already known is updated; one not
  # known yet is learned (it is in the group). Anything else, a malformed load included, is dropped.
  def handle_info(message, state) do
    with {:ok, name, pid, load} <- Directory.load_update(message),
         false <- :ets.update_element(@table, {:member, name, pid}, {3, load}),
         do: learn(name, pid)

    {:noreply, state}
  end

  defp watch(state, pid) do
    if MapSet.member?(state.watched, pid),
      do: state,
      else: (Process.monitor(pid); %{state | watched: MapSet.put(state.watched, pid)})
  end

  defp present?(name, pid), do: Directory.member?(name, pid)

  # A malformed member is logged once (it will not mend); a silent one at debug level, once.
  defp log_once(state, pid, answer, message) do
    if MapSet.member?(state.logged, pid) do
      state
    else
      if match?({:silent, _}, answer), do: Logger.debug(message), else: Logger.warning(message)
      %{state | logged: MapSet.put(state.logged, pid)}
    end
  end

  defp forget(pid) do
    :ets.match_delete(@table, {{:learning, :_, pid}})
    :ets.match_delete(@table, {{:member, :_, pid}, :_, :_})
    :ets.match_delete(@table, {{:in_flight, :_, pid}, :_})
    :ets.match_delete(@table, {{:rtt, :_, pid}, :_})
  end
end
