defmodule Plugboard.TraceSummaryTest do
  # Plugboard.Trace.Summary: its examples, and the table of a real trace (runs of x + 1): one row per
  # span name whose count and durations are the trace's own.
  use ExUnit.Case, async: false
  import Plugboard.TestSupport
  alias Plugboard.Trace
  alias Plugboard.Trace.Summary

  doctest Plugboard.Trace.Summary

  test "the summary of 50 runs counts each span name once per run, with durations from the trace" do
    {:ok, client} = Plugboard.open(first_plugin())
    exe = Plugboard.compile!(client, add_program())
    x = Plugboard.buffer!(client, f32s([1, 2, 3, 4]), :f32, {4})
    :ok = Trace.start()
    for _ <- 1..50, do: [_] = Plugboard.run!(exe, [x, x])
    {:ok, trace} = Trace.stop()

    rows = Map.new(Summary.rows(trace), &{&1.name, &1})
    runs = for s <- trace.spans, s.name == "run", do: s.end_ns - s.start_ns
    assert %{count: 50, min_ns: min, max_ns: max, total_ns: total, median_ns: median, p90_ns: p90} = rows["run"]
    assert {min, max, total} == {Enum.min(runs), Enum.max(runs), Enum.sum(runs)}
    assert min <= median and median <= p90 and p90 <= max
    assert Enum.count(runs, &(&1 <= median)) >= 25 and Enum.count(runs, &(&1 <= p90)) >= 45
    assert rows["launch"].count == 50
    # The largest total first; the table prints a line per row under its header.
    totals = trace |> Summary.rows() |> Enum.map(& &1.total_ns)
    assert totals == Enum.sort(totals, :desc)
    lines = trace |> Summary.format(3) |> IO.iodata_to_binary() |> String.split("\n", trim: true)
    assert length(lines) == 4 and hd(lines) =~ "median"
  end
end
