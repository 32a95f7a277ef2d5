defmodule Plugboard.TelemetryAbsentTest do
  # Without :telemetry (an optional dependency: a build without Hex, or an application that leaves
  # it out, has none) nothing is emitted, nothing fails, and the summary says so. With it (a build that has it), the
  # events' own tests are plugboard_nx's test/telemetry_test.exs; here only that it is switched on.
  use ExUnit.Case, async: true
  import Plugboard.TestSupport
  alias Plugboard.Telemetry.Summary

  test "boot, compile, runs and host callbacks (returning, raising) work whether :telemetry is there or not" do
    assert {:error, _, _} = Plugboard.boot(target: "absent_nowhere", use_environment: false)
    {:ok, c} = Plugboard.open(first_plugin())
    exe = Plugboard.compile!(c, callback_program(), callbacks: ["plugboard.print", "host_scale"])
    x = Plugboard.buffer!(c, f32s(Enum.to_list(1..8)), :f32, {2, 4})
    print = fn _ -> :ok end
    [out] = Plugboard.run!(exe, [x], callbacks: %{"host_scale" => fn [t] -> t end}, ordered: %{"plugboard.print" => print})
    assert to_f32s(Plugboard.to_binary!(out)) == Enum.map(1..8, &(&1 * 2.0))
    raising = fn [_] -> raise "host_scale refuses" end
    assert {:error, %Plugboard.Error{message: m}} = Plugboard.run(exe, [x], callbacks: %{"host_scale" => raising}, ordered: %{"plugboard.print" => print})
    assert m =~ "host_scale refuses"
    {:ok, run} = Plugboard.run_async(exe, [x], callbacks: %{"host_scale" => fn [t] -> t end}, ordered: %{"plugboard.print" => print})
    assert {:ok, [_]} = Plugboard.await(run)

    snapshot = Summary.snapshot()

    # scripts/test_elixir.sh says which build this is (a test pass without Hex has no :telemetry),
    # so that each branch below is known to have run.
    case System.get_env("PLUGBOARD_EXPECT_TELEMETRY") do
      "1" -> assert Code.ensure_loaded?(:telemetry), "this pass was built with :telemetry"
      "0" -> refute Code.ensure_loaded?(:telemetry), "this pass was built without :telemetry"
      _ -> :ok
    end

    if Code.ensure_loaded?(:telemetry) do
      assert Plugboard.Telemetry.enabled?()
      assert %{telemetry: true, runs: %{count: n}} = snapshot
      assert n >= 3
    else
      refute Plugboard.Telemetry.enabled?()
      # What it can read without events: the boot's report.
      boot = Plugboard.report() && Map.take(Plugboard.report(), [:chosen, :policy])
      assert %{node: node(), telemetry: false, boot: boot && %{target: boot.chosen, policy: boot.policy}} ==
               snapshot |> Map.delete(:runs) |> Map.update!(:boot, &(&1 && Map.take(&1, [:target, :policy])))
      # Runs are the NIF's counts, there without :telemetry too.
      assert %{runs: %{count: n}} = snapshot
      assert n >= 3
    end
  end
end
