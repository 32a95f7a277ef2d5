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

  @table __MODULE__
  @group :plugboard_serving_routers

  @doc false
  def group, do: @group

  @doc false
  def start_link(_), do: GenServer.start_link(__MODULE__, [], name: __MODULE__)

  @typedoc "A member as the router sees it."
  @type member :: %{pid: pid(), node: node(), weight: pos_integer(), load: non_neg_integer(), rtt: float() | nil, info: map()}

  @doc """
  The members of `name`'s serving now (one per node), with their weight and load as this node sees
  them. A member not seen before is asked for its `:info` once (bounded by 1 s; one that does not
  answer is left out this time).
  """
  @spec members(atom()) :: [member()]
  def members(name) do
    for pid <- :pg.get_members(Plugboard.Cluster.scope(), {:serving, name}), member = known(name, pid), do: member
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

  # The row goes in before the router watches the member: a :DOWN always finds it to delete.
  defp learn(name, pid) do
    info = GenServer.call(pid, :info, 1_000)
    :ets.insert(@table, {{:member, name, pid}, info, info.load})
    GenServer.cast(__MODULE__, {:watch, pid})
    member(name, pid, info, info.load)
  catch
    :exit, _ -> nil
  end

  defp member(name, pid, info, published) do
    %{pid: pid, node: node(pid), weight: max(info.weight, 1), load: max(published, counter(name, pid)),
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

  @impl true
  def init(_) do
    :ets.new(@table, [:named_table, :public, :set, read_concurrency: true, write_concurrency: true])
    :ok = :pg.join(Plugboard.Cluster.scope(), @group, self())
    Process.send_after(self(), :sweep, @sweep_ms)
    {:ok, %{watched: MapSet.new()}}
  end

  @impl true
  def handle_cast({:watch, pid}, state) do
    if MapSet.member?(state.watched, pid),
      do: {:noreply, state},
      else: (Process.monitor(pid); {:noreply, %{state | watched: MapSet.put(state.watched, pid)}})
  end

  @impl true
  def handle_info({:plugboard_serving_load, name, _node, pid, load}, state) do
    # Only members already known (their :info learned) are updated; others are learned when chosen.
    :ets.update_element(@table, {:member, name, pid}, {3, load})
    {:noreply, state}
  end

  def handle_info({:DOWN, _, :process, pid, _}, state) do
    forget(pid)
    {:noreply, %{state | watched: MapSet.delete(state.watched, pid)}}
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

  def handle_info(_other, state), do: {:noreply, state}

  defp forget(pid) do
    :ets.match_delete(@table, {{:member, :_, pid}, :_, :_})
    :ets.match_delete(@table, {{:in_flight, :_, pid}, :_})
    :ets.match_delete(@table, {{:rtt, :_, pid}, :_})
  end
end
