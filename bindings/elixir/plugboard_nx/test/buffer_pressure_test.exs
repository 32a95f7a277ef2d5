defmodule Plugboard.Nx.BufferPressureTest do
  # A loop that drops large outputs gets its device buffers back within Plugboard.Nx.BufferPressure's
  # budget (16 MiB), not whenever its heap happens to fill (alone: native objects are counted VM-wide).
  use ExUnit.Case, async: false
  import Plugboard.Nx.Case

  @side 256
  @steps 400
  @budget_outputs div(16 * 1024 * 1024, @side * @side * 4)

  for {label, plugin} <- cpu_plugins() do
    test "a training-like loop holds at most about a budget's worth of dropped 256 KiB outputs, on #{label}" do
      client = client(unquote(plugin))
      step = Nx.Defn.jit(&Nx.add(&1, 1), compiler: Plugboard.Nx, client: client)

      # In a process of its own, as a training loop runs: each step on the last step's output, with
      # some data of its own on its heap (a history of 200,000 numbers), which makes its collections
      # rarer: without the budget it held 227 outputs (57 MiB) at once.
      held =
        Task.async(fn ->
          history = Enum.to_list(1..200_000)
          x = Nx.broadcast(Nx.tensor(0.0), {@side, @side}) |> Nx.backend_transfer({Plugboard.Nx.Backend, client: client})
          :erlang.garbage_collect()
          base = Plugboard.native_objects().buffer

          {_, peak} =
            Enum.reduce(1..@steps, {x, 0}, fn _, {x, peak} ->
              y = step.(x)
              {y, max(peak, Plugboard.native_objects().buffer - base)}
            end)

          length(history) && peak
        end)
        |> Task.await(60_000)

      assert held <= @budget_outputs + 8, "#{held} buffers held at once (a budget is #{@budget_outputs} outputs)"
    end
  end
end
