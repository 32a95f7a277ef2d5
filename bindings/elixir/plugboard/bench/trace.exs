# What Plugboard.Trace costs from Elixir, on one CPU plugin: Plugboard.run! of add f32[4] and a
# Plugboard.Trace.span/4 around nothing, with tracing off and on, in alternating rounds (reductions
# of the calling process, a count; and ns a call, which mean little on a loaded machine); then stop/0
# and to_json/1 of a trace of 200,000 spans.
#
#   MIX_ENV=test mix run bench/trace.exs PLUGIN [ROUNDS]
alias Plugboard.Trace
[plugin | rest] = System.argv()
rounds = String.to_integer(List.first(rest) || "5")
{:ok, c} = Plugboard.open(plugin)

exe =
  Plugboard.compile!(c, """
  func.func public @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %x, %y : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  """)

x = Plugboard.buffer!(c, <<1.0::float-32-little, 2.0::float-32-little, 3.0::float-32-little, 4.0::float-32-little>>, :f32, {4})

defmodule TraceBench do
  def loop(_f, 0), do: :ok
  def loop(f, k), do: (f.(); loop(f, k - 1))

  # Reductions a call of `f`, less those of a call of an empty function (the loop's own).
  def reductions(f, n), do: count(f, n) - count(fn -> :ok end, n)

  defp count(f, n) do
    :erlang.garbage_collect()
    {:reductions, r0} = :erlang.process_info(self(), :reductions)
    loop(f, n)
    {:reductions, r1} = :erlang.process_info(self(), :reductions)
    (r1 - r0) / n
  end

  def ns(f, n) do
    t0 = System.monotonic_time(:nanosecond)
    loop(f, n)
    (System.monotonic_time(:nanosecond) - t0) / n
  end

  def row(run, span, n), do: {reductions(run, n), ns(run, n), reductions(span, n), ns(span, n)}
end

run = fn -> Plugboard.run!(exe, [x, x]) end
span = fn -> Trace.span("s", "bench", fn -> :ok end) end
n = 5000
TraceBench.loop(run, 2000)
f = &:erlang.float_to_binary(&1 * 1.0, decimals: 1)

for _ <- 1..rounds do
  {r0, t0, s0, u0} = TraceBench.row(run, span, n)
  :ok = Trace.start(max_spans: 1_000_000)
  {r1, t1, s1, u1} = TraceBench.row(run, span, n)
  {:ok, _} = Trace.stop()
  IO.puts("run!: off #{f.(r0)} reductions #{round(t0)} ns, on #{f.(r1)} reductions #{round(t1)} ns | " <>
            "span: off #{f.(s0)} reductions #{round(u0)} ns, on #{f.(s1)} reductions #{round(u1)} ns")
end

:ok = Trace.start(max_spans: 1_000_000)
TraceBench.loop(span, 200_000)
{stop_us, {:ok, t}} = :timer.tc(fn -> Trace.stop() end)
{json_us, json} = :timer.tc(fn -> IO.iodata_to_binary(Trace.to_json(t)) end)
IO.puts("a trace of #{length(t.spans)} spans: stop #{div(stop_us, 1000)} ms, to_json #{div(json_us, 1000)} ms, #{byte_size(json)} bytes")
