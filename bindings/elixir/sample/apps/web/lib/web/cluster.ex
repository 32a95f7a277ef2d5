# Compiled only when the release is built with Nx (see apps/web/mix.exs).
if Code.ensure_loaded?(Plugboard.Serving) do
  defmodule Web.Cluster do
    @moduledoc """
    The web node's side of the cluster: requests to `Compute.Model` on whichever compute node takes
    them (`Plugboard.Serving.run/3`), each answer checked against the exact one, and the figures of a
    run. `tests/elixir_cluster_test.sh` drives it with `bin/web rpc`.

        Web.Cluster.load(2000, concurrency: 32, routing: :load)          # through the cluster
        Web.Cluster.load(2000, via: :nx_serving)                         # Nx.Serving.batched_run/2 itself
        Web.Cluster.load(2000, via: {:local, :"compute1@127.0.0.1"})     # on one compute node, no distribution
        Web.Cluster.load(2000, at: {1000, {:kill, :"compute2@127.0.0.1"}})   # SIGKILL that node halfway
        Web.Cluster.load(2000, at: {700, {:disconnect, :"compute2@127.0.0.1"}})

    Request `i` is the row `rem(31i + 17k, 8)` for k in 0..63; the answer is `x · W + b` with the
    weights `Compute.Model` documents, computed here in integers.
    """

    @serving Compute.Model
    @features 64
    @outputs 16
    # Compute.Model's batch_size (that module lives on the compute nodes).
    @batch_size 16

    @doc "Request `i`: a batch of one row of small integers."
    def input(i), do: Nx.Batch.stack([Nx.tensor(row(i), type: :f32)])

    defp row(i), do: for(k <- 0..(@features - 1), do: rem(31 * i + 17 * k, 8))

    @doc "The exact answer to request `i`."
    def expected(i) do
      x = row(i)
      for j <- 0..(@outputs - 1), do: 1.0 * (j + Enum.sum(for {xk, k} <- Enum.with_index(x), do: xk * (rem(7 * k + 3 * j, 7) - 3)))
    end

    @doc """
    Sends `n` requests (`concurrency:` at a time, default 32, or `rate:` per second open-loop) and
    returns one line of figures, after
    checking every answer. `via:` `:plugboard` (default, `routing:` `:load` or `:weighted`),
    `:nx_serving` (`Nx.Serving.batched_run/2`), or `{:local, node}` (the same requests sent by that
    compute node to its own serving). `at: {i, action}` acts when request i is sent: `{:kill, node}`
    (SIGKILL its OS process) or `{:disconnect, node}` (drop the connection; the connector reconnects).
    """
    def load(n, opts \\ []) do
      # Run as the node's own processes would (bin/web rpc makes the caller's shell the group leader):
      # what the requests log goes to this node's log.
      caller_gl = Process.group_leader()
      Process.group_leader(self(), Process.whereis(:user))

      try do
        measure(n, opts)
      after
        Process.group_leader(self(), caller_gl)
      end
    end

    defp measure(n, opts) do
      inputs = Enum.map(1..n, &input/1)
      concurrency = Keyword.get(opts, :concurrency, 32)
      at = action(opts[:at])
      stats_before = stats()

      run =
        case Keyword.get(opts, :via, :plugboard) do
          :plugboard ->
            routing = Keyword.get(opts, :routing, :load)
            Plugboard.Serving.Load.run(&Plugboard.Serving.run(@serving, &1, info: true, routing: routing), inputs,
                                       concurrency: concurrency, at: at, rate: opts[:rate])

          :nx_serving ->
            Plugboard.Serving.Load.run(&Nx.Serving.batched_run(@serving, &1), inputs, concurrency: concurrency, at: at)

          {:local, node} ->
            :erpc.call(node, Plugboard.Serving.Load, :run, [{Nx.Serving, :batched_run, [@serving]}, inputs, [concurrency: concurrency, transfer: true]], 600_000)
        end

      report(run, stats_before, stats())
    end

    defp action(nil), do: {nil, nil}

    # The SIGKILL is ready before the run starts: a shell waits on a line, and sends it with its own
    # `kill` builtin the moment request i writes one. (A `kill` command started at request i, a fork
    # and exec on a loaded machine, could land after the run was over: nothing to retry, CI of 548e71c.)
    defp action({i, {:kill, node}}) do
      os_pid = :erpc.call(node, System, :pid, [])
      port = Port.open({:spawn, "sh -c 'read line && kill -9 #{os_pid}'"}, [:binary])
      {i, fn -> Port.command(port, "now\n") end}
    end

    defp action({i, {:disconnect, node}}), do: {i, fn -> Node.disconnect(node) end}

    # Batches and rows each compute node ran (nodes that do not answer are left out).
    defp stats do
      for node <- Node.list(), {:ok, {batches, rows}} <- [safe_stats(node)], into: %{}, do: {node, {batches, rows}}
    end

    defp safe_stats(node) do
      {:ok, :erpc.call(node, Compute.Model, :stats, [], 2_000)}
    catch
      _, _ -> :error
    end

    defp report(run, before, after_) do
      wrong = run.results |> Enum.with_index(1) |> Enum.count(fn {r, i} -> elem(r, 0) == :ok and Nx.to_flat_list(elem(r, 1)) != expected(i) end)
      infos = for {:ok, _, %{} = info, _} <- run.results, do: info
      by_node = infos |> Enum.frequencies_by(& &1.node) |> Enum.sort() |> Enum.map_join(" ", fn {n, c} -> "#{n}=#{c}" end)
      retried = Enum.count(infos, &(&1.attempts > 1))
      # Which node answered the last tenth of the requests (after a disconnect: is the node back?).
      tail = run.results |> Enum.take(-div(length(run.results), 10)) |> Enum.flat_map(fn {:ok, _, %{node: n}, _} -> [n]; _ -> [] end) |> Enum.uniq() |> Enum.sort()

      {batches, rows} =
        Enum.reduce(after_, {0, 0}, fn {node, {b, r}}, {tb, tr} ->
          {b0, r0} = Map.get(before, node, {0, 0})
          {tb + b - b0, tr + r - r0}
        end)

      fill = if batches > 0, do: Float.round(rows / (batches * @batch_size), 3), else: 0.0
      errors = for {:error, reason, _} <- run.results, uniq: true, do: inspect(reason, limit: 4)

      "requests=#{run.requests} ok=#{run.ok} wrong=#{wrong} errors=#{run.errors} wall_ms=#{round(run.wall_ms)} " <>
        "rps=#{round(run.rps)} p50_ms=#{Float.round(run.p50_ms, 2)} p99_ms=#{Float.round(run.p99_ms, 2)} " <>
        "max_ms=#{Float.round(run.max_ms, 1)} batches=#{batches} fill=#{fill} retried=#{retried} by_node=[#{by_node}] " <>
        "last_tenth_on=#{inspect(tail)}" <> if(errors == [], do: "", else: " first_errors=#{Enum.take(errors, 3) |> Enum.join(" | ")}")
    end

    @doc "The cluster as this node sees it (Plugboard.cluster_report/0), one line per node."
    def cluster do
      Plugboard.cluster_report()
      |> Enum.map_join("\n", fn r ->
        servings = Enum.map_join(r[:servings] || [], ",", &"#{inspect(&1.name)}(weight #{&1.weight}, load #{&1.load})")
        "node=#{r.node} target=#{r[:target] || "none"} devices=#{r[:devices]} servings=[#{servings}]" <> if(r[:error], do: " error=#{inspect(r.error)}", else: "")
      end)
    end
  end
end
