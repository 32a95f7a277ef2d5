# Where a call's time goes, from traces (issue 36): on one CPU plugin (PLUGBOARD_BENCH_PLUGIN or the
# 0.81 one), three workloads, each timed untraced and traced in interleaved rounds (what tracing on
# costs a call), then traced once more for the table (Plugboard.Trace.Summary: per span name, count
# and durations) and the nesting figures below it:
#  1. a cached jit of x + 1 (f32[4], argument on the device): the Nx layer (jit outside its run),
#     Plugboard.run (the Elixir run outside the launch), the launch outside the plugin's execute call;
#  2. an MLP training step (Bench.MLP, arguments on the device);
#  3. a jit with one runtime_call into the calling process: the plugin thread's wait against the
#     Elixir function;
#  4. bench/jax_bench.exs's MLP step and transformer block (full shapes): how much of a step is the
#     device's execution (the plugin's compiled program) and how much is plugboard's, around it.
# PLUGBOARD_TRACE_OUT=dir writes each workload's trace there (dispatch, mlp_step, runtime_call .trace.json).
#
#   mix run bench/trace_breakdown.exs    (from bindings/elixir/plugboard_nx; bench/trace_breakdown.sh
#                                         runs it on each CPU plugin)
Code.require_file("bench_helpers.exs", __DIR__)
Code.require_file("jax_models.exs", __DIR__)
Code.require_file("jax_harness.exs", __DIR__)

defmodule Breakdown do
  alias Plugboard.Trace

  # Untraced and traced per-call microseconds (interleaved rounds of `n` calls, tracing started
  # before and stopped after each traced round, outside its figure), then one traced batch of `n`.
  def measure(label, fun, n) do
    for _ <- 1..n, do: fun.()

    traced_round = fn ->
      :ok = Trace.start(max_spans: 1_000_000)
      per_call = Bench.per_call(fun, n)
      {:ok, _} = Trace.stop()
      per_call
    end

    t = Bench.rounds([{:off, fn -> Bench.per_call(fun, n) end}, {:on, traced_round}], 9)

    :ok = Trace.start(max_spans: 1_000_000)
    for _ <- 1..n, do: fun.()
    {:ok, trace} = Trace.stop()
    if dir = System.get_env("PLUGBOARD_TRACE_OUT"), do: :ok = Trace.write(trace, Path.join(dir, "#{label}.trace.json"))

    IO.puts("\n== #{label}: #{us(t.off)} µs a call untraced, #{us(t.on)} µs traced (tracing on costs #{us(t.on - t.off)} µs a call)")
    IO.write(Plugboard.Trace.Summary.format(trace, 14))
    trace
  end

  # Median over the spans named `outer` of (its duration minus its longest span named in `inner`
  # lying inside it, on any track): the time the outer layer spends outside the inner one. The
  # workloads here make one call after another, so the outer spans do not overlap: one sweep.
  def outside(trace, outer, inner) do
    outers = trace.spans |> Enum.filter(&(&1.name == outer)) |> Enum.sort_by(& &1.start_ns)
    inners = trace.spans |> Enum.filter(&(&1.name in inner)) |> Enum.sort_by(& &1.start_ns)

    {gaps, _} =
      Enum.map_reduce(outers, inners, fn o, rest ->
        rest = Enum.drop_while(rest, &(&1.start_ns < o.start_ns))
        {within, _} = Enum.split_while(rest, &(&1.start_ns < o.end_ns))
        longest = within |> Enum.filter(&(&1.end_ns <= o.end_ns)) |> Enum.map(&(&1.end_ns - &1.start_ns)) |> Enum.max(fn -> 0 end)
        {o.end_ns - o.start_ns - longest, rest}
      end)

    if gaps == [], do: nil, else: Bench.median(gaps)
  end

  def us(nil), do: "-"
  def us(us) when is_float(us), do: :erlang.float_to_binary(us, decimals: 2)
  def us(ns) when is_integer(ns), do: :erlang.float_to_binary(ns / 1000, decimals: 2)
