defmodule Plugboard.TelemetryRunsTest do
  # Runs as Plugboard.Telemetry.Summary counts them (what Plugboard.cluster_report/1 shows): the NIF
  # counts each run where its outcome is known (c_src/run_counts.h), with or without :telemetry, and
  # what a run leaves behind in the process that started it. Not async: the counts are the node's.
  use ExUnit.Case, async: false
  import Plugboard.TestSupport
  alias Plugboard.Telemetry.Summary

  setup do
    # Counts are the node's: wait until no execution of an earlier (async) test is in flight, so that
    # none finishes in the middle of a count here (nothing else starts runs while this sync module runs).
    assert eventually(fn -> runs().in_flight == 0 end, 600), "executions in flight before the test: #{inspect(runs())}"
    {:ok, c} = Plugboard.open(first_plugin())
    small = Plugboard.compile!(c, add_program())
    # Results over 64 KiB: launched on a thread, its outcome arrives later as a message.
    large = Plugboard.compile!(c, add_program(:f32, [32_768]))
    assert {small.launch, large.launch} == {:inline, :thread}
    x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4})
    big = Plugboard.buffer!(c, :binary.copy(<<0::32>>, 32_768), :f32, {32_768})
    %{small: small, large: large, x: x, big: big}
  end

  defp runs, do: Summary.snapshot().runs

  # The counts settle once every execution started here has come to an outcome.
  defp settled(before, finished) do
    eventually(fn ->
      now = runs()
      now.in_flight == 0 and now.count - before.count >= finished
    end)
  end

  test "a run counts once it comes to an outcome, inline or on a thread, awaited or not", %{small: small, large: large, x: x, big: big} do
    before = runs()
    assert {:ok, [_]} = Plugboard.run(small, [x, x])
    assert {:ok, [_]} = Plugboard.run(large, [big, big])
    {:ok, _never_awaited} = Plugboard.run_async(large, [big, big])
    assert settled(before, 3), "runs #{inspect(runs())}, #{inspect(before)} before"
    now = runs()
    assert now.count - before.count == 3 and now.errors == before.errors
    assert now.total_ms > before.total_ms and now.last_ms > 0
  end

  test "a run refused at the call counts as an error, once", %{small: small, x: x} do
    before = runs()
    assert {:error, %Plugboard.Error{}} = Plugboard.run(small, [x])
    now = runs()
    assert {now.count - before.count, now.errors - before.errors} == {1, 1}
  end

  test "a run refused on its launch thread counts as an error, once", %{large: large, big: big} do
    before = runs()
    # One argument short: started on a thread (the answer is {:started, ...}), refused there.
    assert {:error, %Plugboard.Error{}} = Plugboard.run(large, [big])
    assert settled(before, 1)
    now = runs()
    assert {now.count - before.count, now.errors - before.errors} == {1, 1}
  end

  test "runs in flight: started on a thread and not complete, whether or not their caller lives", %{large: large, big: big} do
    before = runs()
    test = self()

    caller =
      spawn(fn ->
        for _ <- 1..50, do: {:ok, _} = Plugboard.run_async(large, [big, big])
        send(test, {:started, runs().in_flight})
        Process.sleep(:infinity)
      end)

    assert_receive {:started, in_flight}, 30_000
    assert in_flight <= 50
    Process.exit(caller, :kill)
    assert settled(before, 50), "in_flight stayed at #{runs().in_flight}"
    now = runs()
    assert {now.count - before.count, now.errors - before.errors} == {50, 0}
  end

  test "10,000 runs never awaited leave nothing behind in their process", %{small: small, x: x} do
    test = self()

    spawn_link(fn ->
      dictionary = length(Process.get())
      before = runs()
      for _ <- 1..10_000, do: {:ok, _} = Plugboard.run_async(small, [x, x])
      :erlang.garbage_collect()
      send(test, {:after, dictionary, length(Process.get()), before, runs()})
    end)

    assert_receive {:after, dictionary, dictionary_after, before, now}, 60_000
    assert dictionary_after <= dictionary, "the process dictionary grew from #{dictionary} to #{dictionary_after} entries"
    assert settled(before, 10_000)
    assert runs().count - before.count == 10_000
    assert now.count - before.count <= 10_000
  end
end
