# What plugboard's per-run :telemetry events cost on the hot path (run by bench/telemetry.sh):
# Plugboard.run! of x + 1 (f32[4], input on the device, output dropped) in three settings,
# interleaved repetitions in one VM, the median ns per call of each:
#   - off: the default (Plugboard.Telemetry.run_events/1 off: one persistent_term read a run; the
#     summary's run counts are the NIF's, kept either way);
#   - run_events: `config :plugboard, run_events: true`, the start and stop events with nobody attached;
#   - handler: the same with a handler attached to both.
#
#   mix run --no-start bench/telemetry.exs PLUGIN      (:telemetry fetched: mix deps.get)
[plugin] = System.argv()
Code.ensure_loaded?(:telemetry) || raise "no :telemetry here: mix deps.get (bench/telemetry.sh points Hex at a repository)"
{:ok, _} = Application.ensure_all_started(:telemetry)
{:ok, c} = Plugboard.open(plugin)

t = "tensor<4xf32>"
exe = Plugboard.compile!(c, """
func.func public @main(%x: #{t}) -> #{t} {
  %one = stablehlo.constant dense<1.0> : #{t}
  %0 = stablehlo.add %x, %one : #{t}
  return %0 : #{t}
}
""")
x = Plugboard.buffer!(c, <<1.0::float-32-little, 2.0::float-32-little, 3.0::float-32-little, 4.0::float-32-little>>, :f32, {4})

median = fn list -> list |> Enum.sort() |> Enum.at(div(length(list), 2)) end
iters = 20_000
per_call = fn ->
  {us, _} = :timer.tc(fn -> Enum.each(1..iters, fn _ -> Plugboard.run!(exe, [x]) end) end)
  us * 1000 / iters
end

alias Plugboard.Telemetry.Summary

defmodule TelemetryBench.Handler do
  def handle(_event, _measurements, _metadata, _config), do: :ok
end

handler = {TelemetryBench.Handler, :bench}
events = [[:plugboard, :run, :start], [:plugboard, :run, :stop]]
true = Plugboard.Telemetry.setup()

set = fn
  :off ->
    :telemetry.detach(handler)
    Plugboard.Telemetry.run_events(false)

  :run_events ->
    :telemetry.detach(handler)
    Plugboard.Telemetry.run_events(true)

  :handler ->
    :telemetry.attach_many(handler, events, &TelemetryBench.Handler.handle/4, nil)
    Plugboard.Telemetry.run_events(true)
end

modes = [:off, :run_events, :handler]
Enum.each(modes, fn m -> set.(m); Enum.each(1..2000, fn _ -> Plugboard.run!(exe, [x]) end) end)
samples = for _ <- 1..9, m <- modes, do: (set.(m); {m, per_call.()})
result = Map.new(modes, fn m -> {m, median.(for {^m, ns} <- samples, do: ns)} end)
runs = Summary.snapshot().runs

IO.puts("#{Path.basename(Path.dirname(plugin))}: Plugboard.run! of x + 1, median of 9 x #{iters} calls (#{exe.launch} launch)")
for m <- modes do
  IO.puts("  #{String.pad_trailing(to_string(m), 11)} #{:erlang.float_to_binary(result[m], decimals: 0)} ns/call (#{:erlang.float_to_binary(result[m] - result.off, decimals: 0)} ns over off)")
end
# What "off" adds over no telemetry code at all: a run reads the switch once (at its start).
defmodule TelemetryBench.Switch do
  def read(0), do: :ok
  def read(k) do
    Plugboard.Telemetry.run_events?()
    read(k - 1)
  end

  def loop(0), do: :ok
  def loop(k), do: loop(k - 1)
end

{read_us, _} = :timer.tc(fn -> TelemetryBench.Switch.read(10_000_000) end)
{loop_us, _} = :timer.tc(fn -> TelemetryBench.Switch.loop(10_000_000) end)
IO.puts("  off's own cost: 1 read of the switch, #{:erlang.float_to_binary((read_us - loop_us) / 10_000, decimals: 1)} ns a run")
IO.puts("  (the summary's runs, counted by the NIF: #{runs.count}, #{runs.in_flight} in flight)")