end

plugin = Bench.plugin()
{:ok, client} = Plugboard.open(plugin)
IO.puts("plugin: #{plugin}; #{Bench.load()}")

# 1. x + 1.
x = Nx.tensor([1.0, 2.0, 3.0, 4.0]) |> Nx.backend_transfer({Plugboard.Nx.Backend, client: client})
tiny = Nx.Defn.jit(fn x -> Nx.add(x, 1) end, compiler: Plugboard.Nx, client: client)
tiny.(x)
trace = Breakdown.measure("dispatch", fn -> tiny.(x) end, 2000)

IO.puts(
  "medians, µs: Nx layer (jit outside its nx run) #{Breakdown.us(Breakdown.outside(trace, "jit", ["run"]))}; " <>
    "Plugboard.run outside its launch #{Breakdown.us(Breakdown.outside(trace, "run", ["launch"]))} (the nx run span, and the elixir run span: " <>
    "#{Breakdown.us(Breakdown.outside(%{trace | spans: Enum.filter(trace.spans, &(&1.category != "nx"))}, "run", ["launch"]))}); " <>
    "launch outside PJRT_LoadedExecutable_Execute #{Breakdown.us(Breakdown.outside(trace, "launch", ["PJRT_LoadedExecutable_Execute"]))}"
)

# 2. An MLP training step.
{params, xb, yb} = Bench.MLP.data()
step = Nx.Defn.jit(&Bench.MLP.step/3, compiler: Plugboard.Nx, client: client)
{device_params, _} = step.(params, xb, yb)
[xd, yd] = for t <- [xb, yb], do: Nx.backend_transfer(t, {Plugboard.Nx.Backend, client: client})
trace = Breakdown.measure("mlp_step", fn -> step.(device_params, xd, yd) end, 200)

IO.puts(
  "medians, µs: jit outside its nx run #{Breakdown.us(Breakdown.outside(trace, "jit", ["run"]))}; " <>
    "launch outside the plugin's execute call #{Breakdown.us(Breakdown.outside(trace, "launch", ["PJRT_LoadedExecutable_Execute"]))}"
)

# 3. One runtime_call.
rc = Nx.Defn.jit(fn x -> Nx.runtime_call(x, x, [], &Bench.Callback.identity/2) end, compiler: Plugboard.Nx, client: client)
rc.(x)
trace = Breakdown.measure("runtime_call", fn -> rc.(x) end, 1000)

IO.puts(
  "medians, µs: the plugin thread's wait (blocking_callback) outside the Elixir function (runtime_call) " <>
    "#{Breakdown.us(Breakdown.outside(trace, "blocking_callback", ["runtime_call", "host_callback"]))}"
)

# 4. The JAX benchmark's models: the step's time on the device against its time in plugboard.
for model <- [:mlp, :transformer] do
  dims = JaxBench.Models.dims(model, :full)
  step = Nx.Defn.jit(JaxBench.Models.function(model, dims), compiler: Plugboard.Nx, client: client)
  args = JaxBench.Harness.on_device(client, JaxBench.Harness.inputs(model, dims))
  apply(step, args)
  trace = Breakdown.measure("jax_#{model}", fn -> apply(step, args) end, 20)
  median = fn name -> trace.spans |> Enum.filter(&(&1.name == name)) |> Enum.map(&(&1.end_ns - &1.start_ns)) |> Bench.median() end

  IO.puts(
    "medians, µs: jit #{Breakdown.us(median.("jit"))}, of which the device's execute #{Breakdown.us(median.("execute"))} " <>
      "(#{Float.round(100 * median.("execute") / median.("jit"), 1)}%); jit outside its nx run #{Breakdown.us(Breakdown.outside(trace, "jit", ["run"]))}; " <>
      "launch outside the plugin's execute call #{Breakdown.us(Breakdown.outside(trace, "launch", ["PJRT_LoadedExecutable_Execute"]))}"
  )
end
