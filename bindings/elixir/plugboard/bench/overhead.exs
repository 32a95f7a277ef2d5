# What Elixir adds over the C++ library, on one CPU plugin (run by bench/overhead.sh):
#   - Plugboard.run! of add f32[4] (inputs on device, outputs dropped) against the C++ library's
#     execute + await of the same executable in the same process (a NIF loop on a dirty scheduler),
#     in interleaved repetitions: the median of the paired differences;
#   - a blocking host callback's round trip into the Elixir process that runs the program: a program
#     of 100 chained calls against the same program without them, per call.
#
#   mix run bench/overhead.exs PLUGIN
[plugin] = System.argv()
{:ok, c} = Plugboard.open(plugin)

median = fn list -> list |> Enum.sort() |> Enum.at(div(length(list), 2)) end

# ns per call of `fun`: median of `reps` repetitions of `iters` calls.
measure = fn fun, reps, iters ->
  for(_ <- 1..3, do: fun.())
  median.(for _ <- 1..reps do
    # Enum.each: results become garbage at once (a list of them would keep every buffer alive).
    {us, _} = :timer.tc(fn -> Enum.each(1..iters, fn _ -> fun.() end) end)
    us * 1000 / iters
  end)
end

f32s = fn list -> for v <- list, into: <<>>, do: <<v::float-32-little>> end
t = "tensor<4xf32>"
add = Plugboard.compile!(c, """
func.func public @main(%a: #{t}, %b: #{t}) -> #{t} {
  %0 = stablehlo.add %a, %b : #{t}
  return %0 : #{t}
}
""")
x = Plugboard.buffer!(c, f32s.([1, 2, 3, 4]), :f32, {4})
iters = 5000
Enum.each(1..1000, fn _ -> Plugboard.run!(add, [x, x]) end)
pairs =
  for _ <- 1..9 do
    {:ok, cxx} = Plugboard.Native.measure_execute(add.resource, [x, x], iters)
    {us, _} = :timer.tc(fn -> Enum.each(1..iters, fn _ -> Plugboard.run!(add, [x, x]) end) end)
    {us * 1000 / iters, cxx}
  end
run_ns = median.(Enum.map(pairs, &elem(&1, 0)))
cxx = median.(Enum.map(pairs, &elem(&1, 1)))
added = median.(Enum.map(pairs, fn {e, c} -> e - c end))


chain = fn n ->
  calls =
    for i <- 1..n//1 do
      "%t#{i}, %v#{i} = stablehlo.custom_call @bench.echo(%t#{i - 1}, %v#{i - 1}) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, #{t}) -> (!stablehlo.token, #{t})"
    end

  Plugboard.compile!(c, """
  func.func public @main(%v0: #{t}) -> #{t} {
    %t0 = stablehlo.after_all : !stablehlo.token
    #{Enum.join(calls, "\n  ")}
    %r = stablehlo.add %v#{n}, %v0 : #{t}
    return %r : #{t}
  }
  """, callbacks: ["bench.echo"])
end

echo = %{"bench.echo" => fn [v] -> v end}
with_calls = chain.(100)
without = chain.(0)
t100 = measure.(fn -> Plugboard.run!(with_calls, [x], callbacks: echo) end, 5, 50)
t0 = measure.(fn -> Plugboard.run!(without, [x], callbacks: echo) end, 5, 50)
per_call = (t100 - t0) / 100

met = fn ok? -> if ok?, do: "met", else: "MISSED" end
IO.puts("plugin: #{plugin}")
IO.puts("Plugboard.run! add f32[4]: #{Float.round(run_ns / 1000, 2)} us   C++ execute + await: #{Float.round(cxx / 1000, 2)} us   Elixir adds #{Float.round(added / 1000, 2)} us (goal <= +5 us: #{met.(added <= 5_000)})")
IO.puts("blocking callback round trip into Elixir: #{Float.round(per_call / 1000, 2)} us per call (goal <= 20 us: #{met.(per_call <= 20_000)}; JAX's pure_callback: scripts/bench_callbacks.sh)")
