# Memory of a training loop with and without buffer donation (issue 35, item 3): an MLP's SGD step
# (784 -> 512 -> 512 -> 10, f32: 2.5 MiB of parameters) jitted by Plugboard.Nx, its parameters fed
# back STEPS times, either marked Nx.donatable/1 each step (the step writes the new parameters into
# the old ones' memory) or not (each step's parameters are new memory; the old ones go when the
# garbage collector drops their terms). On a CPU plugin the device's memory is the process's, so the
# figure is the OS's: resident set (VmRSS) sampled every 100 steps and its peak over the loop
# (VmHWM, reset before the loop where the kernel lets us), plus the plugboard buffers alive at the end.
# Each mode runs in its own VM (the script takes one mode); needs an Nx with Nx.donatable/1.
#
#   mix run bench/donation_memory.exs donate|plain [STEPS] [PLUGIN]
defmodule DonationMemory do
  import Nx.Defn

  defn predict(p, x) do
    h1 = Nx.tanh(Nx.dot(x, p.w1) + p.b1)
    h2 = Nx.tanh(Nx.dot(h1, p.w2) + p.b2)
    Nx.dot(h2, p.w3) + p.b3
  end

  defn step(p, x, y) do
    {loss, g} = value_and_grad(p, fn p -> Nx.mean((predict(p, x) - y) ** 2) end)
    {%{w1: p.w1 - 0.01 * g.w1, b1: p.b1 - 0.01 * g.b1, w2: p.w2 - 0.01 * g.w2, b2: p.b2 - 0.01 * g.b2,
       w3: p.w3 - 0.01 * g.w3, b3: p.b3 - 0.01 * g.b3}, loss}
  end

  def kib(field) do
    "/proc/self/status" |> File.read!() |> String.split("\n") |> Enum.find(&String.starts_with?(&1, field <> ":"))
    |> String.split() |> Enum.at(1) |> String.to_integer()
  end

  def main([mode | rest]) when mode in ["donate", "plain"] do
    steps = rest |> Enum.at(0, "1000") |> String.to_integer()
    plugin = Enum.at(rest, 1) || Path.join([System.user_home!(), ".cache/plugboard/deps/files/xla_cpu_115/pjrt_c_api_cpu_plugin.so"])
    unless Code.ensure_loaded?(Nx) and function_exported?(Nx, :donatable, 1), do: raise("this Nx has no Nx.donatable/1")
    {:ok, c} = Plugboard.open(plugin)
    jit = Nx.Defn.jit(&step/3, compiler: Plugboard.Nx, client: c)
    on = fn t -> Nx.Defn.jit_apply(&Nx.add(&1, 0), [t], compiler: Plugboard.Nx, client: c) end
    w = fn shape, k -> Nx.iota(shape, type: :f32) |> Nx.multiply(k) |> Nx.sin() |> Nx.multiply(0.05) |> then(on) end
    p = %{w1: w.({784, 512}, 0.37), b1: w.({512}, 0.11), w2: w.({512, 512}, 0.23), b2: w.({512}, 0.71), w3: w.({512, 10}, 0.13), b3: w.({10}, 0.3)}
    x = w.({32, 784}, 0.53)
    y = w.({32, 10}, 0.29)
    mark = if mode == "donate", do: &Nx.donatable/1, else: & &1
    # Warm: compile, first allocations.
    {p, _} = Enum.reduce(1..5, {p, nil}, fn _, {p, _} -> jit.(mark.(p), x, y) end)
    :erlang.garbage_collect()
    File.write("/proc/self/clear_refs", "5")
    start = kib("VmRSS")
    t0 = System.monotonic_time(:millisecond)

    {p, loss, samples} =
      Enum.reduce(1..steps, {p, nil, []}, fn i, {p, _, samples} ->
        {p, loss} = jit.(mark.(p), x, y)
        samples = if rem(i, 100) == 0, do: [kib("VmRSS") | samples], else: samples
        {p, loss, samples}
      end)

    ms = System.monotonic_time(:millisecond) - t0
    samples = Enum.reverse(samples)
    IO.puts(
      "#{mode}: #{steps} steps in #{ms} ms, loss #{Float.round(Nx.to_number(loss), 6)}; RSS at start #{start} KiB, " <>
        "every 100 steps #{inspect(samples)} KiB, min #{Enum.min(samples)} max #{Enum.max(samples)} KiB, " <>
        "peak over the loop (VmHWM) #{kib("VmHWM")} KiB; plugboard resources alive #{inspect(Plugboard.Native.resource_counts())}"
    )

    p
  end
end

DonationMemory.main(System.argv())
