# The dispatch guard's measurement and check, shared by the tests that read dispatch_budget.exs
# (plugboard's test/dispatch_budget_test.exs, plugboard_nx's test/dispatch_budget_test.exs).
#
# A call's cost is counted in BEAM reductions: what the calling process executes (each function
# call, BIF and NIF call counts), the same figure on a quiet machine and on a loaded one, so a
# guard on it does not depend on the machine's load. The figure depends on the Erlang/OTP and
# Elixir versions (and on Nx's for a jit), so each toolchain has its own line in the budget.
defmodule Plugboard.DispatchBudget do
  @moduledoc false
  import ExUnit.Assertions

  @file_path Path.expand("dispatch_budget.exs", __DIR__)

  @doc "The budget file: a literal map, read as data."
  def path, do: @file_path

  def read do
    {budget, _} = Code.eval_file(@file_path)
    budget
  end

  @doc "Reductions per call of `fun` (after a warm-up), less those of an empty loop's iteration."
  def reductions_per_call(fun, calls \\ 5_000) do
    per_call(fun, calls) - per_call(fn -> :ok end, calls)
  end

  defp per_call(fun, calls) do
    for _ <- 1..100, do: fun.()
    :erlang.garbage_collect()
    {:reductions, r0} = :erlang.process_info(self(), :reductions)
    loop(fun, calls)
    {:reductions, r1} = :erlang.process_info(self(), :reductions)
    (r1 - r0) / calls
  end

  defp loop(_fun, 0), do: :ok

  defp loop(fun, k) do
    fun.()
    loop(fun, k - 1)
  end

  @doc """
  The toolchain a figure holds for: `[otp: "25", elixir: "1.18", telemetry: true]` and `extra`
  (e.g. `nx: "0.13.1"`).
  """
  def toolchain(extra \\ []) do
    [otp: List.to_string(:erlang.system_info(:otp_release)), elixir: System.version() |> Version.parse!() |> then(&"#{&1.major}.#{&1.minor}"),
     telemetry: Plugboard.Telemetry.enabled?()] ++ extra
  end

  @doc """
  Checks `measured` (reductions per call of `what`, a key of the budget's `:paths`) against the
  figure recorded for `toolchain`: fails, naming the path, the figures and the file, when it is over
  by more than the budget's margin. PLUGBOARD_DISPATCH_RECORD=1 prints the line to record instead.
  A toolchain with no figure recorded is reported and not checked, unless
  PLUGBOARD_DISPATCH_STRICT=1.
  """
  def check!(what, toolchain, measured) do
    budget = read()
    line = "#{inspect(toolchain)} => #{Float.round(measured, 1)}"
    recorded = get_in(budget, [:paths, what, :figures]) |> Kernel.||([]) |> List.keyfind(toolchain, 0)

    cond do
      System.get_env("PLUGBOARD_DISPATCH_RECORD") == "1" ->
        IO.puts("dispatch budget, #{what}: {#{line}}")

      recorded == nil ->
        message = "no dispatch budget recorded for #{what} on #{inspect(toolchain)} in #{@file_path} (measured #{Float.round(measured, 1)} reductions a call); record it: #{budget.command}"
        if System.get_env("PLUGBOARD_DISPATCH_STRICT") == "1", do: flunk(message), else: IO.puts("warning: " <> message)

      true ->
        {_, figure} = recorded
        limit = figure * (1 + budget.margin)

        assert measured <= limit,
               "#{what}: #{Float.round(measured, 1)} reductions a call, over its budget of #{figure} + #{round(budget.margin * 100)}% " <>
                 "(#{Float.round(limit, 1)}) for #{inspect(toolchain)} in #{@file_path}. " <>
                 "#{get_in(budget, [:paths, what, :path])}: find the added work (:cprof counts its calls: see the file's header); " <>
                 "if the cost is meant, record the new figure: #{budget.command}"
    end

    measured
  end
end
