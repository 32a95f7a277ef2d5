defmodule Plugboard.TestSupport.SchedulerWatch do
  @moduledoc """
  What plugboard's NIFs hold of a normal scheduler, measured so that load on the machine cannot fake
  it (scheduler_test.exs, starvation_test.exs).

  Two sources, both only about plugboard's own calls:

    * each call of a timed function (every `Plugboard.Native` function by default) made by a traced
      process is timed from its call to its return (call tracing with monotonic timestamps), less
      the part it spent on a dirty scheduler: the process's schedule-outs and -ins inside the call
      (`running` tracing) show when a NIF moved to a dirty scheduler (`in` at the NIF itself) and
      back. What is left ran on the calling normal scheduler in stretches the VM could not preempt.
      The traced process's garbage collections are timed the same way (a resource's destructor runs
      in the collection that drops its last reference). Of the calls of one function (or the
      collections), those with a stretch of `limit_ms` or more count when they are at least half of
      them (a single call counts alone): `:held` events; fewer are `:stretched` (reported only);
    * `:erlang.system_monitor/2`'s `long_schedule` notices (to the process that started the watch)
      whose `in` or `out` is a timed function: `:nif` events.

  A process of the test that merely ran long (its scheduler thread descheduled by the OS on a busy
  machine while it ran Elixir code: 3–13 ms seen on a loaded VM) is reported as `:other` and not
  counted (`:worker` for a traced process, `:other` for the rest). The measure is wall time (the VM gives no thread CPU time): the OS also deschedules a
  thread inside a NIF call now and then (5–20 ms under the tests' artificial load, in a few calls
  of forty), which the half rule and the tests' reruns absorb, while a NIF that holds its
  scheduler holds it on every call.
  """

  @native [{Plugboard.Native, :_, :_}]

  defstruct [:tracer, :timed, :limit_ms, :previous_monitor]

  @doc "Starts watching; `timed` are `:erlang.trace_pattern/3` MFA patterns."
  def start(limit_ms, timed \\ @native) do
    flush_monitor()
    tracer = spawn(fn -> tracer_loop(%{}, []) end)
    for mfa <- timed, do: :erlang.trace_pattern(mfa, [{:_, [], [{:exception_trace}]}], [:local])
    previous = :erlang.system_monitor(self(), [{:long_schedule, limit_ms}])
    %__MODULE__{tracer: tracer, timed: timed, limit_ms: limit_ms, previous_monitor: previous}
  end

  @doc "Times `pid`'s calls; call it before `pid` runs what is watched (a worker waiting for :go)."
  def trace(%__MODULE__{tracer: tracer}, pid) do
    :erlang.trace(pid, true, [:call, :running, :garbage_collection, :monotonic_timestamp, {:tracer, tracer}])
  end

  @doc "Stops watching (`traced`: the pids given to trace/2) and returns every event: `%{kind, who, ms, in, out}`."
  def stop(%__MODULE__{} = watch, traced) do
    # Long-schedule notices are sent when the process is scheduled out: give the last ones time to
    # arrive before the monitor is switched off.
    Process.sleep(100)
    restore_monitor(watch.previous_monitor)
    for pid <- traced, Process.alive?(pid), do: :erlang.trace(pid, false, [:call, :running, :garbage_collection])
    for mfa <- watch.timed, do: :erlang.trace_pattern(mfa, false, [:local])
    # Every trace message is with the tracer before it is asked.
    ref = :erlang.trace_delivered(:all)

    receive do
      {:trace_delivered, :all, ^ref} -> :ok
    after
      10_000 -> :ok
    end

    send(watch.tracer, {:report, self()})

    calls =
      receive do
        {:calls, calls} -> calls
      after
        10_000 -> []
      end

    limit = System.convert_time_unit(watch.limit_ms, :millisecond, :native)

    # A call or collection that holds its scheduler does so every time; the OS deschedules a thread
    # now and then: of the calls of one function, those over the limit count when they are at least
    # half of them (one call of one: it counts), the others are :stretched (reported, not counted).
    held =
      calls
      |> Enum.group_by(fn {_, mfa, _} -> mfa end)
      |> Enum.flat_map(fn {_, group} ->
        over = Enum.filter(group, fn {_, _, longest} -> longest >= limit end)
        kind = if 2 * length(over) >= length(group), do: :held, else: :stretched
        for {pid, mfa, longest} <- over,
            do: %{kind: kind, who: pid, ms: System.convert_time_unit(longest, :native, :millisecond), in: mfa, out: mfa}
      end)

    monitored = for {who, info} <- collect_monitor([]), do: classify(who, info, watch.timed, traced)
    held ++ monitored
  end

  @doc "The events that count against plugboard."
  def counted(events), do: Enum.filter(events, &(&1.kind in [:nif, :held]))

  def describe([]), do: "none"

  def describe(events) do
    Enum.map_join(events, "\n", fn e -> "    #{e.kind} #{inspect(e.who)} #{e.ms} ms in=#{inspect(e.in)} out=#{inspect(e.out)}" end)
  end

  # A long schedule of a traced process outside the timed calls is :worker (what these tests used to
  # count, and what load alone produces); of any other process, :other. Neither counts.
  defp classify(who, info, timed, traced) do
    info = Map.new(info)

    kind =
      cond do
        timed?(info[:in], timed) or timed?(info[:out], timed) -> :nif
        who in traced -> :worker
        true -> :other
      end

    %{kind: kind, who: who, ms: info[:timeout], in: info[:in], out: info[:out]}
  end

  defp timed?({m, f, _}, timed), do: Enum.any?(timed, fn {tm, tf, _} -> tm == m and tf in [:_, f] end)
  defp timed?(_, _), do: false

  defp restore_monitor(:undefined), do: :erlang.system_monitor(:undefined)
  defp restore_monitor({pid, options}), do: :erlang.system_monitor(pid, options)

  defp flush_monitor do
    receive do
      {:monitor, _, :long_schedule, _} -> flush_monitor()
    after
      0 -> :ok
    end
  end

  defp collect_monitor(acc) do
    receive do
      {:monitor, who, :long_schedule, info} -> collect_monitor([{who, info} | acc])
    after
      0 -> Enum.reverse(acc)
    end
  end

  # Per traced process and kind (:call, :gc), what it is in: %{m, f, a, since, dirty, longest}
  # (since: the start of the stretch it is in now; dirty: that stretch is on a dirty scheduler).
  # Done: {pid, mfa, longest}, a garbage collection as {:garbage_collection, kind, 0}.
  defp tracer_loop(open, done) do
    receive do
      {:trace_ts, pid, :call, {m, f, args}, ts} ->
        tracer_loop(Map.put(open, {pid, :call}, %{m: m, f: f, a: length(args), since: ts, dirty: false, longest: 0}), done)

      {:trace_ts, pid, gc, _, ts} when gc in [:gc_minor_start, :gc_major_start] ->
        tracer_loop(Map.put(open, {pid, :gc}, %{m: :garbage_collection, f: gc, a: 0, since: ts, dirty: false, longest: 0}), done)

      {:trace_ts, pid, :out, _, ts} ->
        tracer_loop(update(open, pid, &close_stretch(&1, ts)), done)

      {:trace_ts, pid, :in, where, ts} ->
        # Back in at the NIF itself: it runs on a dirty scheduler now (a dirty NIF, or one that
        # rescheduled itself there); anywhere else (the dirty NIF finalizer): a normal one again.
        tracer_loop(update(open, pid, &%{&1 | since: ts, dirty: at_nif?(where, &1)}), done)

      {:trace_ts, pid, returned, _, _, ts} when returned in [:return_from, :exception_from] ->
        finish(open, {pid, :call}, ts, done)

      {:trace_ts, pid, gc, _, ts} when gc in [:gc_minor_end, :gc_major_end] ->
        finish(open, {pid, :gc}, ts, done)

      {:report, to} ->
        send(to, {:calls, Enum.reverse(done)})

      _ ->
        tracer_loop(open, done)
    end
  end

  defp update(open, pid, fun) do
    Enum.reduce([{pid, :call}, {pid, :gc}], open, fn key, acc -> if is_map_key(acc, key), do: Map.update!(acc, key, fun), else: acc end)
  end

  defp finish(open, {pid, _} = key, ts, done) do
    case Map.pop(open, key) do
      {nil, open} -> tracer_loop(open, done)
      {call, open} -> tracer_loop(open, [{pid, {call.m, call.f, call.a}, close_stretch(call, ts).longest} | done])
    end
  end

  defp close_stretch(%{dirty: true} = call, _ts), do: call
  defp close_stretch(call, ts), do: %{call | longest: max(call.longest, ts - call.since)}

  defp at_nif?({m, f, _}, %{m: m, f: f}), do: true
  defp at_nif?(_, _), do: false
end
