defmodule Plugboard.KeyValueStore.Handler do
  @moduledoc false
  # Owns one native KeyValueStore (c_src/nif_key_value.h) and answers its calls: each request
  # {:plugboard_kv, id, op, key, arg} is asked of the cluster's leader from a process of its own (a
  # get waiting for a key holds up nothing else), whose answer goes back through kv_reply/3.
  use GenServer

  alias Plugboard.{Error, Native}
  alias Plugboard.KeyValueStore.Server

  @impl true
  def init({namespace, cluster, call_timeout, owner}) do
    # Tied to the process that opened the store (a monitor: its normal exit ends the handler too).
    if owner, do: Process.monitor(owner)
    # Known as a handler (KeyValueStore refuses a pid or name of any other process).
    {:ok, _} = Registry.register(Plugboard.KeyValueStore.Registry, self(), nil)

    case Native.kv_store_new(self(), call_timeout) do
      {:ok, resource} -> {:ok, %{namespace: namespace, cluster: cluster, resource: resource, owner: owner}}
      {:error, %Error{} = error} -> {:stop, {error, :kv_store_new}}
    end
  end

  @impl true
  def handle_call(:resource, _from, state), do: {:reply, state.resource, state}
  def handle_call(:where, _from, state), do: {:reply, {state.namespace, state.cluster, self()}, state}

  @impl true
  def handle_info({:plugboard_kv, id, op, key, arg}, state) do
    %{namespace: ns, cluster: cluster, resource: resource} = state
    handler = self()

    spawn(fn ->
      reply =
        case op do
          # The plugin's timeout (int64 ms): beyond the VM's longest timer it is no deadline.
          :get -> Server.request(cluster, {:get, handler, ns, key, Server.leader_timeout(arg)}, Server.leader_timeout(arg))
          :try_get -> Server.request(cluster, {:try_get, handler, ns, key}, 10_000)
          :put -> Server.request(cluster, {:put, handler, ns, key, arg}, 10_000)
        end

      Native.kv_reply(resource, id, native_reply(reply))
    end)

    {:noreply, state}
  end

  def handle_info({:DOWN, _, :process, owner, _}, %{owner: owner} = state), do: {:stop, :normal, state}

  defp native_reply(:ok), do: :ok
  defp native_reply({:ok, value}), do: {:ok, value}
  defp native_reply({:error, %Error{code: code, message: message}}), do: {:error, code, message}
end
