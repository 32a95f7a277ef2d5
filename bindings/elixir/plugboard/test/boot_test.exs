defmodule Plugboard.BootTest do
  # Restarts the :plugboard application with other configuration: not async.
  use ExUnit.Case, async: false
  import Plugboard.TestSupport
  import ExUnit.CaptureLog
  alias Plugboard.{Error, Report}

  setup_all do
    dir = Path.join(System.tmp_dir!(), "plugboard-boot-test-#{System.unique_integer([:positive])}")
    bundle = make_bundle(dir, cpu: first_plugin(), broken: fault_plugin("fault_init_error"))
    on_exit(fn -> File.rm_rf!(dir) end)
    %{bundle: bundle}
  end

  setup do
    on_exit(fn ->
      for key <- [:bundle, :target, :targets], do: Application.delete_env(:plugboard, key)
      restart()
    end)
  end

  defp restart do
    Application.stop(:plugboard)
    Application.ensure_all_started(:plugboard)
  end

  test "an explicit target boots, with a report of every candidate", %{bundle: bundle} do
    assert {:ok, client, %Report{chosen: "cpu"} = report} = Plugboard.boot(bundle: bundle, target: "cpu", use_environment: false)
    assert client.platform == "cpu"
    cpu = Report.candidate(report, "cpu")
    assert cpu.verdict == :chosen
    assert Enum.map(cpu.stages, & &1.stage) == [:found, :verified, :probed, :dependencies, :loaded, :initialized, :client, :devices, :chosen]
    assert Enum.all?(cpu.stages, &(&1.passed and is_float(&1.ms)))
    assert Report.candidate(report, "broken").verdict == :excluded
    assert report.text =~ "cpu"
  end

  test "a preference falls back and says why", %{bundle: bundle} do
    assert {:ok, _, report} = Plugboard.boot(bundle: bundle, targets: ["broken", "cpu"], use_environment: false)
    assert report.chosen == "cpu"
    broken = Report.candidate(report, "broken")
    assert broken.verdict == :failed
    assert broken.failed_stage == :initialized
    assert %Error{} = broken.error
    assert [line] = Report.skipped(report)
    assert line =~ "broken" and line =~ "failed at initialized"
  end

  test "an explicit target that cannot start is an error with the report", %{bundle: bundle} do
    assert {:error, %Error{}, %Report{chosen: nil} = report} =
             Plugboard.boot(bundle: bundle, target: "broken", use_environment: false)
    assert Report.candidate(report, "broken").verdict == :failed
  end

  test "a target the bundle does not hold lists the ones it does", %{bundle: bundle} do
    assert {:error, %Error{message: m}, _} = Plugboard.boot(bundle: bundle, target: "nosuch", use_environment: false)
    assert m =~ "nosuch" and m =~ "cpu" and m =~ "broken"
  end

  test "malformed settings are named" do
    assert {:error, %Error{code: :invalid_argument, message: m}, nil} = Plugboard.boot(targt: "cpu")
    assert m =~ ":targt"
    assert {:error, %Error{}, nil} = Plugboard.boot(bundle: "/nonexistent/bundle", use_environment: false)
  end

  test "discover judges candidates without loading them", %{bundle: bundle} do
    assert {:ok, %Report{chosen: nil} = report} = Plugboard.discover(bundle: bundle, use_environment: false)
    assert Enum.all?(report.candidates, &(&1.verdict in [:usable, :failed]))
    refute Enum.any?(report.candidates, fn c -> Enum.any?(c.stages, &(&1.stage == :loaded)) end)
  end

  test "the application boots from its configuration", %{bundle: bundle} do
    Application.put_env(:plugboard, :bundle, bundle)
    Application.put_env(:plugboard, :targets, ["broken", "cpu"])

    log = capture_log(fn -> assert {:ok, _} = restart() end)
    assert {:ok, %Plugboard.Client{platform: "cpu"}} = Plugboard.client()
    assert %Report{chosen: "cpu"} = Plugboard.report()
    assert log =~ "plugboard: skipped broken"
    assert log =~ "target cpu chosen"
  end

  test "the application does not start when its explicit target cannot", %{bundle: bundle} do
    Application.put_env(:plugboard, :bundle, bundle)
    Application.put_env(:plugboard, :target, "broken")
    log = capture_log(fn -> assert {:error, {:plugboard, _}} = restart() end)
    assert log =~ "no target started"
    assert log =~ "broken"
  end

  test "without configuration the application starts with no target" do
    assert {:ok, _} = restart()
    assert {:error, %Error{code: :not_found}} = Plugboard.client()
    assert Plugboard.report() == nil
  end
end
