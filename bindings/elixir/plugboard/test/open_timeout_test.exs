defmodule Plugboard.OpenTimeoutTest do
  # open/3 with timeout: against a plugin whose PJRT_Client_Create is slow (the fault plugin's
  # slow:MS): the caller gives up, and the client the plugin creates afterwards must neither reach
  # the caller's mailbox nor stay alive. Alone (async: false): it counts the VM's live clients.
  use ExUnit.Case, async: false
  import Plugboard.TestSupport

  defp live_clients, do: Plugboard.native_objects().client

  # The count to compare with: earlier tests' clients that are garbage (or still being torn down)
  # would otherwise go while this test waits, and hide a client that stayed.
  defp settled_count do
    for pid <- Process.list(), do: :erlang.garbage_collect(pid)
    :ok = Plugboard.Native.await_teardowns(30_000)
    live_clients()
  end

  defp settled(expected, tries \\ 50) do
    :erlang.garbage_collect()
    cond do
      live_clients() == expected -> true
      tries == 0 -> false
      true -> Process.sleep(100); settled(expected, tries - 1)
    end
  end

  test "a late client is let go of, and no reply reaches the caller" do
    plugin = fault_plugin("fault_well_formed")
    before = settled_count()
    assert {:error, %Plugboard.Error{code: :deadline_exceeded, message: message}} =
             Plugboard.open(plugin, [{"fault", "slow:400"}], timeout: 20)
    assert message =~ "within 20 ms"
    # The plugin creates the client 400 ms after the call: nothing may arrive then.
    refute_receive _, 1_500
    assert settled(before), "the late client is still alive: #{live_clients()} live clients, #{before} before"
  end

  test "a caller that dies during the open takes the opening process with it; the client is let go of" do
    plugin = fault_plugin("fault_well_formed")
    before_clients = settled_count()
    before_processes = MapSet.new(Process.list())
    me = self()
    caller = spawn(fn -> send(me, {:opened, Plugboard.open(plugin, [{"fault", "slow:1500"}], timeout: :infinity)}) end)
    Process.sleep(100)
    # The process the open waits in (a new one, running Plugboard.Clients' code; not the caller).
    started =
      for pid <- Process.list(), pid != caller, not MapSet.member?(before_processes, pid),
          match?({:current_function, {Plugboard.Clients, _, _}}, Process.info(pid, :current_function)),
          do: pid

    assert started != [], "no process opens the client"
    Process.exit(caller, :kill)
    Process.sleep(300)
    # The create still runs (1.5 s): nothing of the call may outlive its caller meanwhile.
    left = Enum.filter(started, &Process.alive?/1)
    assert left == [], "processes of the killed caller's open still alive: #{inspect(left)}"
    refute_received {:opened, _}
    assert settled(before_clients), "the late client is still alive: #{live_clients()} live clients, #{before_clients} before"
  end

  test "in time, the client is returned and nothing else arrives" do
    plugin = fault_plugin("fault_well_formed")
    assert {:ok, %Plugboard.Client{} = c} = Plugboard.open(plugin, [{"fault", "slow:50"}], timeout: 10_000)
    assert Plugboard.client_id(c) > 0
    refute_receive _, 200
  end
end
