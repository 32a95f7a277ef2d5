defmodule Plugboard.TestSupport.KvPeer do
  @moduledoc false
  # What key_value_store_test.exs runs on its :peer nodes (they load this VM's code paths), for
  # work whose data must stay on the peer (a value of tens of MB would otherwise cross the test VM's
  # control channel) or that must outlive one :peer.call.

  alias Plugboard.KeyValueStore

  @doc "Puts `bytes` bytes under `key`, made on this node."
  def put_bulk(store, key, bytes), do: KeyValueStore.put(store, key, :binary.copy(<<7>>, bytes))

  @doc "Starts `apply(m, f, a)` in a process of its own on this node; result/2 gives what it returned."
  def start(m, f, a) do
    spawn(fn ->
      result = apply(m, f, a)

      receive do
        {:result, to} -> send(to, {:result, self(), result})
      end
    end)
  end

  def result(pid, timeout) do
    send(pid, {:result, self()})

    receive do
      {:result, ^pid, result} -> result
    after
      timeout -> {:no_result_within, timeout}
    end
  end
end
