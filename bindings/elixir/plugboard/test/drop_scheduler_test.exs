defmodule Plugboard.DropSchedulerTest do
  # What a process's garbage collection costs its normal scheduler when it lets go of many small
  # buffers, and what notify_when_dropped/3 costs with a large message. Resource destructors run
  # wherever the garbage collection runs: each buffer's destroy must be handed to plugboard's threads,
  # not done there. Measured by what the NIF itself spends: `Plugboard.native_objects/0`'s
  # destructor_us_on_schedulers (the destructors' own time on normal schedulers), so that load on the
  # machine and the VM's own work in the collection are not charged. Alone (async: false): it reads
  # a VM-wide figure, and it watches long schedules.
  use ExUnit.Case, async: false
  import Plugboard.TestSupport

  @count 50_000
  # What the destructors of @count f32[4] buffers may spend on the collecting scheduler, all together.
  @budget_us 20_000

  defp destructor_us, do: Plugboard.native_objects().destructor_us_on_schedulers

  # Makes @count f32[4] buffers in a process of its own, drops them, collects; returns the
  # destructors' time on schedulers during the collection and the collection's own time.
  defp drop_buffers(client) do
    me = self()

    spawn_link(fn ->
      data = f32s([1, 2, 3, 4])
      buffers = length(for _ <- 1..@count, do: Plugboard.buffer!(client, data, :f32, {4}))
      before = destructor_us()
      {us, true} = :timer.tc(fn -> :erlang.garbage_collect() end)
      send(me, {:collected, buffers, destructor_us() - before, us})
    end)

    receive do
      {:collected, @count, destructors_us, collection_us} -> {destructors_us, collection_us}
    after
      120_000 -> flunk("the buffers were not made and collected")
    end
  end

  test "a collection that drops many small buffers does not destroy them on its scheduler" do
    {:ok, client} = Plugboard.open(first_plugin())
    before = Plugboard.native_objects().buffer
    {destructors_us, collection_us} = drop_buffers(client)
    IO.puts("dropping #{@count} f32[4] buffers: destructors #{destructors_us} µs on the scheduler, the collection #{collection_us} µs")
    assert destructors_us <= @budget_us,
           "the destructors of #{@count} buffers spent #{destructors_us} µs on the collecting scheduler (budget #{@budget_us} µs)"
    # The buffers are still destroyed, on plugboard's threads, and awaited as teardowns.
    assert Plugboard.Native.await_teardowns(30_000) == :ok, "the buffers' teardowns did not finish in 30 s"
    assert Plugboard.native_objects().buffer <= before, "buffers left: #{inspect(Plugboard.native_objects())} (before: #{before})"
  end

  @message_elements 2_000_000

  test "notify_when_dropped/3 copies a large message off the scheduler" do
    {:ok, client} = Plugboard.open(first_plugin())
    me = self()

    # The worker makes the message and collects before it is watched, then makes the call.
    {worker, ref} =
      spawn_monitor(fn ->
        message = {:dropped, Enum.to_list(1..@message_elements)}
        :erlang.garbage_collect()
        send(me, {:ready, self()})
        receive do: (:go -> :ok)
        notified = Plugboard.notify_when_dropped(client, me, message)
        # Scheduled out (where the VM reports a long schedule) before it ends.
        Process.sleep(20)
        send(me, {:notified, notified})
      end)

    assert_receive {:ready, ^worker}, 60_000
    previous = :erlang.system_monitor(self(), [{:long_schedule, 10}])

    try do
      send(worker, :go)
      assert_receive {:notified, :ok}, 60_000
      assert_receive {:DOWN, ^ref, :process, ^worker, :normal}, 60_000
    after
      if previous, do: :erlang.system_monitor(previous), else: :erlang.system_monitor(:undefined)
    end

    held = for {:monitor, ^worker, :long_schedule, info} <- flush(), do: info[:timeout]
    assert held == [], "the call held the worker's scheduler: #{Enum.map_join(held, ", ", &"#{&1} ms")}"
  end

  defp flush do
    receive do
      m -> [m | flush()]
    after
      200 -> []
    end
  end
end
