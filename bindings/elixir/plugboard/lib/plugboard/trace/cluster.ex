defmodule Plugboard.Trace.Cluster do
  @moduledoc """
  One trace of several nodes: tracing started and stopped on each node of a list through `:erpc`, and
  the nodes' traces merged onto the calling node's clock.

      nodes = [node() | Node.list()]
      :ok = Plugboard.Trace.Cluster.start(nodes)
      Plugboard.Serving.run(MyApp.Model, batch)
      {:ok, traces} = Plugboard.Trace.Cluster.stop(nodes)
      :ok = Plugboard.Trace.write(traces, "cluster.trace.json")   # one process (pid) per node

  Each node records its own spans (its library's and its Elixir processes', `Plugboard.Trace`); the
  merged trace is the list of the nodes' `%Plugboard.Trace{}`, the caller's first when it is in
  `nodes`, every time (each span's `start_ns`/`end_ns`, and `started_ns`, `stopped_ns`,
  `clock_monotonic_ns`) moved onto the caller's CLOCK_MONOTONIC. `Plugboard.Trace.to_json/1` and
  `write/2` turn the list into one document, one process per node.

  ## How the clocks are aligned, and how well

  Each node stamps its spans with its own CLOCK_MONOTONIC (`Plugboard.Trace.now/0`), which counts from
  an arbitrary point per machine. `stop/2` measures each remote node's clock against the caller's
  with round trips, as NTP and Cristian's algorithm do: `samples` times (default 16) the caller reads
  its clock (`t0`), asks the node for its clock by `:erpc.call(node, Plugboard.Trace, :now, [])`
  (`remote`) and reads its own again (`t1`). The remote reading was taken somewhere between `t0` and
  `t1`, so with `offset = remote - (t0 + t1) / 2` the true offset lies within `error = (t1 - t0) / 2`
  of it. The sample with the shortest round trip is kept (the least queueing, the tightest bound),
  the node's times are shifted by `-offset`, and each trace's `alignment` says what was done:
  `%{reference: caller_node, offset_ns: offset, error_ns: error, samples: n}` (offset 0, error 0 for
  the caller itself). Two spans of different nodes are in the right order whenever they are more than
  the two nodes' `error_ns` apart.

  How well, measured: nodes on one machine share CLOCK_MONOTONIC, so the true offset between them is
  0 and the measured `offset_ns` must lie within `error_ns` of it; `test/trace_cluster_test.exs` (here
  and in plugboard_nx) checks exactly that on real OS processes (`:peer`, on 127.0.0.1). Measured so
  on a loaded 2-core machine, 16 round trips bound the error at 20 to 56 µs (medians 21-25 µs on
  Elixir 1.18, 36-38 µs on 1.14; one round trip alone: up to milliseconds when a sample is
  preempted), and the offsets found were at most 28 µs (plugboard_nx's README, "Traces"). Between machines the bound is half the best round trip of distribution (tens of µs on a
  LAN); the clocks' drift during the trace adds to it (a few ppm: under 10 µs over a second's trace),
  since the offset is measured once, at the stop.

  ## Spans of a remote hop

  `remote_call/4` (the calling side: `remote_call`, with the callee's `node` and the `target` called)
  and `serve/4` (the called side: `serve`, with the caller's node as `caller`) name the two halves of a
  call between nodes the same way everywhere: `Plugboard.Serving` uses them for each request sent
  to a member node. In a merged trace the callee's `serve` lies inside the caller's `remote_call`
  (up to the two nodes' `error_ns`).
  """

  alias Plugboard.Trace

  @default_samples 16
  @default_timeout 10_000

  @typedoc "How a node's times were moved onto the caller's clock."
  @type alignment :: %{reference: node(), offset_ns: integer(), error_ns: non_neg_integer(), samples: non_neg_integer()}

  @doc """
  Starts tracing on every node of `nodes` (`Plugboard.Trace.start/1` with `opts`, each node named by
  its node name), in parallel. `:ok`, or `{:error, [{node, reason}]}` naming each node that did not
  start (those that did are stopped again). `timeout:` (ms, default 10 000) bounds each node's answer.
  """
  @spec start([node()], keyword()) :: :ok | {:error, [{node(), term()}]}
  def start(nodes, opts \\ []) when is_list(nodes) do
    {timeout, opts} = Keyword.pop(opts, :timeout, @default_timeout)

    results =
      nodes
      |> :erpc.multicall(Trace, :start, [opts], timeout)
      |> Enum.zip(nodes)

    case for({result, node} <- results, result != {:ok, :ok}, do: {node, failure(result)}) do
      [] ->
        :ok

      failed ->
        started = for {{:ok, :ok}, node} <- results, do: node
        :erpc.multicall(started, Trace, :stop, [], timeout)
        {:error, failed}
    end
  end

  @doc """
  Stops tracing on every node of `nodes` and gives their traces on the caller's clock (see the module
  doc): `{:ok, [%Plugboard.Trace{alignment: ...}]}` in the order of `nodes`, or `{:error, [{node,
  reason}]}` when a node's trace could not be had (the others are stopped all the same).
  Options: `samples:` (round trips per node, default 16), `timeout:` (ms, default 10 000).
  """
  @spec stop([node()], keyword()) :: {:ok, [Trace.t()]} | {:error, [{node(), term()}]}
  def stop(nodes, opts \\ []) when is_list(nodes) do
    samples = Keyword.get(opts, :samples, @default_samples)
    timeout = Keyword.get(opts, :timeout, @default_timeout)

    unless is_integer(samples) and samples > 0,
      do: raise(ArgumentError, "Plugboard.Trace.Cluster.stop/2: samples: must be a positive integer, got #{inspect(samples)}")

    results = nodes |> :erpc.multicall(Trace, :stop, [], timeout) |> Enum.zip(nodes)

    case for({result, node} <- results, not match?({:ok, {:ok, _}}, result), do: {node, failure(result)}) do
      [] ->
        aligned =
          for {{:ok, {:ok, trace}}, node} <- results do
            alignment = align(node, samples, timeout)
            shift(%{trace | alignment: alignment}, alignment.offset_ns)
          end

        {:ok, aligned}

      failed ->
        {:error, failed}
    end
  end

  @doc """
  How `node`'s trace clock reads against this node's: `%{reference: node(), offset_ns, error_ns,
  samples}`, from `samples` round trips (the one with the shortest round trip kept): the node's
  `Plugboard.Trace.now/0` is `offset_ns` ahead of this node's, give or take `error_ns`. This node
  against itself is offset 0, error 0.
  """
  @spec align(node(), pos_integer(), timeout()) :: alignment()
  def align(node, samples \\ @default_samples, timeout \\ @default_timeout)

  def align(node, samples, _timeout) when node == node(), do: %{reference: node(), offset_ns: 0, error_ns: 0, samples: samples}

  def align(node, samples, timeout) when is_integer(samples) and samples > 0 do
    {rtt, offset} =
      Enum.min(
        for _ <- 1..samples do
          t0 = Trace.now()
          remote = :erpc.call(node, Trace, :now, [], timeout)
          t1 = Trace.now()
          # remote - (t0 + t1) / 2, rounded towards the nearer integer.
          {t1 - t0, remote - div(t0 + t1, 2)}
        end
      )

    %{reference: node(), offset_ns: offset, error_ns: div(rtt + 1, 2), samples: samples}
  end

  @doc "`trace` with every time moved by `-offset_ns` (onto the clock it was aligned to)."
  @spec shift(Trace.t(), integer()) :: Trace.t()
  def shift(trace, 0), do: trace

  def shift(trace, offset_ns) do
    spans = for span <- trace.spans, do: %{span | start_ns: span.start_ns - offset_ns, end_ns: span.end_ns - offset_ns}

    %{trace | spans: spans, started_ns: trace.started_ns - offset_ns, stopped_ns: trace.stopped_ns - offset_ns,
              clock_monotonic_ns: trace.clock_monotonic_ns - offset_ns}
  end

  @doc """
  Runs `fun` as the calling side of a hop to `node`: a `remote_call` span (category `cluster`) with
  `node` and `target` (what is called there) and `args`, when tracing is on. Returns what `fun` returns.
  """
  @spec remote_call(node(), String.t(), map(), (-> result)) :: result when result: term()
  def remote_call(node, target, args \\ %{}, fun),
    do: Trace.span("remote_call", "cluster", Map.merge(args, %{node: Atom.to_string(node), target: target}), fun)

  @doc """
  Runs `fun` as the called side of a hop from `caller` (a node): a `serve` span (category `cluster`)
  with `caller` and `target` and `args`, when tracing is on. Returns what `fun` returns.
  """
  @spec serve(node(), String.t(), map(), (-> result)) :: result when result: term()
  def serve(caller, target, args \\ %{}, fun),
    do: Trace.span("serve", "cluster", Map.merge(args, %{caller: Atom.to_string(caller), target: target}), fun)

  defp failure({:ok, {:error, error}}), do: error
  defp failure({:ok, other}), do: other
  defp failure({kind, reason}), do: {kind, reason}
end
