defmodule Plugboard.Trace.Summary do
  @moduledoc """
  Where a trace's time went, as a table: one row per span name (and category), with how many there
  are and the spread of their durations. It answers "which part of a step is slow" before you open
  the trace in Perfetto, and the benchmarks print it beside their timings
  (`bench/trace_breakdown.exs` in `:plugboard_nx`).

      iex> spans = [
      ...>   %{name: "jit", category: "nx", start_ns: 0, end_ns: 9_000, tid: 1, args: %{}},
      ...>   %{name: "run", category: "nx", start_ns: 2_000, end_ns: 8_000, tid: 1, args: %{}},
      ...>   %{name: "jit", category: "nx", start_ns: 10_000, end_ns: 21_000, tid: 1, args: %{}},
      ...>   %{name: "run", category: "nx", start_ns: 12_000, end_ns: 20_000, tid: 1, args: %{}}
      ...> ]
      iex> [jit, run] = Plugboard.Trace.Summary.rows(%Plugboard.Trace{spans: spans})
      iex> {jit.name, jit.count, jit.median_ns, jit.total_ns}
      {"jit", 2, 9_000, 20_000}
      iex> {run.name, run.min_ns, run.max_ns}
      {"run", 6_000, 8_000}

  A list of traces (a merged cluster trace, `Plugboard.Trace.Cluster`) is summed per node: each
  row's `process` is the trace's `process_name`.
  """

  @type row :: %{
          process: String.t() | nil,
          name: String.t(),
          category: String.t(),
          count: pos_integer(),
          total_ns: non_neg_integer(),
          min_ns: non_neg_integer(),
          median_ns: non_neg_integer(),
          p90_ns: non_neg_integer(),
          max_ns: non_neg_integer()
        }

  @doc """
  The rows of `trace` (or of each trace of a list), the largest total first. The median is the
  lower middle duration; `p90_ns` is the duration 90% of the spans do not exceed.
  """
  @spec rows(Plugboard.Trace.t() | [Plugboard.Trace.t()]) :: [row()]
  def rows(%Plugboard.Trace{} = trace), do: rows([trace]) |> Enum.map(&%{&1 | process: nil})

  def rows(traces) when is_list(traces) do
    traces
    |> Enum.flat_map(fn t -> Enum.map(t.spans, &{{t.process_name, &1.name, &1.category}, &1.end_ns - &1.start_ns}) end)
    |> Enum.group_by(&elem(&1, 0), &elem(&1, 1))
    |> Enum.map(fn {{process, name, category}, durations} -> row(process, name, category, Enum.sort(durations)) end)
    |> Enum.sort_by(&{-&1.total_ns, &1.name})
  end

  defp row(process, name, category, sorted) do
    count = length(sorted)

    %{process: process, name: name, category: category, count: count, total_ns: Enum.sum(sorted), min_ns: hd(sorted),
      median_ns: Enum.at(sorted, div(count - 1, 2)), p90_ns: Enum.at(sorted, max(ceil(count * 0.9) - 1, 0)), max_ns: List.last(sorted)}
  end

  @doc """
  `rows/1` as a text table (durations in µs), for a terminal or a log: at most `limit` rows
  (default 30).

      iex> spans = [%{name: "launch", category: "runtime", start_ns: 0, end_ns: 1_500, tid: 1, args: %{}}]
      iex> table = Plugboard.Trace.Summary.format(%Plugboard.Trace{spans: spans}) |> IO.iodata_to_binary()
      iex> table |> String.split("\\n") |> Enum.at(1) |> String.split()
      ["launch", "runtime", "1", "1.5", "1.5", "1.5", "1.5", "1.5"]
  """
  @spec format(Plugboard.Trace.t() | [Plugboard.Trace.t()], pos_integer()) :: iodata()
  def format(trace_or_traces, limit \\ 30) do
    header = [pad("span", 36), " ", pad("category", 12), " ", lpad("count", 8), lpad("total µs", 10), lpad("min", 10), lpad("median", 10),
              lpad("p90", 10), lpad("max", 10), "\n"]

    lines =
      for r <- trace_or_traces |> rows() |> Enum.take(limit) do
        name = if r.process, do: "#{r.process}: #{r.name}", else: r.name
        [pad(name, 36), " ", pad(r.category, 12), " ", lpad(Integer.to_string(r.count), 8),
         Enum.map([r.total_ns, r.min_ns, r.median_ns, r.p90_ns, r.max_ns], &lpad(micros(&1), 10)), "\n"]
      end

    [header | lines]
  end

  defp micros(ns), do: :erlang.float_to_binary(ns / 1000, decimals: 1)
  defp pad(s, n), do: String.pad_trailing(String.slice(s, 0, n), n)
  defp lpad(s, n), do: String.pad_leading(s, n)
end
