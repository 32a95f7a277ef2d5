# Plugboard.Nx.Backend's eager operations on small tensors, per operation, against baselines measured
# in the same run on the same inputs (one CPU plugin: PLUGBOARD_BENCH_PLUGIN, or the 0.81 one):
#   - backend: the operation called eagerly on Plugboard.Nx.Backend tensors (a program per operation,
#     types and shapes, compiled on first use and then found in the program table);
#   - jit:     the same operation in a cached `Nx.Defn.jit` through Plugboard.Nx on the same device
#     tensors (what the backend's call costs beyond running its program);
#   - binary:  the same operation on Nx.BinaryBackend tensors (pure Elixir, no device).
# and, for each operation, what the backend spends before its program runs: Nx's trace of the
# one-operation function (`Nx.Defn.debug_expr`, what every eager call does before the table lookup).
#
#   mix run bench/eager_bench.exs     (from bindings/elixir/plugboard_nx; bench/eager_bench.sh sets it up)
Code.require_file("bench_helpers.exs", __DIR__)

plugin = Bench.plugin()
{:ok, client} = Plugboard.open(plugin)
backend = {Plugboard.Nx.Backend, client: client}
IO.puts("plugin: #{plugin}\n#{Bench.load()}")

key = Nx.Random.key(3)
{a16, key} = Nx.Random.uniform(key, shape: {16}, type: :f32)
{b16, key} = Nx.Random.uniform(key, shape: {16}, type: :f32)
{m8, key} = Nx.Random.uniform(key, shape: {8, 8}, type: :f32)
{n8, _} = Nx.Random.uniform(key, shape: {8, 8}, type: :f32)

# name, arguments, the operation (the same function for all three).
ops = [
  {"add f32[16]", [a16, b16], &Nx.add/2},
  {"multiply by a scalar f32[16]", [a16], &Nx.multiply(&1, 2.0)},
  {"exp f32[16]", [a16], &Nx.exp/1},
  {"sum f32[8,8]", [m8], &Nx.sum/1},
  {"dot f32[8,8]·f32[8,8]", [m8, n8], &Nx.dot/2},
  {"transpose f32[8,8]", [m8], &Nx.transpose/1},
  {"slice f32[8,8] rows 2..5", [m8], &Nx.slice(&1, [2, 0], [4, 8])},
  {"concatenate 2 × f32[16]", [a16, b16], &Nx.concatenate([&1, &2])},
  {"argmax f32[8,8] axis 1", [m8], &Nx.argmax(&1, axis: 1)}
]

rows =
  for {name, args, op} <- ops do
    on_device = Enum.map(args, &Nx.backend_copy(&1, backend))
    jitted = Nx.Defn.jit(op, compiler: Plugboard.Nx, client: client)
    eager = fn -> apply(op, on_device) end
    # The three agree before anything is timed.
    expected = apply(op, args)

    for {what, got} <- [backend: eager.(), jit: apply(jitted, on_device)] do
      got = Nx.backend_copy(got, Nx.BinaryBackend)
      Nx.all_close(got, expected, rtol: 1.0e-6, atol: 1.0e-6) |> Nx.to_number() == 1 ||
        raise "#{name}: #{what} gives #{inspect(got)}, the binary backend #{inspect(expected)}"
    end

    t =
      Bench.interleaved(
        [
          backend: eager,
          jit: fn -> apply(jitted, on_device) end,
          binary: fn -> apply(op, args) end,
          trace: fn -> apply(Nx.Defn.debug_expr(op), args) end
        ],
        200,
        11
      )

    {name, t}
  end

f = fn us -> :erlang.float_to_binary(us, decimals: 1) end
IO.puts("\n| operation | backend (eager) | cached jit | backend − jit | Nx.BinaryBackend | backend / binary | Nx's trace of the op |")
IO.puts("|---|---|---|---|---|---|---|")

for {name, t} <- rows do
  IO.puts("| #{name} | #{f.(t.backend)} µs | #{f.(t.jit)} µs | +#{f.(t.backend - t.jit)} µs | #{f.(t.binary)} µs | " <>
            "#{:erlang.float_to_binary(t.backend / t.binary, decimals: 2)}× | #{f.(t.trace)} µs |")
end
