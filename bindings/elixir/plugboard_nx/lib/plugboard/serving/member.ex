defmodule Plugboard.Serving.Member do
  @moduledoc """
  A node's membership in a `Plugboard.Serving`: one process beside the node's `Nx.Serving`, member of
  the group `{:serving, name}` in the cluster's directory (`Plugboard.Cluster`). It answers `:info`
  (`%{name, node, target, platform, devices, device_kind, weight, idempotent, load}`) and publishes
  the node's load — requests taken and not yet answered — to every node's router
  (`Plugboard.Serving.Router`) when it changes, at most once every `publish_ms` (default 5 ms): one
  small message per router per change, and once a second when nothing changes. Each request in
  progress is counted by the process that runs it (`track/1`) and counted down when it is answered
  (`untrack/1`), or by the member when that process ends without it (one killed while it waits).
  """
  use GenServer

  @routers Plugboard.Serving.Router.group()
  # Unchanged load is published again every this many ticks (200 × 5 ms: once a second).
  @republish_ticks 200

  @doc false
  def start_link(opts), do: GenServer.start_link(__MODULE__, opts)

  @doc false
  # Counts the calling process as a request in progress on this node for `name` until untrack/1, or
  # until it ends, however it ends (killed included: the member watches it). Returns {where, token}:
  # %{node, target} (what the caller is told of where its request ran) and what untrack/1 takes; nil
  # when this node does not serve `name`.
  def track(name) do
    case :persistent_term.get({__MODULE__, name}, nil) do
      {counter, member, where} ->
        :atomics.add(counter, 1, 1)
        send(member, {:track, self()})
        {where, {counter, member}}

      nil ->
        nil
    end
  end

  @doc false
  # The request answered: counted down now (the load is right when the caller hears back). The
  # member forgets the process first: its :untrack arrives before its :DOWN (signals from one process
  # to another keep their order), so the request is counted down once.
  def untrack({counter, member}) do
    send(member, {:untrack, self()})
    :atomics.sub(counter, 1, 1)
    :ok
  end

  @impl true
  def init(opts) do
    name = Keyword.fetch!(opts, :name)
    counter = :atomics.new(1, signed: true)
    info = Map.merge(Keyword.fetch!(opts, :info), %{name: name, node: node()})
    :persistent_term.put({__MODULE__, name}, {counter, self(), %{node: node(), target: info[:target]}})
    :ok = :pg.join(Plugboard.Cluster.scope(), {:serving, name}, self())
    Process.flag(:trap_exit, true)
    send(self(), :publish)
    interval = Keyword.get(opts, :publish_ms, 5)
    {:ok, %{name: name, info: info, counter: counter, published: nil, interval: interval, ticks: 0, requests: %{}}}
  end

  @impl true
  def handle_call(:info, _from, state), do: {:reply, Map.put(state.info, :load, load(state)), state}

  @impl true
  def handle_info(:publish, state) do
    load = load(state)
    ticks = state.ticks + 1

    # On a change, and every @republish_ticks ticks anyway: a router that joined late, or whose copy
    # raced its first :info, is never left with an old value on an idle node.
    state =
      if load != state.published or rem(ticks, @republish_ticks) == 0 do
        message = {:plugboard_serving_load, state.name, node(), self(), load}
        for router <- :pg.get_members(Plugboard.Cluster.scope(), @routers), do: send(router, message)
        %{state | published: load}
      else
        state
      end

    Process.send_after(self(), :publish, state.interval)
    {:noreply, %{state | ticks: ticks}}
  end

  # A request counted by track/1: counted down when its process ends without untrack/1.
  def handle_info({:track, pid}, state) do
    {:noreply, put_in(state.requests[pid], Process.monitor(pid))}
  end

  def handle_info({:untrack, pid}, state) do
    {ref, requests} = Map.pop(state.requests, pid)
    if ref, do: Process.demonitor(ref, [:flush])
    {:noreply, %{state | requests: requests}}
  end

  def handle_info({:DOWN, _, :process, pid, _}, state) when is_map_key(state.requests, pid) do
    :atomics.sub(state.counter, 1, 1)
    {:noreply, %{state | requests: Map.delete(state.requests, pid)}}
  end

  def handle_info(_other, state), do: {:noreply, state}

  @impl true
  def terminate(_reason, state) do
    :persistent_term.erase({__MODULE__, state.name})
    Plugboard.Serving.Template.forget(state.name)
    :ok
  end

  defp load(state), do: :atomics.get(state.counter, 1)
end
