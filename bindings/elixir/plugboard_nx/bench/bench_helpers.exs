# What the benchmark scripts here share (Code.require_file'd by them).
defmodule Bench do
  def median(list), do: list |> Enum.sort() |> Enum.at(div(length(list), 2))

  @doc """
  Interleaved rounds: each round takes one sample of every measure in turn (A, B, A, B, ...), a
  measure being a function that returns its own figure (e.g. microseconds per call). The median of
  each measure's samples, by name.
  """
  def rounds(measures, rounds) do
    samples = for _ <- 1..rounds, {name, measure} <- measures, do: {name, measure.()}
    for {name, _} <- measures, into: %{}, do: {name, samples |> Enum.filter(&(elem(&1, 0) == name)) |> Enum.map(&elem(&1, 1)) |> median()}
  end

  @doc "Median microseconds per call of each function, interleaved rounds of `n` calls (after `n` calls of each to warm up)."
  def interleaved(funs, n, rounds) do
    Enum.each(funs, fn {_, f} -> for _ <- 1..n, do: f.() end)
    measures = Enum.map(funs, fn {name, f} -> {name, fn -> per_call(f, n) end} end)
    rounds(measures, rounds)
  end

  @doc "Microseconds per call of `n` calls of `f`."
  def per_call(f, n) do
    {t, _} = :timer.tc(fn -> for _ <- 1..n, do: f.() end)
    t / n
  end

  @doc "The CPU plugin to measure: PLUGBOARD_BENCH_PLUGIN (bench/env.sh's loop sets it), else the 0.81 one."
  def plugin do
    System.get_env("PLUGBOARD_BENCH_PLUGIN") ||
      Path.join(System.user_home!(), ".cache/plugboard/deps/files/xla_cpu_081/xla_cpu_pjrt.so")
  end

  @doc "The machine's load averages (1, 5, 15 minutes) and its CPU count, for the record."
  def load do
    avg = case File.read("/proc/loadavg") do
      {:ok, text} -> text |> String.split() |> Enum.take(3) |> Enum.join(" ")
      _ -> "unknown"
    end

    "load average #{avg} on #{System.schedulers_online()} schedulers"
  end
end
