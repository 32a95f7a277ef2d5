Code.require_file("../../dispatch_budget_check.exs", __DIR__)

defmodule Plugboard.Nx.DispatchBudgetTest do
  # The per-call cost of a cached Nx.Defn.jit of x + 1 (its argument on the device), in reductions
  # of the calling process (a count, not a time: the same on a loaded machine), against the figure
  # recorded in bindings/elixir/dispatch_budget.exs for this toolchain and Nx, with telemetry as the
  # application starts it. Work added to every jit call (an option check, an event, a lookup) fails
  # here, naming the path and the figures.
  use ExUnit.Case, async: false
  alias Plugboard.DispatchBudget

  # Nx from Hex, or from sources (PLUGBOARD_NX_PATH: Nx's main branch, whose mix.exs says the same
  # version as the release before it, and whose jit path costs more).
  defp nx_source, do: if(System.get_env("PLUGBOARD_NX_PATH"), do: "path", else: "hex")

  test "a cached jit of x + 1 stays within its recorded reductions a call" do
    for {label, path} <- Plugboard.Nx.Case.cpu_plugins() do
      client = Plugboard.Nx.Case.client(path)
      tiny = Nx.Defn.jit(fn x -> Nx.add(x, 1) end, compiler: Plugboard.Nx, client: client)
      on_device = tiny.(Nx.tensor([1.0, 2.0, 3.0, 4.0]))
      assert %Plugboard.Nx.Backend{} = on_device.data
      measured = DispatchBudget.reductions_per_call(fn -> tiny.(on_device) end)
      DispatchBudget.check!(:jit, DispatchBudget.toolchain(nx: to_string(Application.spec(:nx, :vsn)), nx_source: nx_source()), measured)
      IO.puts("#{label}: cached jit #{Float.round(measured, 1)} reductions a call")
    end
  end
end
