defmodule Plugboard.TelemetryRunsTest do
  # Runs in flight as Plugboard.Telemetry.Summary counts them (what Plugboard.cluster_report/1 shows),
  # and what a run leaves behind in the process that started it. Needs :telemetry (the Elixir 1.18
  # pass, PLUGBOARD_EXPECT_TELEMETRY=1; telemetry_absent_test checks that pass has it). Not async:
  # in_flight counts every run on the node.
  use ExUnit.Case, async: false
  import Plugboard.TestSupport
  alias Plugboard.Telemetry.Summary

  unless Code.ensure_loaded?(:telemetry), do: @moduletag(skip: "needs :telemetry (the Elixir 1.18 pass)")

  setup do
    assert Plugboard.Telemetry.enabled?()
    {:ok, c} = Plugboard.open(first_plugin())
    small = Plugboard.compile!(c, add_program())
    # Results over 64 KiB: launched on a thread, its outcome arrives later as a message.
    large = Plugboard.compile!(c, add_program(:f32, [32_768]))
    assert {small.launch, large.launch} == {:inline, :thread}
    x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4})
    big = Plugboard.buffer!(c, :binary.copy(<<0::32>>, 32_768), :f32, {32_768})
    %{small: small, large: large, x: x, big: big}
  end

  defp in_flight, do: Summary.snapshot().runs.in_flight

  # A process that starts `n` runs and never awaits them, then waits to be killed.
  defp abandon(exe, args, n) do
    test = self()

    pid =
      spawn(fn ->
        for _ <- 1..n, do: {:ok, _} = Plugboard.run_async(exe, args)
        send(test, {:started, self()})
        Process.sleep(:infinity)
      end)

    assert_receive {:started, ^pid}, 30_000
    pid
  end

  test "a run whose caller was killed is no longer in flight", %{large: large, big: big} do
    before = in_flight()
    caller = abandon(large, [big, big], 3)
    assert in_flight() == before + 3
    ref = Process.monitor(caller)
    Process.exit(caller, :kill)
    assert_receive {:DOWN, ^ref, :process, ^caller, :killed}
    assert eventually(fn -> in_flight() == before end), "in_flight stayed at #{in_flight()} (#{before} before)"
  end

  test "a run launched while the summary is not registered leaves no row behind", %{large: large, big: big} do
    before = in_flight()
    summary = Process.whereis(Summary)
    # The summary between two lives: its table is there, its name is not (a restart's window).
    true = Process.unregister(Summary)

    try do
      caller = abandon(large, [big, big], 1)
      ref = Process.monitor(caller)
      Process.exit(caller, :kill)
      assert_receive {:DOWN, ^ref, :process, ^caller, :killed}
      assert :ets.lookup(Summary, caller) == [], "the caller's row stayed: #{inspect(:ets.lookup(Summary, caller))}"
    after
      Process.register(summary, Summary)
    end

    assert in_flight() == before
  end

  test "an awaited run is in flight until its await, once", %{large: large, big: big} do
    before = in_flight()
    {:ok, run} = Plugboard.run_async(large, [big, big])
    assert in_flight() == before + 1
    assert {:ok, [_]} = Plugboard.await(run)
    assert in_flight() == before
    # A second await of the same run takes nothing more off.
    assert {:error, %Plugboard.Error{code: :deadline_exceeded}} = Plugboard.await(run, 50)
    assert in_flight() == before
  end

  test "10,000 runs never awaited leave nothing behind in their process", %{small: small, x: x} do
    test = self()

    spawn_link(fn ->
      dictionary = length(Process.get())
      before = in_flight()
      for _ <- 1..10_000, do: {:ok, _} = Plugboard.run_async(small, [x, x])
      :erlang.garbage_collect()
      send(test, {:after, dictionary, length(Process.get()), before, in_flight()})
    end)

    assert_receive {:after, dictionary, dictionary_after, before, in_flight_after}, 60_000
    assert dictionary_after <= dictionary, "the process dictionary grew from #{dictionary} to #{dictionary_after} entries"
    # Finished inside the call: never in flight, awaited or not.
    assert in_flight_after == before
  end

  test "runs launched on a thread and never awaited keep one row per process, gone with it", %{large: large, big: big} do
    rows = fn -> :ets.select_count(Summary, [{{:"$1", :_}, [{:is_pid, :"$1"}], [true]}]) end
    before = {rows.(), in_flight()}
    callers = for _ <- 1..4, do: abandon(large, [big, big], 50)
    assert {rows.(), in_flight()} == {elem(before, 0) + 4, elem(before, 1) + 200}
    for pid <- callers, do: Process.exit(pid, :kill)
    assert eventually(fn -> {rows.(), in_flight()} == before end)
  end
end
