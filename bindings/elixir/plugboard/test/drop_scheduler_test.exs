defmodule Plugboard.DropSchedulerTest do
  # What a process's garbage collection does on its normal scheduler when it lets go of buffers, and
  # where notify_when_dropped/3 copies its message. Resource destructors run wherever the garbage
  # collection runs: a collection may destroy a burst's first few buffers there (their memory comes
  # back during the collection), never thousands. Counted by the NIF itself
  # (`Plugboard.native_objects/0`: buffer_destroys_on_schedulers, message_copies_on_schedulers,
  # counts of what ran on a normal scheduler thread), so load on the machine changes nothing. Alone
  # (async: false): the counts are the VM's.
  use ExUnit.Case, async: false
  import Plugboard.TestSupport

  @count 50_000
  # A burst destroys at most 512 on its scheduler (kBurstInline, resources.cpp; within 250 us) and
  # ends when the scheduler has run other work; the VM runs the destructors of one collection as aux
  # work, which may be split among rounds with other work between: a few bursts, never tens of
  # thousands.
  @bound 8 * 512

  defp count(key), do: Map.fetch!(Plugboard.native_objects(), key)

  # Makes `n` f32[4] buffers in a process of its own, drops them and collects; once every one is
  # destroyed, returns how many were destroyed on normal schedulers. (The VM runs a resource's
  # destructor as aux work of the scheduler that collected it, after the collection: OTP's
  # erl_nif.c, nif_resource_dtor_prologue; so the test waits for them all.)
  defp drop_buffers(client, n) do
    me = self()
    live_before = count(:buffer)

    spawn_link(fn ->
      data = f32s([1, 2, 3, 4])
      made = length(for _ <- 1..n, do: Plugboard.buffer!(client, data, :f32, {4}))
      # The collection is a burst of its own: what the thread dropped before is over (kIdle).
      Process.sleep(150)
      send(me, {:collecting, made, count(:buffer_destroys_on_schedulers)})
      true = :erlang.garbage_collect()
    end)

    receive do
      {:collecting, ^n, before} ->
        assert Plugboard.Native.await_teardowns(30_000) == :ok, "the buffers' teardowns did not finish in 30 s"
        assert destroyed(live_before), "buffers left: #{inspect(Plugboard.native_objects())} (before: #{live_before})"
        assert Plugboard.Native.await_teardowns(30_000) == :ok, "the buffers' teardowns did not finish in 30 s"
        count(:buffer_destroys_on_schedulers) - before
    after
      120_000 -> flunk("the buffers were not made")
    end
  end

  defp destroyed(live, tries \\ 300) do
    cond do
      count(:buffer) <= live -> true
      tries == 0 -> false
      true -> Process.sleep(10); destroyed(live, tries - 1)
    end
  end

  test "a collection that drops many small buffers destroys at most a few bursts' worth on its scheduler" do
    {:ok, client} = Plugboard.open(first_plugin())
    destroys = drop_buffers(client, @count)
    assert destroys <= @bound,
           "#{destroys} of #{@count} dropped buffers were destroyed on a normal scheduler (at most #{@bound})"
  end

  test "a collection that drops a few buffers destroys them on its scheduler, not behind a queue" do
    {:ok, client} = Plugboard.open(first_plugin())
    # What Plugboard.Nx's BufferPressure relies on: a step's dropped outputs give their memory back
    # at the scheduler's next aux work after the collection, not after whatever a drain thread has
    # queued (another process's burst of thousands).
    # The first drop of a fresh burst is always destroyed here; the next ones while the burst's time
    # budget (250 us) lasts: all 8 on a quiet machine, fewer where a destroy is slow (ASan, a loaded
    # machine). Queued all (the code before): 0.
    destroys = drop_buffers(client, 8)
    assert destroys >= 1, "none of 8 dropped buffers was destroyed on its scheduler: all went to the drain queue"
    IO.puts("[drop] 8 dropped buffers: #{destroys} destroyed on the collecting scheduler")
  end

  # How many destroys fit the burst's 250 us: under ASan a destroy is several times slower and the
  # count falls under 64 whatever the burst (ASan ExUnit: at best 40), so that pass leaves it out.
  @tag :sanitizer_speed
  test "a collection that drops a tight loop's outputs (a few hundred) destroys more than 64 on its scheduler" do
    {:ok, client} = Plugboard.open(first_plugin())
    # A loop of small runs (Plugboard.run! of x + 1, f32[4]) drops a few hundred outputs a collection.
    # With a burst of 64 (the code before), the rest went to the drain thread, whose destroys ran
    # beside the loop's next executions: run! took 1.4-2.3x as long (the dispatch regression of issue
    # 36). A preemption counts in the burst's time budget (a loaded machine), so the best of three.
    best = Enum.max(for _ <- 1..3, do: drop_buffers(client, 400))
    IO.puts("[drop] 400 dropped buffers: at best #{best} destroyed on the collecting scheduler")
    assert best > 64, "at most #{best} of 400 dropped buffers were destroyed on their scheduler (a burst of 64: the rest to the drain thread)"
  end

  test "notify_when_dropped/3 copies its message off the normal schedulers" do
    {:ok, client} = Plugboard.open(first_plugin())
    before = count(:message_copies_on_schedulers)
    assert Plugboard.notify_when_dropped(client, self(), {:dropped, Enum.to_list(1..1_000)}) == :ok
    assert count(:message_copies_on_schedulers) == before, "the message was copied on a normal scheduler"
  end
end
