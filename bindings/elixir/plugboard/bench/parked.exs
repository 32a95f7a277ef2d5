# The figures of issue 24's closing note, on one CPU plugin (run by bench/parked.sh):
#   - compile latency of a small program on an idle client, with 0 and with 1000 executions parked in
#     blocking host callbacks that nobody answers (on another client of the same plugin;
#     callback_timeout: :infinity); median of 5, or "did not finish" past 10 s;
#   - a ~2 s while loop (which XLA's CPU client runs inline, inside PJRT_LoadedExecutable_Execute):
#     the long_schedule events (>= 5 ms) of the process that ran it, count and max ms.
#
#   mix run --no-start bench/parked.exs PLUGIN [PARKED]
# The test support's programs (test/support/test_support.ex; MIX_ENV=prod does not compile it).
Code.require_file("../test/support/test_support.ex", __DIR__)
alias Plugboard.TestSupport, as: Support

{plugin, parked} =
  case System.argv() do
    [plugin] -> {plugin, 1000}
    [plugin, n] -> {plugin, String.to_integer(n)}
  end

cap_ms = 10_000
median = fn list -> list |> Enum.sort() |> Enum.at(div(length(list), 2)) end

# ms to compile a program never compiled before, or nil past the cap.
compile_ms = fn client ->
  program = Support.unique_program("bench")

  t0 = System.monotonic_time(:microsecond)

  case Plugboard.compile(client, program, compile_cache: false, timeout: cap_ms) do
    {:ok, _} -> (System.monotonic_time(:microsecond) - t0) / 1000
    {:error, %Plugboard.Error{code: :deadline_exceeded}} -> nil
    {:error, e} -> raise e
  end
end

# Median of 5, stopping at the first that did not finish.
compile_figure = fn client ->
  Enum.reduce_while(1..5, [], fn _, acc ->
    case compile_ms.(client) do
      nil -> {:halt, nil}
      ms -> {:cont, [ms | acc]}
    end
  end)
  |> then(fn
    nil -> "did not finish in #{cap_ms} ms"
    list -> "#{Float.round(median.(list), 1)} ms"
  end)
end

IO.puts("plugin: #{plugin}")

# ---- compile latency with 0 and with `parked` parked callbacks
{:ok, parked_client} = Plugboard.open(plugin)
{:ok, other} = Plugboard.open(plugin)

wait = Plugboard.compile!(parked_client, """
func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %t0 = stablehlo.after_all : !stablehlo.token
  %t1, %s = stablehlo.custom_call @host_wait(%t0, %x) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, tensor<4xf32>) -> (!stablehlo.token, tensor<4xf32>)
  %out = stablehlo.add %s, %x : tensor<4xf32>
  return %out : tensor<4xf32>
}
""", callbacks: ["host_wait"])
x = Plugboard.buffer!(parked_client, Support.f32s([1, 2, 3, 4]), :f32, {4})

_ = compile_ms.(other)
idle = compile_figure.(other)

handler =
  spawn(fn ->
    loop = fn loop, calls ->
      receive do
        {:plugboard_call, _, call} -> loop.(loop, [call | calls])
        {:count, from} -> send(from, {:count, length(calls)}); loop.(loop, calls)
      end
    end

    loop.(loop, [])
  end)

count = fn ->
  send(handler, {:count, self()})
  receive do: ({:count, n} -> n)
end

t0 = System.monotonic_time(:millisecond)
runs = for _ <- 1..parked, do: elem(Plugboard.run_async(wait, [x], callbacks: %{"host_wait" => handler}, callback_timeout: :infinity), 1)
# Until the calls at the handler stop growing.
settle = fn settle, last ->
  Process.sleep(300)
  n = count.()
  if n == last and n > 0, do: n, else: settle.(settle, n)
end
calls = settle.(settle, -1)
park_ms = System.monotonic_time(:millisecond) - t0 - 300
with_parked = compile_figure.(other)

IO.puts("compile latency on an idle client: #{idle} with 0 parked; #{with_parked} with #{parked} parked " <>
          "(#{calls} calls at the handler; started in ~#{park_ms} ms)")

Process.exit(handler, :kill)
refs = MapSet.new(runs, & &1.ref)
drain = fn drain, refs ->
  if MapSet.size(refs) == 0, do: :ok, else: (receive do {:plugboard_done, r, _} -> drain.(drain, MapSet.delete(refs, r)) after 60_000 -> :left end)
end
:ok = drain.(drain, refs)

# ---- the 2 s loop under the system monitor
# The program test/scheduler_test.exs runs.
loop = Plugboard.compile!(other, Support.counter_loop_program())
i64 = fn v -> Plugboard.buffer!(other, <<v::signed-little-64>>, :i64, {}) end
seed = i64.(7)
run_loop = fn n -> Plugboard.run!(loop, [i64.(n), seed]) |> hd() |> Plugboard.to_binary!() end
calibration = 50_000_000
ns = Enum.min(for _ <- 1..2, do: elem(:timer.tc(fn -> run_loop.(calibration) end), 0)) * 1000 / calibration
n = max(round(2.0e9 / ns), calibration)

me = self()
previous = :erlang.system_monitor(me, [{:long_schedule, 5}])
worker =
  spawn(fn ->
    {us, _} = :timer.tc(fn -> run_loop.(n) end)
    send(me, {:ran, us})
    receive do: (:stop -> :ok)
  end)

us = receive do: ({:ran, us} -> us)
Process.sleep(100)
case previous do
  :undefined -> :erlang.system_monitor(:undefined)
  {pid, options} -> :erlang.system_monitor(pid, options)
end
send(worker, :stop)

collect = fn collect, acc ->
  receive do
    {:monitor, ^worker, :long_schedule, info} -> collect.(collect, [info[:timeout] | acc])
  after
    0 -> acc
  end
end

events = collect.(collect, [])
IO.puts("a #{Float.round(us / 1.0e6, 2)} s while loop (#{n} iterations): #{length(events)} long_schedule event(s) >= 5 ms " <>
          "in the process that ran it, max #{Enum.max(events, fn -> 0 end)} ms")
