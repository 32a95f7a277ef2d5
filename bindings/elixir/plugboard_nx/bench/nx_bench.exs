# Nx on plugboard, measured against baselines in the same run (one CPU plugin, PLUGBOARD_BENCH_PLUGIN
# or the 0.81 one):
#  1. a cached jit call of a tiny function (x + 1 on f32[4]) against the same compiled program run
#     through Plugboard.run/3 (the Nx layer's own cost) and against Nx.Defn.Evaluator;
#  2. a runtime_call round trip into the calling process: a jit that calls an Elixir function
#     (identity) from inside the program, against the same jit without the call;
#  3. an MLP training step (forward + grad, batch 128, 64 -> 128 -> 10) against Nx.BinaryBackend
#     through the Evaluator, and the emitter's time for that step's module (no compile).
#
#   mix run bench/nx_bench.exs    (from bindings/elixir/plugboard_nx; bench/nx_bench.sh sets it up)
defmodule Bench do
  def median(list), do: list |> Enum.sort() |> Enum.at(div(length(list), 2))

  # Median microseconds per call of each function, interleaved rounds of `n` calls.
  def interleaved(funs, n, rounds) do
    Enum.each(funs, fn {_, f} -> for _ <- 1..n, do: f.() end)

    times =
      for _ <- 1..rounds, {name, f} <- funs do
        {t, _} = :timer.tc(fn -> for _ <- 1..n, do: f.() end)
        {name, t / n}
      end

    for {name, _} <- funs, into: %{}, do: {name, times |> Enum.filter(&(elem(&1, 0) == name)) |> Enum.map(&elem(&1, 1)) |> median()}
  end
end

defmodule Bench.Callback do
  import Nx.Defn
  defn with_call(x), do: Nx.runtime_call(x, x, [], &__MODULE__.identity/2) + 1
  def identity(t, _opts), do: t
end

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
end

plugin = System.get_env("PLUGBOARD_BENCH_PLUGIN") || Path.join(System.user_home!(), ".cache/plugboard/deps/files/xla_cpu_081/xla_cpu_pjrt.so")
{:ok, client} = Plugboard.open(plugin)
IO.puts("plugin: #{plugin}")

# 1. Dispatch of a tiny function.
x = Nx.tensor([1.0, 2.0, 3.0, 4.0])
tiny = Nx.Defn.jit(fn x -> Nx.add(x, 1) end, compiler: Plugboard.Nx, client: client)
on_device = tiny.(x)
text = Plugboard.Nx.to_mlir(fn x -> Nx.add(x, 1) end, [x])
exe = Plugboard.compile!(client, text)
buffer = on_device.data.buffer
evaluator = Nx.Defn.jit(fn x -> Nx.add(x, 1) end, compiler: Nx.Defn.Evaluator)

t =
  Bench.interleaved(
    [
      {:jit, fn -> tiny.(on_device) end},
      {:run, fn -> Plugboard.run!(exe, [buffer]) end},
      {:evaluator, fn -> evaluator.(x) end}
    ],
    200,
    15
  )

IO.puts(
  "tiny jit (x + 1, f32[4], argument on the device): #{Float.round(t.jit, 2)} us; Plugboard.run of the same program: " <>
    "#{Float.round(t.run, 2)} us (Nx layer +#{Float.round(t.jit - t.run, 2)} us, #{Float.round(t.jit / t.run, 2)}x); " <>
    "Nx.Defn.Evaluator on Nx.BinaryBackend: #{Float.round(t.evaluator, 2)} us (evaluator/jit #{Float.round(t.evaluator / t.jit, 2)})"
)

# 2. A runtime_call round trip.
called = Nx.Defn.jit(&Bench.Callback.with_call/1, compiler: Plugboard.Nx, client: client)
called.(on_device)

t3 =
  Bench.interleaved(
    [
      {:call, fn -> called.(on_device) end},
      {:plain, fn -> tiny.(on_device) end}
    ],
    200,
    15
  )

IO.puts(
  "runtime_call round trip (an identity on f32[4], called from inside the program): #{Float.round(t3.call, 2)} us per jit, " <>
    "#{Float.round(t3.plain, 2)} us without the call (round trip +#{Float.round(t3.call - t3.plain, 2)} us)"
)

# 3. An MLP training step.
key = Nx.Random.key(0)
{xb, key} = Nx.Random.uniform(key, shape: {128, 64})
{yb, key} = Nx.Random.uniform(key, shape: {128, 10})
{w1, key} = Nx.Random.normal(key, 0.0, 0.1, shape: {64, 128})
{w2, _} = Nx.Random.normal(key, 0.0, 0.1, shape: {128, 10})
params = {w1, Nx.broadcast(0.0, {128}), w2, Nx.broadcast(0.0, {10})}

step = Nx.Defn.jit(&Bench.MLP.step/3, compiler: Plugboard.Nx, client: client)
{device_params, _} = step.(params, xb, yb)
[xd, yd] = for t <- [xb, yb], do: Nx.backend_transfer(t, {Plugboard.Nx.Backend, client: client})
binary_step = Nx.Defn.jit(&Bench.MLP.step/3, compiler: Nx.Defn.Evaluator)

t2 =
  Bench.interleaved(
    [
      {:plugboard, fn -> step.(device_params, xd, yd) end},
      {:binary, fn -> binary_step.(params, xb, yb) end}
    ],
    1,
    5
  )

IO.puts(
  "MLP training step (forward + grad, batch 128, 64 -> 128 -> 10): Plugboard.Nx #{Float.round(t2.plugboard / 1000, 3)} ms, " <>
    "Nx.BinaryBackend (Evaluator) #{Float.round(t2.binary / 1000, 1)} ms (#{Float.round(t2.binary / t2.plugboard, 0)}x)"
)

templates = [params, xb, yb] |> Enum.map(&Nx.Defn.Composite.traverse(&1, fn t -> Nx.to_template(t) end))
emit = for _ <- 1..15, do: elem(:timer.tc(fn -> Plugboard.Nx.to_mlir(&Bench.MLP.step/3, templates) end), 0)
module = Plugboard.Nx.to_mlir(&Bench.MLP.step/3, templates)
{compile_us, _} = :timer.tc(fn -> Plugboard.compile!(client, module, compile_cache: false) end)

IO.puts(
  "emitting that step's StableHLO (#{length(String.split(module, "\n"))} lines, expression building included): " <>
    "#{Float.round(Bench.median(emit) / 1000, 2)} ms; XLA's compile of it: #{Float.round(compile_us / 1000, 1)} ms"
)
