defmodule Plugboard.Cluster.Connector do
  @moduledoc """
  Connects this node to the peers `config :plugboard, cluster: [peers: [...]]` names, at start and
  every `reconnect_ms` (default 2000) while any is not connected; logs each peer that joins or goes
  away (with the reason distribution gives). Started by the `:plugboard` application when `peers:` is
  set and the node is alive (a release started with a node name). See `Plugboard.Cluster`.
  """
  use GenServer
  require Logger

  @doc false
  def start_link(opts), do: GenServer.start_link(__MODULE__, opts, name: __MODULE__)

  @doc """
  The child to start for `config` (the `:cluster` keyword of `:plugboard`'s environment), or nil when
  no peers are configured. An invalid configuration is an `ArgumentError` naming the key.
  """
  @spec child(keyword() | nil) :: Supervisor.child_spec() | nil
  def child(nil), do: nil

  def child(config) when is_list(config) do
    peers = config |> Keyword.get(:peers, []) |> Enum.map(&peer!/1) |> Enum.uniq()
    interval = Keyword.get(config, :reconnect_ms, 2_000)

    unless is_integer(interval) and interval > 0,
      do: raise(ArgumentError, "config :plugboard, cluster: reconnect_ms must be a positive integer, got #{inspect(interval)}")

    if peers == [], do: nil, else: {__MODULE__, peers: peers, reconnect_ms: interval}
  end

  def child(other), do: raise(ArgumentError, "config :plugboard, cluster: expected a keyword list, got #{inspect(other)}")

  defp peer!(peer) when is_atom(peer), do: peer!(Atom.to_string(peer))

  defp peer!(peer) when is_binary(peer) do
    case String.split(String.trim(peer), "@") do
      [name, host] when name != "" and host != "" -> String.to_atom(String.trim(peer))
      _ -> raise ArgumentError, "config :plugboard, cluster: peer #{inspect(peer)} is not name@host"
    end
  end

  defp peer!(peer), do: raise(ArgumentError, "config :plugboard, cluster: peer #{inspect(peer)} is not name@host")

  @doc "The configured peers and which of them are connected now."
  @spec status() :: %{peers: [node()], connected: [node()]}
  def status, do: GenServer.call(__MODULE__, :status)

  @impl true
  def init(opts) do
    peers = Keyword.fetch!(opts, :peers) -- [node()]

    if Node.alive?() do
      :ok = :net_kernel.monitor_nodes(true, [{:node_type, :visible}, :nodedown_reason])
      send(self(), :connect)
      {:ok, %{peers: peers, interval: Keyword.fetch!(opts, :reconnect_ms), trying: %{}}}
    else
      Logger.warning("plugboard: cluster peers #{inspect(peers)} configured, but this node is not distributed (start it with a name: RELEASE_DISTRIBUTION / RELEASE_NODE)")
      :ignore
    end
  end

  # Each connection attempt runs in a process of its own (Node.connect/1 can take net_setuptime, 7 s,
  # for a host that does not answer): the connector stays responsive, and a peer already being
  # tried is not tried again until that attempt ends.
  @impl true
  def handle_info(:connect, state) do
    connected = Node.list()

    trying =
      for peer <- state.peers, peer not in connected, not Map.has_key?(state.trying, peer), into: state.trying do
        {_pid, ref} = spawn_monitor(Node, :connect, [peer])
        {peer, ref}
      end

    Process.send_after(self(), :connect, state.interval)
    {:noreply, %{state | trying: trying}}
  end

  def handle_info({:DOWN, ref, :process, _, _}, state) do
    {:noreply, %{state | trying: Map.reject(state.trying, fn {_, r} -> r == ref end)}}
  end

  def handle_info({:nodeup, node, _info}, state) do
    Logger.info("plugboard: cluster: #{node} connected")
    {:noreply, state}
  end

  def handle_info({:nodedown, node, info}, state) do
    Logger.warning("plugboard: cluster: #{node} disconnected (#{inspect(info[:nodedown_reason])})")
    {:noreply, state}
  end

  def handle_info(_other, state), do: {:noreply, state}

  @impl true
  def handle_call(:status, _from, state),
    do: {:reply, %{peers: state.peers, connected: Enum.filter(state.peers, &(&1 in Node.list()))}, state}
end
