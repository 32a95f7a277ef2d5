# Checks of a recorded %Plugboard.Trace{} (or a cluster's list of them), shared by the tests that load
# traces (plugboard's test/trace_cluster_test.exs; plugboard_nx's test/trace_jit_test.exs and
# test/trace_cluster_test.exs): every span closed and inside the trace's recording, spans of one
# track nested (one inside the other, or apart), and the queries the tests ask of a timeline.
defmodule Plugboard.TraceChecks do
  @moduledoc false
  import ExUnit.Assertions

  @doc """
  Asserts `trace` is well formed: every span closed (end >= start) within [started_ns, stopped_ns]
  (`slack_ns` beyond either end for a trace shifted onto another clock: none by default), on a
  named track, and the spans of each track nested. Returns the trace.
  """
  def well_formed!(trace, slack_ns \\ 0) do
    assert is_integer(trace.started_ns) and is_integer(trace.stopped_ns) and trace.started_ns <= trace.stopped_ns

    for s <- trace.spans do
      assert is_integer(s.start_ns) and is_integer(s.end_ns) and s.end_ns >= s.start_ns, "span not closed: #{describe(s)}"
      assert s.start_ns >= trace.started_ns - slack_ns and s.end_ns <= trace.stopped_ns + slack_ns,
             "span outside the trace's recording [#{trace.started_ns}, #{trace.stopped_ns}]: #{describe(s)}"
      assert Map.has_key?(trace.tracks, s.tid), "span on an unnamed track #{s.tid}: #{describe(s)}"
    end

    for {tid, spans} <- Enum.group_by(trace.spans, & &1.tid), do: nested!(spans, trace.tracks[tid])
    trace
  end

  # In order of start (the longer first at equal starts), each span lies inside the innermost open
  # one that it starts in, or starts after it ends.
  defp nested!(spans, track) do
    spans
    |> Enum.sort_by(&{&1.start_ns, -&1.end_ns})
    |> Enum.reduce([], fn s, open ->
      open = Enum.drop_while(open, &(&1.end_ns <= s.start_ns))

      case open do
        [parent | _] -> assert s.end_ns <= parent.end_ns, "on track #{inspect(track)}, #{describe(s)} overlaps #{describe(parent)} without nesting"
        [] -> :ok
      end

      [s | open]
    end)

    :ok
  end

  @doc """
  The track a span is on, lanes merged: a named track's spans that overlap are drawn on lanes
  ("elixir #PID<0.1.0> [2]"), and this is the name without the lane ("elixir #PID<0.1.0>").
  """
  def track(trace, %{tid: tid}), do: String.replace(Map.fetch!(trace.tracks, tid), ~r/ \[\d+\]$/, "")

  @doc "The spans named `name` (and on the track named `track`, lanes merged, when given), in order of start."
  def named(trace, name, track \\ nil) do
    trace.spans |> Enum.filter(&(&1.name == name and (track == nil or track(trace, &1) == track))) |> Enum.sort_by(& &1.start_ns)
  end

  @doc """
  Asserts that the spans of `track` (lanes merged) all nest: one process's spans (a process does
  one thing at a time, so its spans are a call stack).
  """
  def stack!(trace, track) do
    spans = Enum.filter(trace.spans, &(track(trace, &1) == track))
    assert spans != [], "no span on track #{inspect(track)}"
    nested!(spans, track)
  end

  @doc "The spans directly inside `parent` on its track (lanes merged; not inside one of its children), in order."
  def children(trace, parent) do
    on = track(trace, parent)
    inside = trace.spans |> Enum.filter(&(&1 != parent and track(trace, &1) == on and inside?(&1, parent))) |> Enum.sort_by(&{&1.start_ns, -&1.end_ns})
    Enum.reject(inside, fn s -> Enum.any?(inside, &(&1 != s and inside?(s, &1))) end)
  end

  @doc "Whether `inner` lies within `outer`'s time, give or take `slack_ns`."
  def inside?(inner, outer, slack_ns \\ 0), do: inner.start_ns >= outer.start_ns - slack_ns and inner.end_ns <= outer.end_ns + slack_ns

  def describe(s), do: "#{s.name} [#{s.start_ns}, #{s.end_ns}] (#{s.category}, tid #{s.tid}, #{inspect(s.args)})"

  @doc """
  Writes `trace` (or a merged list) to `$PLUGBOARD_TRACE_OUT/<name>.trace.json` when
  PLUGBOARD_TRACE_OUT names a folder (made when missing): the example traces docs/traces.md's pictures
  are drawn from. Returns the path written, or nil.
  """
  def save(trace, name) do
    case System.get_env("PLUGBOARD_TRACE_OUT") do
      dir when dir in [nil, ""] ->
        nil

      dir ->
        File.mkdir_p!(dir)
        path = Path.join(dir, name <> ".trace.json")
        :ok = Plugboard.Trace.write(trace, path)
        path
    end
  end
end
