Code.require_file("../../trace_checks.exs", __DIR__)
Code.require_file("../../trace_peers.exs", __DIR__)

defmodule Plugboard.Nx.TraceClusterTest do
  # A Plugboard.Serving request across two real OS nodes on 127.0.0.1 (:peer starts `erl` processes,
  # distributed among themselves; the test VM drives them over their standard I/O and stays out of
  # their cluster), traced on both with Plugboard.Trace.Cluster and merged: one trace (one OS pid) per
  # node; on the caller the request's `serving_run` with its `route` (the member's node) and the
  # `remote_call` to it; on the member the `serve` (the caller's node) with the serving's `jit` in it.
  # The nodes share CLOCK_MONOTONIC (one machine), so the measured offset must lie within its error
  # bound of 0, and after the alignment the callee's `serve` lies inside the caller's `remote_call`
  # (within the bound): the merged trace is ordered across the nodes. PLUGBOARD_TRACE_OUT=dir keeps
  # it (cluster_request.trace.json).
  use ExUnit.Case, async: false
  import Plugboard.TraceChecks
  import Plugboard.TracePeers, only: [on: 4]
  alias Plugboard.TracePeers
  alias Plugboard.Nx.TraceClusterPeer, as: P

  @moduletag timeout: 120_000

  setup_all do
    [caller, member] = TracePeers.start!(["caller", "member"], :plugboard_nx)
    %{caller: caller, member: member}
  end

  test "a serving request across two OS nodes, traced on both and merged onto the caller's clock", %{caller: caller, member: member} do
    {_, a} = caller
    {_, b} = member
    {_, plugin} = hd(Plugboard.Nx.Case.cpu_plugins())
    name = :"traced_#{System.unique_integer([:positive])}"
    assert {:ok, _} = on(member, P, :start_serving, [name, plugin])
    # The first request compiles on the member (and waits there for the caller's router to learn it).
    assert {:ok, _} = on(caller, Plugboard.Serving, :run, [name, P.batch([0.0, 1.0, 2.0])])

    {traces, t0, t1, answer} = on(caller, P, :traced_request, [name, [a, b], [1.0, 2.0, 3.0]])
    save(traces, "cluster_request")
    assert {:ok, out, %{node: ^b, attempts: 1}} = answer
    assert Nx.to_flat_list(out) == [3.0, 5.0, 7.0]

    # One trace per node, each its own OS process; the JSON has one pid per node.
    assert [ta, tb] = traces
    assert {ta.node, tb.node} == {a, b}
    assert ta.pid != tb.pid and ta.pid != String.to_integer(System.pid())
    json = traces |> Plugboard.Trace.to_json() |> IO.iodata_to_binary()
    assert [_, _] = Regex.scan(~r/"name":"process_name","args":\{"name":"trace_(caller|member)_\d+@127.0.0.1"\}/, json)

    # The clocks: the caller against itself exact; the member within its bound of the true offset, 0.
    assert %{reference: ^a, offset_ns: 0, error_ns: 0} = ta.alignment
    assert %{reference: ^a, offset_ns: offset, error_ns: error, samples: 16} = tb.alignment
    assert error > 0 and abs(offset) <= error, "member's clock offset #{offset} ns outside its error bound #{error} ns (true offset 0)"
    IO.puts("member clock: offset #{offset} ns, error bound #{error} ns (127.0.0.1, true offset 0)")
    well_formed!(ta)
    well_formed!(tb, error)

    # The caller: the request, the route to the member and the hop to it, in order, inside [t0, t1].
    assert [run] = named(ta, "serving_run")
    assert run.start_ns >= t0 and run.end_ns <= t1
    assert [route, call] = children(ta, run)
    assert {route.name, call.name} == {"route", "remote_call"}
    assert route.end_ns <= call.start_ns
    assert %{"node" => bn, "target" => target, "attempt" => 1} = route.args
    assert bn == Atom.to_string(b) and target == Path.basename(plugin)
    assert %{"node" => ^bn, "target" => served} = call.args
    assert served == inspect(name)

    # The member: the request served for the caller, with the serving's jit (on its own process)
    # inside it; the serve inside the caller's remote_call, within the clocks' bound.
    assert [serve] = named(tb, "serve")
    assert serve.args == %{"caller" => Atom.to_string(a), "target" => served}
    assert inside?(serve, call, error), "serve #{describe(serve)} not inside remote_call #{describe(call)} (error bound #{error} ns)"
    assert serve.start_ns >= route.end_ns - error
    assert [jit] = Enum.filter(named(tb, "jit"), &inside?(&1, serve))
    assert Enum.map(children(tb, jit), & &1.name) == ["cache_lookup", "arguments", "run"]

    # 30 requests one after another in one trace: each member's serve inside its caller's
    # remote_call, in the same order; where a request's time goes (medians, printed).
    {traces, _, _, answers} = on(caller, P, :traced_requests, [name, [a, b], [1.0, 2.0, 3.0], 30])
    assert Enum.all?(answers, &match?({:ok, _, %{node: ^b}}, &1))
    [ta, tb] = traces
    error = tb.alignment.error_ns
    well_formed!(ta)
    well_formed!(tb, error)
    calls = named(ta, "remote_call")
    serves = named(tb, "serve")
    routes = named(ta, "route")
    assert length(calls) == 30 and length(serves) == 30 and length(routes) == 30

    parts =
      for {{route, call}, serve} <- Enum.zip(Enum.zip(routes, calls), serves) do
        assert inside?(serve, call, error), "#{describe(serve)} not inside #{describe(call)} (error bound #{error} ns)"
        assert [jit] = Enum.filter(named(tb, "jit"), &inside?(&1, serve))
        %{"route" => route.end_ns - route.start_ns, "route to remote_call" => call.start_ns - route.end_ns,
          "remote_call to serve" => serve.start_ns - call.start_ns, "serve to jit (batching)" => jit.start_ns - serve.start_ns,
          "jit" => jit.end_ns - jit.start_ns, "jit to serve's end" => serve.end_ns - jit.end_ns,
          "serve's end to remote_call's" => call.end_ns - serve.end_ns, "remote_call" => call.end_ns - call.start_ns}
      end

    medians = for key <- Map.keys(hd(parts)), into: %{}, do: {key, parts |> Enum.map(& &1[key]) |> Enum.sort() |> Enum.at(15)}
    IO.puts("a request's time, medians of 30 (µs; member clock error bound #{div(error, 1000)} µs): " <>
              Enum.map_join(medians, ", ", fn {k, v} -> "#{k} #{Float.round(v / 1000, 1)}" end))
  end
end
