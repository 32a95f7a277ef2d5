defmodule Plugboard.Serving.Member do
  @moduledoc """
  A node's membership in a `Plugboard.Serving`: one process beside the node's `Nx.Serving`, member of
  the group `{:serving, name}` in the cluster's directory (`Plugboard.Cluster.Directory`, whose
  protocol it speaks). It answers `:info` (`%{name, node, target, platform, devices, device_kind,
  weight, idempotent, load}`) and publishes the node's load — requests taken and not yet answered —
  to every node's router (`Plugboard.Serving.Router`) when it changes, at most once every
  `publish_ms` (default 5 ms): one small message per router per change, and once a second when
  nothing changes. Each request in
  progress is counted by the process that runs it: `track/1` hands the member a one-slot flag set to
  1 (the member watches the process), `untrack/1` sets it to 0 when the request is answered, and the
  load is the number of flags at 1 among the processes the member watches. Each side is one
  operation, so a process killed anywhere (before its flag reached the member, between the two,
  after untrack/1) is counted for exactly as long as it is in progress: the member drops its flag on
  its :DOWN.
  """
  use GenServer

  alias Plugboard.Cluster.Directory

  # Unchanged load is published again every this many ticks (200 × 5 ms: once a second).
  @republish_ticks 200

  @doc false
  def start_link(opts), do: GenServer.start_link(__MODULE__, opts)

  @doc false
  # Counts the calling process as a request in progress on this node for `name` until untrack/1, or
  # until it ends, however it ends (killed included: the member watches it). Returns {where, token}:
  # %{node, target} (what the caller is told of where its request ran) and what untrack/1 takes; nil
  # when this node does not serve `name`. A kill before the send leaves nothing to count down.
  def track(name) do
    case :persistent_term.get({__MODULE__, name}, nil) do
      {member, where} ->
        flag = :atomics.new(1, [])
        :ok = :atomics.put(flag, 1, 1)
        send(member, {:track, self(), flag})
        {where, flag}

      nil ->
        nil
    end
  end

  @doc false
  # The request answered: no longer counted from this one write on (the load is right when the caller
  # hears back); the member drops the flag at the process's :DOWN.
  def untrack(flag), do: :atomics.put(flag, 1, 0)

  @impl true
  def init(opts) do
    name = Keyword.fetch!(opts, :name)
    info = Map.merge(Keyword.fetch!(opts, :info), %{name: name, node: node()})
    :persistent_term.put({__MODULE__, name}, {self(), %{node: node(), target: info[:target]}})
    :ok = Directory.join_member(name)
    Process.flag(:trap_exit, true)
    send(self(), :publish)
    interval = Keyword.get(opts, :publish_ms, 5)
    {:ok, %{name: name, info: info, published: nil, interval: interval, ticks: 0, requests: %{}}}
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
        :ok = Directory.publish_load(state.name, load)
        %{state | published: load}
      else
        state
      end

    Process.send_after(self(), :publish, state.interval)
    {:noreply, %{state | ticks: ticks}}
  end

  # A request counted by track/1 (while its flag is 1), watched until it ends.
  def handle_info({:track, pid, flag}, state) do
    {:noreply, put_in(state.requests[Process.monitor(pid)], flag)}
  end

  def handle_info({:DOWN, ref, :process, _pid, _}, state) when is_map_key(state.requests, ref) do
    {:noreply, %{state | requests: Map.delete(state.requests, ref)}}
  end

  def handle_info(_other, state), do: {:noreply, state}

  @impl true
  def terminate(_reason, state) do
    :persistent_term.erase({__MODULE__, state.name})
    :ok
  end

  # Requests in progress: flags still at 1 (one read per request, every publish tick).
  defp load(state), do: Enum.count(state.requests, fn {_ref, flag} -> :atomics.get(flag, 1) == 1 end)
end
