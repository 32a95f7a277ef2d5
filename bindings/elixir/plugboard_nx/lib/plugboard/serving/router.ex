defmodule Plugboard.Serving.Router do
  @moduledoc """
  The caller's side of `Plugboard.Serving`: what this node knows of every serving member in the
  cluster (its node, weight, target and last published load) and how many requests this node has sent
  each and not had back. One process per node (started by `:plugboard_nx`), a public ETS table read
  by callers directly: choosing a node takes no message.

  **Choice** (`choose/3`):
    * `:load` (the default): the member with the least `(load + 1) / weight`, where `load` is the
      larger of what the member last published (every caller's requests, a few ms old) and what
      this node has in flight there now (exact, for this node's own requests); ties broken at
      random. A slow node keeps a longer queue and so gets fewer new requests.
    * `:weighted`: one member at random by weight, as `Nx.Serving.batched_run/2` chooses.
  Members in `exclude` (nodes that failed this request) are skipped.
  """
  use GenServer

  @table __MODULE__
  @group :plugboard_serving_routers

  @doc false
  def group, do: @group

  @doc false
  def start_link(_), do: GenServer.start_link(__MODULE__, [], name: __MODULE__)

  @typedoc "A member as the router sees it."
  @type member :: %{pid: pid(), node: node(), weight: pos_integer(), load: non_neg_integer(), info: map()}

  @doc """
  The members of `name`'s serving now (one per node), with their weight and load as this node sees
  them. A member not seen before is asked for its `:info` once (bounded by 1 s; one that does not
  answer is left out this time).
  """
  @spec members(atom(), [node()]) :: [member()]
  def members(name, exclude \\ []) do
    for pid <- :pg.get_members(Plugboard.Cluster.scope(), {:serving, name}),
        node(pid) not in exclude,
        member = known(name, pid),
        do: member
  end

  @doc "Chooses a member of `name` by `routing` (`:load` or `:weighted`), skipping nodes in `exclude`; nil when none is left."
  @spec choose(atom(), :load | :weighted, [node()]) :: member() | nil
  def choose(name, routing, exclude \\ []) do
    pick(members(name, exclude), routing)
  end

  @doc false
  # The choice itself, over members as members/2 gives them.
  def pick([], _routing), do: nil
  def pick(members, :weighted), do: weighted(members)
  def pick(members, :load), do: least_loaded(members)

  @doc false
  # Counts a request sent to `pid` (+1) or answered (-1).
  def in_flight(name, pid, 1), do: :ets.update_counter(@table, {:in_flight, name, pid}, 1, {{:in_flight, name, pid}, 0})

  # The member may have gone (its entry deleted): nothing to count down then.
  def in_flight(name, pid, -1) do
    :ets.update_counter(@table, {:in_flight, name, pid}, -1)
  rescue
    ArgumentError -> 0
  end

  defp known(name, pid) do
    case :ets.lookup(@table, {:member, name, pid}) do
      [{_, info, load}] -> member(name, pid, info, load)
      [] -> learn(name, pid)
    end
  end

  defp learn(name, pid) do
    info = GenServer.call(pid, :info, 1_000)
    GenServer.cast(__MODULE__, {:watch, pid})
    :ets.insert(@table, {{:member, name, pid}, info, info.load})
    member(name, pid, info, info.load)
  catch
    :exit, _ -> nil
  end

  defp member(name, pid, info, published) do
    local = case :ets.lookup(@table, {:in_flight, name, pid}) do
      [{_, n}] -> n
      [] -> 0
    end

    %{pid: pid, node: node(pid), weight: max(info.weight, 1), load: max(published, local), info: info}
  end

  defp least_loaded(members) do
    score = fn m -> (m.load + 1) / m.weight end
    best = members |> Enum.map(score) |> Enum.min()
    members |> Enum.filter(&(score.(&1) == best)) |> Enum.random()
  end

  defp weighted(members) do
    pick = :rand.uniform(Enum.sum(Enum.map(members, & &1.weight)))

    Enum.reduce_while(members, pick, fn m, left ->
      if left <= m.weight, do: {:halt, m}, else: {:cont, left - m.weight}
    end)
  end

  @impl true
  def init(_) do
    :ets.new(@table, [:named_table, :public, :set, read_concurrency: true, write_concurrency: true])
    :ok = :pg.join(Plugboard.Cluster.scope(), @group, self())
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
    :ets.match_delete(@table, {{:member, :_, pid}, :_, :_})
    :ets.match_delete(@table, {{:in_flight, :_, pid}, :_})
    {:noreply, %{state | watched: MapSet.delete(state.watched, pid)}}
  end
end
