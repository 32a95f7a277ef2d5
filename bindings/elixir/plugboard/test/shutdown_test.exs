defmodule Plugboard.ShutdownTest do
  # A VM that stops normally (System.stop/0: init:stop, then exit()) while a plugin object it dropped
  # is still being torn down on the NIF's threads: plugboard's application stop lets the teardown
  # finish before the VM exits. The fault plugin's slow_destroy:MS makes the race certain: its
  # PJRT_Client_Destroy takes MS ms and aborts when the plugin's own exit handler has run first (as
  # the 0.106 plugin aborted in ~ExecutionEngine at 2 of 24 stops before). Each VM is a separate OS
  # process running the test build's code.
  use ExUnit.Case, async: true
  import Plugboard.TestSupport

  @script """
  [plugin] = System.argv()
  {:ok, _} = Application.ensure_all_started(:plugboard)
  me = self()
  # The client dies with this process: its teardown (3 s in the plugin) starts on the NIF's threads.
  {pid, ref} = spawn_monitor(fn -> {:ok, _} = Plugboard.open(plugin, [{"fault", "slow_destroy:3000"}]); send(me, :opened) end)
  receive do: (:opened -> :ok)
  receive do: ({:DOWN, ^ref, _, ^pid, _} -> :ok)
  IO.puts("stopping")
  System.stop(0)
  Process.sleep(:infinity)
  """

  # The booted client (Plugboard.client/0, kept in :persistent_term): the application's stop must
  # let it go and wait for its teardown too; erasing the term only frees it once every process has
  # been scanned for the literal, after await_teardowns/1 has returned.
  @boot_script ~S"""
  {:ok, _} = Application.ensure_all_started(:plugboard)
  # Looked at in a process of its own, so that only the boot's term holds the client.
  {pid, ref} = spawn_monitor(fn -> {:ok, client} = Plugboard.client(); IO.puts("booted #{client.platform}") end)
  receive do: ({:DOWN, ^ref, _, ^pid, _} -> :ok)
  System.stop(0)
  Process.sleep(:infinity)
  """

  defp run_vm(script, args, env \\ []) do
    ebins = Path.wildcard(Path.join(Mix.Project.build_path(), "lib/*/ebin"))
    pa = Enum.flat_map(ebins, &["-pa", &1])
    System.cmd(System.find_executable("elixir"), pa ++ ["-e", script, "--" | args], stderr_to_stdout: true, env: env)
  end

  test "a client torn down as the VM stops finishes before exit" do
    {out, status} = run_vm(@script, [fault_plugin("fault_well_formed")])
    assert out =~ "stopping"
    refute out =~ "ran after the plugin's teardown"
    assert status == 0, "the VM exited #{status}:\n#{out}"
  end

  test "the booted client is torn down before exit" do
    plugin = fault_plugin("fault_well_formed")
    env = [{"PLUGBOARD_PLUGIN_PATH", plugin}, {"PLUGBOARD_TARGET", "fault_well_formed"}, {"PLUGBOARD_FAULT", "slow_destroy:3000"},
           {"PLUGBOARD_TARGETS", nil}, {"PLUGBOARD_PROBES", "0"}]
    {out, status} = run_vm(@boot_script, [], env)
    assert out =~ "booted fault", out
    refute out =~ "ran after the plugin's teardown"
    assert status == 0, "the VM exited #{status}:\n#{out}"
  end
end
