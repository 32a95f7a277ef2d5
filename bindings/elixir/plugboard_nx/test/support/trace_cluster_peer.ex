defmodule Plugboard.Nx.TraceClusterPeer do
  @moduledoc false
  # What test/trace_cluster_test.exs runs on its :peer nodes (they load this VM's code paths; code
  # defined in the test file itself is not there).

  defmodule Model do
    @moduledoc false
    import Nx.Defn
    defn affine(x), do: x * 2 + 1
  end

  @doc """
  Starts a Plugboard.Serving named `name` on a client of `plugin`, in a process that outlives the
  call; a batch waits 5 ms for more requests (Nx.Serving's default, 100 ms, would fill the trace).
  """
  def start_serving(name, plugin) do
    parent = self()

    spawn(fn ->
      {:ok, client} = Plugboard.open(plugin)
      serving = Nx.Serving.new(fn opts -> Nx.Defn.jit(&Model.affine/1, opts) end, compiler: Plugboard.Nx, client: client)
      send(parent, {:started, Plugboard.Serving.start_link(serving: serving, name: name, client: client, batch_size: 4, batch_timeout: 5, idempotent: true)})
      Process.sleep(:infinity)
    end)

    receive do
      {:started, result} -> result
    end
  end

  @doc "A batch of one for Model.affine/1."
  def batch(values), do: Nx.Batch.stack([Nx.tensor(values, backend: Nx.BinaryBackend)])

  @doc """
  One request to `name`, traced on `nodes` (this node first): {traces, t0, t1, answer} with t0, t1
  this node's Plugboard.Trace.now/0 around the request.
  """
  def traced_request(name, nodes, values) do
    {traces, t0, t1, [answer]} = traced_requests(name, nodes, values, 1)
    {traces, t0, t1, answer}
  end

  @doc "`n` requests one after another in one trace: {traces, t0, t1, answers}."
  def traced_requests(name, nodes, values, n) do
    :ok = Plugboard.Trace.Cluster.start(nodes)
    t0 = Plugboard.Trace.now()
    answers = for _ <- 1..n, do: Plugboard.Serving.run(name, batch(values), info: true)
    t1 = Plugboard.Trace.now()
    {:ok, traces} = Plugboard.Trace.Cluster.stop(nodes)
    {traces, t0, t1, answers}
  end
end
