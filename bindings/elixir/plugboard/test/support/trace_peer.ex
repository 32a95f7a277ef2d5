defmodule Plugboard.TestSupport.TracePeer do
  @moduledoc false
  # What trace_cluster_test.exs runs on its :peer nodes (they load this VM's code paths).

  alias Plugboard.Trace.Cluster

  @doc "A hop from this node to `node`: remote_call here around serve there (which sleeps `ms`)."
  def hop(node, ms) do
    Cluster.remote_call(node, "sleep", %{ms: ms}, fn -> :erpc.call(node, __MODULE__, :served, [node(), ms]) end)
  end

  def served(caller, ms), do: Cluster.serve(caller, "sleep", %{ms: ms}, fn -> Process.sleep(ms) end)

  @doc "`hop/2` traced on `nodes` (this node first): {:ok, traces} | {:error, _}, with this node's times around the hop."
  def traced_hop(nodes, node, ms) do
    with :ok <- Cluster.start(nodes) do
      t0 = Plugboard.Trace.now()
      hop(node, ms)
      t1 = Plugboard.Trace.now()
      with {:ok, traces} <- Cluster.stop(nodes), do: {:ok, traces, t0, t1}
    end
  end

  @doc "`runs` alignments of `node` with `samples` round trips each: [{offset_ns, error_ns}]."
  def alignments(node, samples, runs) do
    for _ <- 1..runs do
      %{offset_ns: offset, error_ns: error} = Cluster.align(node, samples)
      {offset, error}
    end
  end
end
