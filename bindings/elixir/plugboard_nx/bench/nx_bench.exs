# Nx on plugboard, measured against baselines in the same run (one CPU plugin, PLUGBOARD_BENCH_PLUGIN
# or the 0.81 one):
#  1. a cached jit call of a tiny function (x + 1 on f32[4]) against the same compiled program run
#     through Plugboard.run/3 (the Nx layer's cost), split into Nx.Defn's own dispatch (the same
#     jit through a compiler that runs nothing, Bench.NullCompiler) and Plugboard.Nx's, and against
#     Nx.Defn.Evaluator;
#  2. a runtime_call round trip into the calling process: a jit of 100 chained runtime_calls (an
#     Elixir identity) against none, per call, and plugboard's own blocking callback measured the same
#     way (Plugboard.run with callbacks:);
#  3. an MLP training step (forward + grad, batch 128, 64 -> 128 -> 10) against Nx.BinaryBackend
#     through the Evaluator, and the emitter's time for that step's module (no compile).
#
#   mix run bench/nx_bench.exs    (from bindings/elixir/plugboard_nx; bench/nx_bench.sh sets it up)
#
# The figures are also printed as one `figures: {JSON}` line (Bench.print_figures/2), from which
# bench/nx_figures.py makes the Nx guide's table and plot once nx_bench.sh --record has recorded them.
Code.require_file("bench_helpers.exs", __DIR__)

plugin = Bench.plugin()
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
null = Nx.Defn.jit(fn x -> Nx.add(x, 1) end, compiler: Bench.NullCompiler, client: client)

t =
  Bench.interleaved(
    [
      {:jit, fn -> tiny.(on_device) end},
      {:run, fn -> Plugboard.run!(exe, [buffer]) end},
      {:evaluator, fn -> evaluator.(x) end},
      {:null, fn -> null.(on_device) end}
    ],
    200,
    15
  )

IO.puts(
  "tiny jit (x + 1, f32[4], argument on the device): #{Float.round(t.jit, 2)} us; Plugboard.run of the same program: " <>
    "#{Float.round(t.run, 2)} us (Nx layer +#{Float.round(t.jit - t.run, 2)} us, #{Float.round(t.jit / t.run, 2)}x: " <>
    "Nx.Defn's own dispatch #{Float.round(t.null, 2)} us, a compiler that runs nothing; Plugboard.Nx's " <>
    "+#{Float.round(t.jit - t.run - t.null, 2)} us); " <>
    "Nx.Defn.Evaluator on Nx.BinaryBackend: #{Float.round(t.evaluator, 2)} us (evaluator/jit #{Float.round(t.evaluator / t.jit, 2)})"
)

# 2. A runtime_call round trip: programs of 100 chained calls against the same without them, per call
#    (as bench/overhead.sh measures plugboard's own blocking callback, which runs here too, same run).
chained = fn n ->
  Nx.Defn.jit(fn x -> Enum.reduce(1..n//1, x, fn _, acc -> Nx.runtime_call(acc, acc, [], &Bench.Callback.identity/2) end) end,
    compiler: Plugboard.Nx, client: client)
end

[nx100, nx0] = for n <- [100, 0], do: chained.(n)

raw_chain = fn n ->
  calls =
    for i <- 1..n//1 do
      "%t#{i}, %v#{i} = stablehlo.custom_call @host_identity(%t#{i - 1}, %v#{i - 1}) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, tensor<4xf32>) -> (!stablehlo.token, tensor<4xf32>)"
    end

  Plugboard.compile!(client, """
  func.func public @main(%v0: tensor<4xf32>) -> tensor<4xf32> {
    %t0 = stablehlo.after_all : !stablehlo.token
    #{Enum.join(calls, "\n    ")}
    %r = stablehlo.add %v#{n}, %v0 : tensor<4xf32>
    return %r : tensor<4xf32>
  }
  """, callbacks: ["host_identity"])
end

[raw100, raw0] = for n <- [100, 0], do: raw_chain.(n)
raw_bindings = [callbacks: %{"host_identity" => fn [operand] -> [operand] end}]

t3 =
  Bench.interleaved(
    [
      {:nx100, fn -> nx100.(on_device) end},
      {:nx0, fn -> nx0.(on_device) end},
      {:raw100, fn -> Plugboard.run!(raw100, [buffer], raw_bindings) end},
      {:raw0, fn -> Plugboard.run!(raw0, [buffer], raw_bindings) end}
    ],
    5,
    15
  )

nx_call = (t3.nx100 - t3.nx0) / 100
raw_call = (t3.raw100 - t3.raw0) / 100

IO.puts(
  "runtime_call round trip into the calling process (an identity on f32[4]; 100 chained calls against none): " <>
    "#{Float.round(nx_call, 2)} us per call; plugboard's own blocking callback, same run: #{Float.round(raw_call, 2)} us " <>
    "(the Nx layer's share #{Float.round(nx_call - raw_call, 2)} us)"
)

# 3. An MLP training step.
{params, xb, yb} = Bench.MLP.data()

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

figures_emit_ms = Bench.median(emit) / 1000
IO.puts(
  "emitting that step's StableHLO (#{length(String.split(module, "\n"))} lines, expression building included): " <>
    "#{Float.round(Bench.median(emit) / 1000, 2)} ms; XLA's compile of it: #{Float.round(compile_us / 1000, 1)} ms"
)

Bench.print_figures(client, %{
  jit_us: t.jit,
  run_us: t.run,
  nx_defn_dispatch_us: t.null,
  evaluator_us: t.evaluator,
  runtime_call_us: nx_call,
  blocking_callback_us: raw_call,
  mlp_step_ms: t2.plugboard / 1000,
  mlp_step_binary_backend_ms: t2.binary / 1000,
  mlp_emit_ms: figures_emit_ms,
  mlp_compile_ms: compile_us / 1000
})
