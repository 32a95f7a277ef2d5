# What Elixir adds over the C++ library, on one CPU plugin (run by bench/overhead.sh, which measures
# the C++ baseline in the same run and passes it in CXX_NS):
#   - Plugboard.run! of add f32[4] (inputs on device, outputs dropped) against the C++ execute + await;
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
    {us, _} = :timer.tc(fn -> for _ <- 1..iters, do: fun.() end)
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
run_ns = measure.(fn -> Plugboard.run!(add, [x, x]) end, 7, 5000)

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

cxx = case System.get_env("CXX_NS") do
  nil -> nil
  s -> String.to_float(s)
end

IO.puts("plugin: #{plugin}")
if cxx do
  IO.puts("Plugboard.run! add f32[4]:  #{Float.round(run_ns / 1000, 2)} us   C++ execute + await: #{Float.round(cxx / 1000, 2)} us   Elixir adds #{Float.round((run_ns - cxx) / 1000, 2)} us (goal <= +5 us)")
else
  IO.puts("Plugboard.run! add f32[4]:  #{Float.round(run_ns / 1000, 2)} us")
end
IO.puts("blocking callback round trip into Elixir: #{Float.round(per_call / 1000, 2)} us per call (goal <= 20 us; JAX pure_callback ~50 us, scripts/bench_callbacks.sh)")
