Code.require_file("../../dispatch_budget_check.exs", __DIR__)

defmodule Plugboard.DispatchBudgetTest do
  # The per-run cost of Plugboard.run!/2 of a small program, in reductions of the calling process
  # (a count, not a time: the same on a loaded machine), against the figure recorded in
  # bindings/elixir/dispatch_budget.exs for this toolchain, with telemetry as the application
  # starts it (on with the summary where :telemetry is loaded). A run that does more work per call
  # (an event, a lookup, an option check) fails here, naming the path and the figures.
  use ExUnit.Case, async: false
  import Plugboard.TestSupport
  alias Plugboard.DispatchBudget

  test "Plugboard.run! of x + 1 stays within its recorded reductions a call" do
    for {label, path} <- cpu_plugins() do
      {:ok, c} = Plugboard.open(path)
      t = tensor(:f32, [4])

      exe =
        Plugboard.compile!(c, """
        func.func public @main(%x: #{t}) -> #{t} {
          %one = stablehlo.constant dense<1.0> : #{t}
          %0 = stablehlo.add %x, %one : #{t}
          return %0 : #{t}
        }
        """)

      # The path measured: launched and finished inside the call, no options.
      assert exe.launch == :inline
      x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4})
      measured = DispatchBudget.reductions_per_call(fn -> Plugboard.run!(exe, [x]) end)
      DispatchBudget.check!(:run, DispatchBudget.toolchain(), measured)
      IO.puts("#{label}: Plugboard.run! #{Float.round(measured, 1)} reductions a call")
    end
  end
end
