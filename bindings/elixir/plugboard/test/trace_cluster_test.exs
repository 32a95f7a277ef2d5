Code.require_file("../../trace_checks.exs", __DIR__)
Code.require_file("../../trace_peers.exs", __DIR__)

defmodule Plugboard.TraceClusterTest do
  # Plugboard.Trace.Cluster across two real OS nodes on 127.0.0.1 (:peer starts `erl` processes,
  # distributed among themselves; the test VM drives them over their standard I/O): tracing started
  # and stopped on both from one of them, the traces merged onto the caller's clock. The nodes share
  # CLOCK_MONOTONIC (one machine), so the true offset is 0: every measured offset must lie within its
  # error bound, and a hop's `serve` (on the callee) inside its `remote_call` (on the caller) within
  # it. Prints the bound with 1 and 16 round trips per alignment (the README's figures).
  use ExUnit.Case, async: false
  import Plugboard.TraceChecks
  import Plugboard.TracePeers, only: [on: 4]
  alias Plugboard.TracePeers
  alias Plugboard.TestSupport.TracePeer
  alias Plugboard.Trace
  alias Plugboard.Trace.Cluster

  @moduletag timeout: 120_000

  setup_all do
    [a, b] = TracePeers.start!(["a", "b"], :plugboard)
    %{a: a, b: b}
  end

  test "a hop between two OS nodes, traced on both and merged: serve inside remote_call, clocks within their bound", %{a: a, b: b} do
    {_, na} = a
    {_, nb} = b
    assert {:ok, [ta, tb], t0, t1} = on(a, TracePeer, :traced_hop, [[na, nb], nb, 3])

    assert {ta.node, tb.node} == {na, nb}
    assert ta.pid != tb.pid
    assert %{reference: ^na, offset_ns: 0, error_ns: 0} = ta.alignment
    assert %{reference: ^na, offset_ns: offset, error_ns: error, samples: 16} = tb.alignment
    assert error > 0 and abs(offset) <= error, "offset #{offset} ns outside its error bound #{error} ns (true offset 0)"
    well_formed!(ta)
    well_formed!(tb, error)

    assert [call] = named(ta, "remote_call")
    assert call.args == %{"node" => Atom.to_string(nb), "target" => "sleep", "ms" => 3}
    assert call.start_ns >= t0 and call.end_ns <= t1
    assert [serve] = named(tb, "serve")
    assert serve.args == %{"caller" => Atom.to_string(na), "target" => "sleep", "ms" => 3}
    assert inside?(serve, call, error), "#{describe(serve)} not inside #{describe(call)} (error bound #{error} ns)"
    assert serve.end_ns - serve.start_ns >= 3_000_000
    # The merged document: one process per node.
    json = IO.iodata_to_binary(Trace.to_json([ta, tb]))
    assert length(Regex.scan(~r/"name":"process_name"/, json)) == 2
    assert json =~ ~s("alignment":{)
  end

  test "how well round trips align two nodes' clocks on 127.0.0.1 (true offset 0)", %{a: a, b: b} do
    {_, nb} = b

    for samples <- [1, 16] do
      aligned = on(a, TracePeer, :alignments, [nb, samples, 50])
      for {offset, error} <- aligned, do: assert(abs(offset) <= error, "offset #{offset} ns outside its error bound #{error} ns")
      errors = aligned |> Enum.map(&elem(&1, 1)) |> Enum.sort()
      offsets = aligned |> Enum.map(&abs(elem(&1, 0))) |> Enum.sort()
      IO.puts("#{samples} round trip(s) per alignment, 50 alignments: error bound median #{Enum.at(errors, 25)} ns " <>
                "(#{hd(errors)}..#{List.last(errors)}), |offset| median #{Enum.at(offsets, 25)} ns (max #{List.last(offsets)})")
    end
  end

  test "a node that cannot start is named, and the others are stopped again", %{a: a, b: b} do
    {_, na} = a
    {_, nb} = b
    # Tracing already on at b: b refuses; a, which had started, is stopped again.
    :ok = on(b, Trace, :start, [])
    assert {:error, [{^nb, %Plugboard.Error{code: :failed_precondition}}]} = on(a, Cluster, :start, [[na, nb]])
    refute on(a, Trace, :enabled?, [])
    assert {:ok, _} = on(b, Trace, :stop, [])
    # A node that is not there.
    assert {:error, [{:"nobody@127.0.0.1", {:error, {:erpc, :noconnection}}}]} = on(a, Cluster, :start, [[na, :"nobody@127.0.0.1"]])
    refute on(a, Trace, :enabled?, [])
    # Stop where nothing is recorded: named.
    assert {:error, [{^nb, %Plugboard.Error{}}]} = on(a, Cluster, :stop, [[nb]])
  end

  test "the trace checks the tests use fail on a bad trace" do
    span = fn name, s, e, tid -> %{name: name, category: "c", start_ns: s, end_ns: e, tid: tid, args: %{}} end
    good = %Trace{node: node(), pid: 1, started_ns: 0, stopped_ns: 100, tracks: %{1 => "t", 2 => "t [2]"},
                  spans: [span.("a", 10, 50, 1), span.("b", 20, 30, 1), span.("c", 40, 60, 2)]}
    assert well_formed!(good) == good
    # "t" and "t [2]" are one track, lanes merged: c overlaps a without nesting there.
    assert_raise ExUnit.AssertionError, ~r/overlaps/, fn -> stack!(good, "t") end

    for {bad, why} <- [{[span.("a", 50, 10, 1)], ~r/not closed/}, {[span.("a", 10, 50, 1), span.("b", 40, 60, 1)], ~r/overlaps/},
                       {[span.("a", 10, 150, 1)], ~r/outside the trace/}, {[span.("a", 10, 20, 3)], ~r/unnamed track/}] do
      assert_raise ExUnit.AssertionError, why, fn -> well_formed!(%{good | spans: bad}) end
    end

    # Outside the recording by less than the slack given (a shifted trace's error bound): accepted.
    assert well_formed!(%{good | spans: [span.("a", -5, 20, 1)]}, 5)
    assert children(good, span.("a", 10, 50, 1)) == [span.("b", 20, 30, 1)]
  end

  test "shift/2 moves every time of a trace; a node against itself is exact" do
    trace = %Trace{node: node(), pid: 1, started_ns: 100, stopped_ns: 900, clock_monotonic_ns: 100, clock_realtime_ns: 5,
                   tracks: %{1 => "t"}, spans: [%{name: "s", category: "c", start_ns: 200, end_ns: 300, tid: 1, args: %{}}]}
    shifted = Cluster.shift(trace, 50)
    assert {shifted.started_ns, shifted.stopped_ns, shifted.clock_monotonic_ns, shifted.clock_realtime_ns} == {50, 850, 50, 5}
    assert [%{start_ns: 150, end_ns: 250}] = shifted.spans
    assert Cluster.shift(trace, 0) == trace
    assert %{offset_ns: 0, error_ns: 0} = Cluster.align(node())
    assert_raise ArgumentError, ~r/samples: must be a positive integer/, fn -> Cluster.stop([node()], samples: 0) end
  end
end
