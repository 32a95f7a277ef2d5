defmodule Plugboard.Serving.Member do
  @moduledoc """
  A node's membership in a `Plugboard.Serving`: one process beside the node's `Nx.Serving`, member of
  the group `{:serving, name}` in the cluster's directory (`Plugboard.Cluster`). It answers `:info`
  (`%{name, node, target, platform, devices, device_kind, weight, idempotent, load}`) and publishes
  the node's load — requests taken and not yet answered — to every node's router
  (`Plugboard.Serving.Router`) when it changes, at most once every `publish_ms` (default 5 ms): one
  small message per router per change, nothing when idle.
  """
  use GenServer

  @routers Plugboard.Serving.Router.group()

  @doc false
  def start_link(opts), do: GenServer.start_link(__MODULE__, opts)

  @doc false
  # {counter, where}: the counter of requests in progress on this node for `name` (the remote half of
  # Plugboard.Serving.run/3 increments it around each request) and %{node, target} (what the caller is
  # told of where its request ran); nil when this node does not serve `name`.
  def load_counter(name), do: :persistent_term.get({__MODULE__, name}, nil)

  @impl true
  def init(opts) do
    name = Keyword.fetch!(opts, :name)
    counter = :atomics.new(1, signed: true)
    info = Map.merge(Keyword.fetch!(opts, :info), %{name: name, node: node()})
    :persistent_term.put({__MODULE__, name}, {counter, %{node: node(), target: info[:target]}})
    :ok = :pg.join(Plugboard.Cluster.scope(), {:serving, name}, self())
    Process.flag(:trap_exit, true)
    send(self(), :publish)
    {:ok, %{name: name, info: info, counter: counter, published: nil, interval: Keyword.get(opts, :publish_ms, 5)}}
  end

  @impl true
  def handle_call(:info, _from, state), do: {:reply, Map.put(state.info, :load, load(state)), state}

  @impl true
  def handle_info(:publish, state) do
    load = load(state)

    # A router that joined since the last change hears the load at the next change; routers also ask
    # for :info when they first see a member, which carries the load.
    state =
      if load != state.published do
        message = {:plugboard_serving_load, state.name, node(), self(), load}
        for router <- :pg.get_members(Plugboard.Cluster.scope(), @routers), do: send(router, message)
        %{state | published: load}
      else
        state
      end

    Process.send_after(self(), :publish, state.interval)
    {:noreply, state}
  end

  def handle_info(_other, state), do: {:noreply, state}

  @impl true
  def terminate(_reason, state) do
    :persistent_term.erase({__MODULE__, state.name})
    :ok
  end

  defp load(state), do: :atomics.get(state.counter, 1)
end
