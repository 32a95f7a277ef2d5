# What the benchmark scripts here share (Code.require_file'd by them).
defmodule Bench do
  def median(list), do: list |> Enum.sort() |> Enum.at(div(length(list), 2))

  @doc """
  Interleaved rounds: each round takes one sample of every measure in turn (A, B, A, B, ...), a
  measure being a function that returns its own figure (e.g. microseconds per call), or several
  figures as a map. The median of each figure's samples, by name.
  """
  def rounds(measures, rounds) do
    samples =
      for _ <- 1..rounds, {name, measure} <- measures, {key, value} <- figures(name, measure.()), do: {key, value}

    samples |> Enum.group_by(&elem(&1, 0), &elem(&1, 1)) |> Map.new(fn {key, values} -> {key, median(values)} end)
  end

  defp figures(_name, map) when is_map(map), do: Map.to_list(map)
  defp figures(name, value), do: [{name, value}]

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

  @doc """
  Runs `fun` and returns {wall, cpu} microseconds: the wall-clock time and this OS process's CPU
  time over it (user + system, every thread: the BEAM's schedulers and the plugin's; /proc, 10 ms
  ticks, so take it over rounds of a few hundred milliseconds). CPU time hardly depends on what
  else the machine runs, so its ratios hold on a loaded machine where wall-clock ones do not.
  """
  def timed(fun) do
    c0 = cpu_us()
    {wall, _} = :timer.tc(fun)
    {wall, cpu_us() - c0}
  end

  defp cpu_us do
    [_, fields] = "/proc/self/stat" |> File.read!() |> String.split(") ", parts: 2)
    [utime, stime] = fields |> String.split() |> Enum.slice(11, 2)
    (String.to_integer(utime) + String.to_integer(stime)) * div(1_000_000, 100)
  end

  @doc "The CPU plugin to measure: PLUGBOARD_BENCH_PLUGIN (bench/env.sh's loop sets it), else the 0.81 one."
  def plugin do
    System.get_env("PLUGBOARD_BENCH_PLUGIN") ||
      Path.join(System.user_home!(), ".cache/plugboard/deps/files/xla_cpu_081/xla_cpu_pjrt.so")
  end

  @doc """
  Prints a benchmark's figures as one line, `figures: {JSON}`: the plugin (its file and the platform
  version its client reports), Nx's version and the figures (each a number, rounded to 3 decimals).
  `scripts/bench_record.sh` records the output with the machine, the commit and the command, and
  bench/nx_figures.py makes the Nx guide's table and plot from these lines.
  """
  def print_figures(client, figures) do
    plugin = plugin()

    line = %{
      "plugin" => Path.join(plugin |> Path.dirname() |> Path.basename(), Path.basename(plugin)),
      "platform_version" => client.platform_version,
      "nx" => Application.spec(:nx, :vsn) |> to_string(),
      "figures" => Map.new(figures, fn {k, v} -> {to_string(k), Float.round(v * 1.0, 3)} end)
    }

    IO.puts("figures: " <> json(line))
  end

  # JSON of what print_figures/2 prints: maps with string keys, strings, numbers.
  defp json(map) when is_map(map),
    do: "{" <> Enum.map_join(Enum.sort(map), ",", fn {k, v} -> json(k) <> ":" <> json(v) end) <> "}"

  defp json(s) when is_binary(s) do
    escaped =
      for <<c::utf8 <- s>>, into: "" do
        cond do
          c in [?", ?\\] -> <<?\\, c>>
          c < 0x20 -> "\\u" <> String.pad_leading(Integer.to_string(c, 16), 4, "0")
          true -> <<c::utf8>>
        end
      end

    ~s("#{escaped}")
  end
  defp json(n) when is_number(n), do: to_string(n)

  @doc "The machine's load averages (1, 5, 15 minutes) and its CPU count, for the record."
  def load do
    avg = case File.read("/proc/loadavg") do
      {:ok, text} -> text |> String.split() |> Enum.take(3) |> Enum.join(" ")
      _ -> "unknown"
    end

    "load average #{avg} on #{System.schedulers_online()} schedulers"
  end
end

defmodule Bench.NullCompiler do
  # A compiler that compiles and runs nothing: each call answers its first argument as it is. A jit
  # through it costs what Nx.Defn's own dispatch costs (options, lazy parameters, the compiler
  # call), the floor under any compiler's cached jit.
  @behaviour Nx.Defn.Compiler
  @impl true
  def __jit__(_key, _vars, _fun, args_list, _opts), do: for(args <- args_list, do: hd(args).())
  @impl true
  def __compile__(_key, _vars, _fun, _opts), do: fn args_list -> for(args <- args_list, do: hd(args).()) end
  @impl true
  def __partitions_options__(_opts), do: [1]
  @impl true
  def __to_backend__(_opts), do: {Nx.BinaryBackend, []}
end

# The runtime_call function nx_bench.exs and trace_breakdown.exs time: an identity.
defmodule Bench.Callback do
  def identity(t, _opts), do: t
end

# The MLP training step nx_bench.exs and trace_breakdown.exs measure (forward + grad, plain SGD).
defmodule Bench.MLP do
  import Nx.Defn

  defn loss({w1, b1, w2, b2}, x, y) do
    h = Nx.tanh(Nx.dot(x, w1) + b1)
    logits = Nx.dot(h, w2) + b2
    d = logits - y
    Nx.mean(d * d)
  end

  defn step(params, x, y) do
    {l, g} = value_and_grad(params, &loss(&1, x, y))
    {w1, b1, w2, b2} = params
    {gw1, gb1, gw2, gb2} = g
    {{w1 - 0.01 * gw1, b1 - 0.01 * gb1, w2 - 0.01 * gw2, b2 - 0.01 * gb2}, l}
  end

  @doc "Parameters and a batch (128 of 64 -> 10), on Nx.BinaryBackend: {params, x, y}."
  def data do
    key = Nx.Random.key(0)
    {xb, key} = Nx.Random.uniform(key, shape: {128, 64})
    {yb, key} = Nx.Random.uniform(key, shape: {128, 10})
    {w1, key} = Nx.Random.normal(key, 0.0, 0.1, shape: {64, 128})
    {w2, _} = Nx.Random.normal(key, 0.0, 0.1, shape: {128, 10})
    {{w1, Nx.broadcast(0.0, {128}), w2, Nx.broadcast(0.0, {10})}, xb, yb}
  end
end
