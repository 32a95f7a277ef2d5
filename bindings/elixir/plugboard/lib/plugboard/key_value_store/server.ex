defmodule Plugboard.KeyValueStore.Server do
  @moduledoc false
  # The cluster's data (see Plugboard.KeyValueStore): one process, registered in :global, holding
  # %{{namespace, key} => value} and the gets waiting for a key, each with a timer.
  use GenServer

  alias Plugboard.Error

  def name(cluster), do: {Plugboard.KeyValueStore, cluster}

  def whereis(cluster), do: :global.whereis_name(name(cluster))

  # The leader's pid; started here (unlinked: it outlives the caller, for as long as this node runs)
  # when none runs in the cluster. Before starting one, :global is brought in step with the nodes
  # this one is connected to (a node that has just joined would otherwise not see the leader yet).
  def whereis_or_start(cluster) do
    case whereis(cluster) do
      pid when is_pid(pid) -> {:ok, pid}
      :undefined -> sync_then_start(cluster)
    end
  end

  defp sync_then_start(cluster) do
    :global.sync()

    case whereis(cluster) do
      pid when is_pid(pid) ->
        {:ok, pid}

      :undefined ->
        case GenServer.start(__MODULE__, cluster, name: {:global, name(cluster)}) do
          {:ok, pid} -> {:ok, pid}
          {:error, {:already_started, pid}} -> {:ok, pid}
          {:error, reason} -> {:error, Error.new(:unavailable, "key-value store: cannot start the leader of #{inspect(cluster)}: #{inspect(reason)}")}
        end
    end
  end

  # A call to the leader (started when none runs). `wait` is how long the leader may take (a get's
  # timeout); the leader answers every request itself, so the call's own limit only guards a stuck
  # one. A leader lost meanwhile is :unavailable.
  def request(cluster, request, wait) do
    with {:ok, pid} <- whereis_or_start(cluster) do
      limit = min(wait + 5_000, 4_294_967_295)

      try do
        GenServer.call(pid, request, limit)
      catch
        :exit, {:timeout, _} ->
          {:error, Error.new(:deadline_exceeded, "key-value store: the leader on #{node(pid)} did not answer within #{limit} ms")}

        :exit, {reason, _} ->
          {:error, Error.new(:unavailable, "key-value store: the leader on #{node(pid)} is gone (#{inspect(reason)})")}
      end
    end
  end

  @impl true
  def init(cluster), do: {:ok, %{cluster: cluster, data: %{}, waiting: %{}}}

  @impl true
  def handle_call({:put, ns, key, value}, _from, state) do
    k = {ns, key}
    {waiters, waiting} = Map.pop(state.waiting, k, [])

    for {from, timer} <- waiters do
      Process.cancel_timer(timer)
      GenServer.reply(from, {:ok, value})
    end

    {:reply, :ok, %{state | data: Map.put(state.data, k, value), waiting: waiting}}
  end

  def handle_call({:try_get, ns, key}, _from, state) do
    case Map.fetch(state.data, {ns, key}) do
      {:ok, value} -> {:reply, {:ok, value}, state}
      :error -> {:reply, {:error, Error.new(:not_found, "key-value store: no value for key #{inspect(key)} in namespace #{inspect(ns)}")}, state}
    end
  end

  def handle_call({:get, ns, key, timeout}, from, state) do
    k = {ns, key}

    case Map.fetch(state.data, k) do
      {:ok, value} ->
        {:reply, {:ok, value}, state}

      :error ->
        timer = Process.send_after(self(), {:expire, k, from, timeout}, timeout)
        {:noreply, %{state | waiting: Map.update(state.waiting, k, [{from, timer}], &[{from, timer} | &1])}}
    end
  end

  @impl true
  def handle_info({:expire, {ns, key} = k, from, timeout}, state) do
    case Map.get(state.waiting, k, []) |> Enum.split_with(fn {f, _} -> f == from end) do
      {[], _} ->
        {:noreply, state}

      {_expired, rest} ->
        GenServer.reply(from, {:error, Error.new(:deadline_exceeded, "key-value store: no value for key #{inspect(key)} in namespace #{inspect(ns)} within #{timeout} ms")})
        waiting = if rest == [], do: Map.delete(state.waiting, k), else: Map.put(state.waiting, k, rest)
        {:noreply, %{state | waiting: waiting}}
    end
  end
end
