defmodule Plugboard.TraceTest do
  # Plugboard.Trace (issue 36): traces recorded from Elixir, loaded back (as the struct and as the
  # JSON to_json/1 writes, parsed by a strict reader) and checked: every span closed, spans nested
  # or apart on each track, a run's spans inside the time the test measured, a host callback's
  # Elixir function inside its blocking wait, the boot's stages when tracing starts with the
  # application, nothing while off, the cap, and errors that name what is wrong. One trace at a time
  # in the VM: not async.
  use ExUnit.Case, async: false
  import Plugboard.TestSupport
  import ExUnit.CaptureLog
  alias Plugboard.Trace
  alias Plugboard.TestSupport.JSON

  setup do
    # A trace left on by a failed test would fail the next ones' start.
    on_exit(fn -> if Trace.enabled?(), do: Trace.stop() end)
    {:ok, client} = Plugboard.open(first_plugin())
    %{client: client}
  end

  # The traces guide's Elixir example (docs/traces.md), verbatim between the two marks: a run traced
  # and written, then a span of one's own (tracing off by then: it just runs the function).
  test "the traces guide's example", %{client: client} do
    program = """
    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = stablehlo.add %x, %x : tensor<4xf32>
      return %0 : tensor<4xf32>
    }
    """

    exe = Plugboard.compile!(client, program)
    x = Plugboard.buffer!(client, f32s([1, 2, 3, 4]), :f32, {4})
    dir = Path.join(System.tmp_dir!(), "plugboard-trace-guide-#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)

    loaded =
      File.cd!(dir, fn ->
        # [guide]
        :ok = Plugboard.Trace.start()
        Plugboard.run!(exe, [x])
        {:ok, trace} = Plugboard.Trace.stop()
        :ok = Plugboard.Trace.write(trace, "run.trace.json")

        # your own spans, on the calling process's track
        Plugboard.Trace.span("load batch", "app", %{batch: 3}, fn -> load(3) end)
        # [guide]
      end)

    assert loaded == {:loaded, 3}
    written = File.read!(Path.join(dir, "run.trace.json"))
    assert written =~ ~s("traceEvents") and written =~ ~s("name":"run")
  end

  defp load(batch), do: {:loaded, batch}

  # ------------------------------------------------------------------------------------------------
  # Checks every trace gets.

  # Every span closed, with a name; on every track (a thread's, a process's, a device's lane) two
  # spans either nest or are apart; every tid named; the JSON (parsed back) says the same as the struct.
  defp check!(%Trace{} = t) do
    assert is_integer(t.started_ns) and t.stopped_ns >= t.started_ns

    for s <- t.spans do
      assert is_binary(s.name) and s.name != ""
      assert s.end_ns >= s.start_ns, "span #{s.name} ends before it starts"
      assert s.start_ns >= t.started_ns and s.end_ns <= t.stopped_ns, "span #{s.name} outside the trace's time"
      assert Map.has_key?(t.tracks, s.tid), "span #{s.name}'s track #{s.tid} has no name"
    end

    for {tid, spans} <- Enum.group_by(t.spans, & &1.tid), do: nested!(t.tracks[tid], spans)
    json!(t)
  end

  defp nested!(track, spans) do
    # Sorted by start, longest first: each span must end within the innermost open span it starts in.
    sorted = Enum.sort_by(spans, &{&1.start_ns, -&1.end_ns})

    Enum.reduce(sorted, [], fn s, open ->
      open = Enum.drop_while(open, &(&1.end_ns <= s.start_ns))

      case open do
        [outer | _] ->
          assert s.end_ns <= outer.end_ns,
                 "on track #{track}: #{s.name} [#{s.start_ns}, #{s.end_ns}] overlaps #{outer.name} [#{outer.start_ns}, #{outer.end_ns}] without nesting"

        [] ->
          :ok
      end

      [s | open]
    end)
  end

  # The JSON document of `t`, parsed back: one event per span with exact times, the tracks and the
  # process named, otherData's counts.
  defp json!(t) do
    doc = JSON.decode!(Trace.to_json(t))
    events = doc["traceEvents"]
    assert doc["displayTimeUnit"] == "ns"
    xs = Enum.filter(events, &(&1["ph"] == "X"))
    ms = Enum.filter(events, &(&1["ph"] == "M"))
    assert length(xs) + length(ms) == length(events), "only X and M events"
    assert length(xs) == length(t.spans)
    assert Enum.all?(events, &(&1["pid"] == t.pid))
    assert %{"name" => "process_name", "args" => %{"name" => name}} = Enum.find(ms, &(&1["name"] == "process_name"))
    assert name == t.process_name
    named = for %{"name" => "thread_name", "tid" => tid, "args" => %{"name" => n}} <- ms, into: %{}, do: {tid, n}
    assert named == t.tracks

    from_json =
      Enum.sort(for e <- xs, do: {e["name"], e["cat"], micros_to_ns(e["ts"]), micros_to_ns(e["ts"]) + micros_to_ns(e["dur"]), e["tid"], e["args"] || %{}})

    from_struct =
      Enum.sort(for s <- t.spans, do: {s.name, if(s.category == "", do: "plugboard", else: s.category), s.start_ns, s.end_ns, s.tid, Map.new(s.args, fn {k, v} -> {k, text(v)} end)})

    assert from_json == from_struct
    assert doc["otherData"]["spans"] == length(t.spans)
    assert doc["otherData"]["dropped_spans"] == t.dropped_spans
    assert doc["otherData"]["clock_monotonic_ns"] == t.clock_monotonic_ns
    assert (doc["otherData"]["notes"] || []) == t.notes
    doc
  end

  # JSON text is UTF-8: an invalid byte becomes U+FFFD there.
  defp text(<<c::utf8, rest::binary>>), do: <<c::utf8>> <> text(rest)
  defp text(<<_, rest::binary>>), do: "\uFFFD" <> text(rest)
  defp text(v), do: v

  defp micros_to_ns(us) when is_integer(us), do: us * 1000
  defp micros_to_ns(us), do: round(us * 1000)

  defp named(t, name), do: Enum.filter(t.spans, &(&1.name == name))
  defp track(t, span), do: t.tracks[span.tid]
  defp inside?(inner, outer), do: inner.start_ns >= outer.start_ns and inner.end_ns <= outer.end_ns
  defp own_track, do: "elixir " <> inspect(self())

  # ------------------------------------------------------------------------------------------------

  test "the checks catch a bad trace: a span that ends before it starts, two that overlap without nesting" do
    good = %{name: "a", category: "t", start_ns: 10, end_ns: 20, tid: 1, args: %{}}
    t = %Trace{process_name: "p", pid: 1, node: node(), clock_monotonic_ns: 0, clock_realtime_ns: 0, started_ns: 0,
               stopped_ns: 100, max_spans: 10, tracks: %{1 => "t"}, spans: [good, %{good | name: "b", start_ns: 12, end_ns: 18}]}
    check!(t)
    check!(%{t | notes: ["plugin profiler of x.so: \"failed\""]})
    assert_raise ExUnit.AssertionError, ~r/b ends before it starts/, fn -> check!(%{t | spans: [%{good | name: "b", start_ns: 12, end_ns: 11}]}) end
    assert_raise ExUnit.AssertionError, ~r/b \[15, 25\] overlaps a \[10, 20\] without nesting/, fn ->
      check!(%{t | spans: [good, %{good | name: "b", start_ns: 15, end_ns: 25}]})
    end
    assert_raise ExUnit.AssertionError, ~r/has no name/, fn -> check!(%{t | spans: [%{good | tid: 2}]}) end
  end

  test "a run's spans: the Elixir run around the launch and the device's execution, inside the measured time", %{client: c} do
    exe = Plugboard.compile!(c, add_program())
    x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4})
    :ok = Trace.start(max_spans: 1000)
    assert Trace.enabled?()
    before = Trace.now()
    [_] = Plugboard.run!(exe, [x, x])
    {:ok, run} = Plugboard.run_async(exe, [x, x])
    {:ok, [_]} = Plugboard.await(run)
    later = Trace.now()
    {:ok, t} = Trace.stop()
    refute Trace.enabled?()
    check!(t)

    runs = named(t, "run")
    assert length(runs) == 2, "one run span per run: #{inspect(Enum.map(t.spans, & &1.name))}"

    for r <- runs do
      assert track(t, r) == own_track()
      assert r.args == %{"executable" => exe.name, "result" => "ok"}
      assert r.start_ns >= before and r.end_ns <= later
    end

    # The C++ side's spans of both runs (launch on the scheduler thread, the device's time) fall
    # inside the time measured here, and each launch inside one of the Elixir runs.
    launches = named(t, "launch") ++ named(t, "execute")
    assert length(named(t, "launch")) >= 2
    for s <- launches, do: assert(s.start_ns >= before and s.end_ns <= later)
    for l <- named(t, "launch"), do: assert(Enum.any?(runs, &(l.start_ns >= &1.start_ns and l.start_ns <= &1.end_ns)))
    assert Enum.any?(named(t, "execute"), &(track(t, &1) =~ "device 0"))
    assert t.dropped_spans == 0 and t.max_spans == 1000
    assert t.node == node() and t.pid == String.to_integer(System.pid())
    assert t.notes == []
  end

  test "a host callback: its Elixir function's span inside the plugin thread's blocking wait, both inside the run", %{client: c} do
    exe = Plugboard.compile!(c, callback_program(), callbacks: ["plugboard.print", "host_scale"])
    x = Plugboard.buffer!(c, f32s(Enum.to_list(1..8)), :f32, {2, 4})
    scale = fn [t] -> Process.sleep(2); t end
    :ok = Trace.start()
    [_] = Plugboard.run!(exe, [x], callbacks: %{"host_scale" => scale}, ordered: %{"plugboard.print" => fn _ -> :ok end})
    {:ok, t} = Trace.stop()
    check!(t)

    assert [wait] = for(s <- named(t, "blocking_callback"), s.args["target"] == "host_scale", do: s)
    assert [cb] = named(t, "host_callback")
    assert cb.args["target"] == "host_scale" and cb.args["executable"] == exe.name
    assert track(t, cb) == own_track()
    refute track(t, wait) == own_track()
    assert inside?(cb, wait), "the callback [#{cb.start_ns}, #{cb.end_ns}] is not inside the wait [#{wait.start_ns}, #{wait.end_ns}]"
    assert cb.end_ns - cb.start_ns >= 2_000_000
    assert [run] = named(t, "run")
    assert inside?(wait, run) and inside?(cb, run)
    # The two ordered print hooks ran here too.
    assert length(named(t, "ordered_host_callback")) == 2
  end

  test "off, nothing is recorded and a run carries no trace", %{client: c} do
    refute Trace.enabled?()
    exe = Plugboard.compile!(c, add_program())
    x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4})
    t0 = Trace.now()
    assert :ok = Trace.record("off", "test", t0, Trace.now())
    assert Trace.span("off", "test", fn -> :result end) == :result
    {:ok, run} = Plugboard.run_async(exe, [x, x])
    assert run.trace == nil
    {:ok, _} = Plugboard.await(run)
    # A trace started afterwards holds none of it (nor a span that began before it).
    :ok = Trace.start()
    :ok = Trace.record("began before", "test", t0, Trace.now())
    {:ok, t} = Trace.stop()
    assert t.spans == [] and t.tracks == %{} and t.dropped_spans == 0
    check!(t)
  end

  test "start twice, stop without start and bad options are refused with what is wrong" do
    assert {:error, %Plugboard.Error{code: :failed_precondition, message: m}} = Trace.stop()
    assert m =~ "Plugboard.Trace.stop" and m =~ "no trace is being recorded"
    :ok = Trace.start()
    assert {:error, %Plugboard.Error{code: :failed_precondition, message: m}} = Trace.start()
    assert m =~ "Plugboard.Trace.start" and m =~ "being recorded already"
    assert Trace.enabled?()
    {:ok, _} = Trace.stop()
    refute Trace.enabled?()
    assert {:error, %Plugboard.Error{code: :invalid_argument, message: m}} = Trace.start(max_spans: 0)
    assert m =~ "max_spans" and m =~ "positive integer"
    assert {:error, %Plugboard.Error{message: m}} = Trace.start(process_name: :a)
    assert m =~ "process_name"
    assert {:error, %Plugboard.Error{message: m}} = Trace.start(max_span: 3)
    assert m =~ ":max_span"
    refute Trace.enabled?()
  end

  test "at most max_spans are kept, the rest counted as dropped (in the JSON too)" do
    :ok = Trace.start(max_spans: 5, process_name: "capped")
    for i <- 1..12, do: Trace.span("s#{i}", "test", fn -> i end)
    {:ok, t} = Trace.stop()
    assert length(t.spans) == 5 and t.dropped_spans == 7 and t.process_name == "capped"
    doc = check!(t)
    assert doc["otherData"]["dropped_spans"] == 7 and doc["otherData"]["max_spans"] == 5
  end

  test "stopping a large trace holds no normal scheduler (its terms are built on a dirty one)" do
    alias Plugboard.TestSupport.SchedulerWatch
    :ok = Trace.start(max_spans: 300_000)
    t0 = Trace.now()
    for i <- 1..200_000, do: :ok = Trace.record("s", "test", t0 + i, t0 + i, %{i: i})
    me = self()
    caller = spawn(fn -> receive(do: (:go -> send(me, {:done, self(), Trace.stop()}))) end)
    # What the caller's plugboard calls held of its normal scheduler, 20 ms or more (the stop of
    # 200,000 spans takes about 200 ms: on a normal scheduler it would show).
    watch = SchedulerWatch.start(20)
    SchedulerWatch.trace(watch, caller)
    send(caller, :go)
    assert_receive {:done, ^caller, {:ok, t}}, 60_000
    events = SchedulerWatch.stop(watch, [caller])
    assert SchedulerWatch.timed_calls(events) > 0, "the watch timed none of the caller's plugboard calls"
    assert length(t.spans) == 200_000
    # The NIF calls only: the caller's own garbage collections grow with the terms it asked for
    # (200,000 spans, about 30 MB: a major collection of 20 ms was seen), as with any term that size.
    # Before the spans came in chunks, trace_stop held its scheduler 46 ms on its return (the whole
    # term built on a dirty scheduler, merged into the caller's heap on its normal one).
    nif = for e <- SchedulerWatch.counted(events), match?({Plugboard.Native, _, _}, e.in) or match?({Plugboard.Native, _, _}, e.out), do: e
    assert nif == [], "Trace.stop held a normal scheduler: " <> SchedulerWatch.describe(nif)
  end

  test "spans of a process nest; args and names survive the JSON, escaped" do
    :ok = Trace.start()

    Trace.span("outer \"quoted\"\n", "test", %{"bytes" => 16, ratio: 0.5, who: :me, bad: <<0xFF, ?x>>, tuple: {1, 2}, big: 2 ** 70}, fn ->
      Trace.span("inner\\", "test", fn -> :ok end)
    end)

    t0 = Trace.now()
    :ok = Trace.record("named", "test", t0, t0 + 10, %{}, "my track")
    {:ok, t} = Trace.stop()
    check!(t)
    assert [outer] = named(t, "outer \"quoted\"\n")
    assert [inner] = named(t, "inner\\")
    assert inside?(inner, outer) and track(t, inner) == own_track()
    assert outer.args == %{"bytes" => 16, "ratio" => 0.5, "who" => "me", "bad" => <<0xFF, ?x>>, "tuple" => "{1, 2}", "big" => inspect(2 ** 70)}
    assert [named] = named(t, "named")
    assert track(t, named) == "my track" and named.end_ns - named.start_ns == 10
    # The invalid UTF-8 byte reaches the JSON as U+FFFD, the rest as it was.
    doc = JSON.decode!(Trace.to_json(t))
    assert Enum.find(doc["traceEvents"], &(&1["name"] == "outer \"quoted\"\n"))["args"]["bad"] == "\uFFFDx"
  end

  test "atoms with Latin-1 letters reach the trace as UTF-8 (the VM hands them to a NIF as Latin-1)" do
    :ok = Trace.start()
    t0 = Trace.now()
    :ok = Trace.record(:"café", "test", t0, t0 + 5, %{"naïve": :"crème"})
    {:ok, t} = Trace.stop()
    check!(t)
    assert [span] = named(t, "café")
    assert span.args == %{"naïve" => "crème"}
    assert String.valid?(span.name) and String.valid?(span.args["naïve"])
  end

  test "several traces make one document with a process each" do
    :ok = Trace.start(process_name: "a")
    Trace.span("in a", "test", fn -> :ok end)
    {:ok, a} = Trace.stop()
    :ok = Trace.start(process_name: "b")
    Trace.span("in b", "test", fn -> :ok end)
    {:ok, b} = Trace.stop()
    doc = JSON.decode!(Trace.to_json([a, b]))
    # Both from this OS process: numbered instead.
    names = for %{"ph" => "M", "name" => "process_name", "pid" => pid, "args" => %{"name" => n}} <- doc["traceEvents"], do: {pid, n}
    assert names == [{1, "a"}, {2, "b"}]
    assert for(%{"ph" => "X", "pid" => pid, "name" => n} <- doc["traceEvents"], do: {pid, n}) == [{1, "in a"}, {2, "in b"}]
    assert [%{"process_name" => "a", "pid" => 1}, %{"process_name" => "b", "pid" => 2}] = doc["otherData"]["traces"]
  end

  test "write: the file is the JSON; a path that cannot be written is named", %{client: c} do
    dir = Path.join(System.tmp_dir!(), "plugboard-trace-test-#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)
    :ok = Trace.start()
    _ = Plugboard.compile!(c, add_program())
    {:ok, t} = Trace.stop()
    path = Path.join(dir, "t.json")
    assert :ok = Trace.write(t, path)
    assert JSON.decode!(File.read!(path)) == JSON.decode!(Trace.to_json(t))
    assert File.ls!(dir) == ["t.json"]

    missing = Path.join([dir, "no such folder", "t.json"])
    assert {:error, %Plugboard.Error{message: m}} = Trace.write(t, missing)
    assert m =~ missing
    assert {:error, %Plugboard.Error{message: m}} = Trace.write(t, dir)
    assert m =~ dir
    assert File.ls!(dir) == ["t.json"]
  end

  describe "config :plugboard, trace:" do
    setup do
      dir = Path.join(System.tmp_dir!(), "plugboard-trace-config-#{System.unique_integer([:positive])}")
      bundle = make_bundle(Path.join(dir, "bundle"), cpu: first_plugin())

      on_exit(fn ->
        Application.delete_env(:plugboard, :trace)
        Application.delete_env(:plugboard, :bundle)
        Application.stop(:plugboard)
        Application.ensure_all_started(:plugboard)
        File.rm_rf!(dir)
      end)

      %{dir: dir, bundle: bundle}
    end

    test "traces from before the boot to the application's stop: the boot's stages are in the file", %{dir: dir, bundle: bundle} do
      path = Path.join(dir, "boot.trace.json")
      Application.put_env(:plugboard, :bundle, bundle)
      Application.put_env(:plugboard, :trace, path: path, max_spans: 10_000)
      before = Trace.now()
      Application.stop(:plugboard)
      {:ok, _} = Application.ensure_all_started(:plugboard)
      assert Trace.enabled?()
      exe = Plugboard.compile!(Plugboard.client!(), add_program())
      x = Plugboard.buffer!(Plugboard.client!(), f32s([1, 2, 3, 4]), :f32, {4})
      Plugboard.run!(exe, [x, x])
      refute File.exists?(path)
      :ok = Application.stop(:plugboard)
      later = Trace.now()
      refute Trace.enabled?()

      doc = JSON.decode!(File.read!(path))
      xs = for %{"ph" => "X"} = e <- doc["traceEvents"], do: e
      names = MapSet.new(xs, & &1["name"])
      assert [candidate] = for(e <- xs, e["name"] == "candidate", do: e)
      assert candidate["args"]["candidate"] == "cpu"

      for stage <- ~w(found verified loaded initialized client devices) do
        assert stage in names, "stage #{stage} missing: #{inspect(MapSet.to_list(names))}"
        [s] = for e <- xs, e["name"] == stage, do: e
        assert s["args"]["outcome"] == "passed"
        assert s["ts"] >= candidate["ts"] and s["ts"] + s["dur"] <= candidate["ts"] + candidate["dur"] + 0.001
      end

      assert "run" in names and "compile" in names
      for e <- xs, do: assert(e["ts"] * 1000 >= before - 1 and (e["ts"] + e["dur"]) * 1000 <= later + 1)
      assert doc["otherData"]["max_spans"] == 10_000
    end

    test "a path that cannot be written stops the start, naming it; a bad value is named too", %{dir: dir} do
      path = Path.join([dir, "missing folder", "t.json"])
      Application.put_env(:plugboard, :trace, path)
      Application.stop(:plugboard)

      log = capture_log(fn -> assert {:error, {:plugboard, _}} = Application.ensure_all_started(:plugboard) end)
      assert log =~ path
      refute Trace.enabled?()

      Application.put_env(:plugboard, :trace, paht: "x.json")
      log = capture_log(fn -> assert {:error, {:plugboard, _}} = Application.ensure_all_started(:plugboard) end)
      assert log =~ "config :plugboard, trace:" and log =~ "paht"
      refute Trace.enabled?()
    end

    test "a path that stops being writable is named in the log at stop", %{dir: dir} do
      sub = Path.join(dir, "gone")
      File.mkdir_p!(sub)
      path = Path.join(sub, "t.json")
      Application.put_env(:plugboard, :trace, path)
      Application.stop(:plugboard)
      {:ok, _} = Application.ensure_all_started(:plugboard)
      File.rm_rf!(sub)
      log = capture_log(fn -> :ok = Application.stop(:plugboard) end)
      assert log =~ "trace configured for #{path} not written" and log =~ "cannot write the trace to #{path}"
      refute Trace.enabled?()
    end
  end
end
