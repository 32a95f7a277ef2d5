defmodule Plugboard.BootLogTest do
  # What the application's boot writes to the log, from a PLUGBOARD_TARGET an operator (or anything
  # that sets the environment) chose: control characters spelled out, one value per line. Restarts
  # the :plugboard application and sets the environment: not async.
  use ExUnit.Case, async: false
  import Plugboard.TestSupport
  import ExUnit.CaptureLog
  alias Plugboard.Report

  setup_all do
    dir = Path.join(System.tmp_dir!(), "plugboard-boot-log-test-#{System.unique_integer([:positive])}")
    bundle = make_bundle(dir, cpu: first_plugin())
    on_exit(fn -> File.rm_rf!(dir) end)
    %{bundle: bundle}
  end

  setup do
    on_exit(fn ->
      System.delete_env("PLUGBOARD_TARGET")
      Application.delete_env(:plugboard, :bundle)
      Application.stop(:plugboard)
      Application.ensure_all_started(:plugboard)
    end)
  end

  defp boot_log(bundle, target) do
    Application.put_env(:plugboard, :bundle, bundle)
    System.put_env("PLUGBOARD_TARGET", target)

    capture_log(fn ->
      Application.stop(:plugboard)
      assert {:error, _} = Application.ensure_all_started(:plugboard)
    end)
  end

  test "an escape sequence in PLUGBOARD_TARGET reaches the log spelled out", %{bundle: bundle} do
    log = boot_log(bundle, "\e[2J")
    assert log =~ "no target started (PLUGBOARD_TARGET=\\e[2J)"
    refute log =~ "\e[2J", "the log holds the raw escape sequence: #{inspect(log)}"
  end

  test "a newline in PLUGBOARD_TARGET cannot start a forged log line", %{bundle: bundle} do
    log = boot_log(bundle, "x\n[error] forged")
    assert log =~ "PLUGBOARD_TARGET=x\\n[error] forged"
    lines = String.split(log, "\n")
    refute Enum.any?(lines, &String.starts_with?(String.trim_leading(&1), "[error] forged")), "a forged line: #{inspect(log)}"
  end

  test "the boot's error names the target spelled out, in its message as in its report", %{bundle: bundle} do
    for target <- ["\e[2J", "x\n[error] forged"] do
      assert {:error, %Plugboard.Error{message: m}, report} = Plugboard.boot(bundle: bundle, target: target, use_environment: false)
      assert m =~ Report.terminal_safe(target)
      refute m =~ target, "the error's message holds #{inspect(target)} raw: #{inspect(m)}"
      refute report.text =~ target
    end
  end

  test "terminal_safe spells out what a terminal would obey, as the C++ reports do" do
    assert Report.terminal_safe("\e[2J") == "\\e[2J"
    assert Report.terminal_safe("a\nb\tc\rd") == "a\\nb\\tc\\rd"
    assert Report.terminal_safe(<<0, 7, 0x7F>>) == "\\x00\\x07\\x7f"
    # A C1 control (CSI, U+009B) and a byte that is not UTF-8.
    assert Report.terminal_safe(<<0x9B::utf8, "x", 0xFF>>) == "\\u009bx\\xff"
    # Printable UTF-8 passes unchanged.
    assert Report.terminal_safe("cpu – ü ✓") == "cpu – ü ✓"
    assert Report.terminal_safe(:cpu) == "cpu"
  end
end
