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
      collections), those with a stretch of `limit_ms` or more count when their share of the calls
      is at least 1 in 10 above the control's share in the same run (`:held` events; a single call
      over the limit counts alone), else they are `:stretched` (reported only). The control is
      `control/1`, a pure-Elixir identity function timed the same way, that a workload may call
      next to its plugboard calls: the share of its calls stretched past the limit is what the OS
      (and the wake-ups of tracing itself) does to any call in that run (none called: 0);
    * `:erlang.system_monitor/2`'s `long_schedule` notices (to the process that started the watch)
      whose `in` or `out` is a timed function: `:nif` events.

  A process of the test that merely ran long (its scheduler thread descheduled by the OS on a busy
  machine while it ran Elixir code: 3–13 ms seen on a loaded VM) is reported as `:other` and not
  counted (`:worker` for a traced process, `:other` for the rest). The measure is wall time (the
  VM gives no thread CPU time): the OS also deschedules a thread inside a short call now and then
  (5–25 ms under the tests' artificial load, in 1 call in 10 to 1 in 6 of a plain erlang:make_tuple(8, 0)
  on a busy 2-core machine), hence the control; and a run can be unlucky: a check fails only
  when the same function counts in two runs (`recurring/1`; `repeat/3` reruns while the last run
  counted something, up to three). A call that holds its scheduler on one call in four is caught
  (scheduler_test's "the watch itself").
  """

  @native [{Plugboard.Native, :_, :_}]
  @control {__MODULE__, :control, 1}

  @doc "The control: returns `x`. Timed by every watch; see the moduledoc."
  def control(x), do: x

  defstruct [:tracer, :timed, :limit_ms, :previous_monitor]

  @doc "Starts watching; `timed` are `:erlang.trace_pattern/3` MFA patterns."
  def start(limit_ms, timed \\ @native) do
    flush_monitor()
    tracer = spawn(fn -> tracer_loop(%{}, []) end)
    timed = Enum.uniq([@control | timed])
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

    # The OS deschedules a thread now and then, in any call (the control's share); a call that holds
    # its scheduler, even only on some calls, is over the limit more often: of the calls of one
    # function, those over the limit count when their share is at least 0.1 above the control's
    # (one call of one: it counts), else they are :stretched (reported, not counted).
    groups = Enum.group_by(calls, fn {_, mfa, _} -> mfa end)
    over = fn group -> Enum.filter(group, fn {_, _, longest} -> longest >= limit end) end
    share = fn group -> length(over.(group)) / max(length(group), 1) end
    control = share.(Map.get(groups, @control, []))

    held =
      groups
      |> Enum.flat_map(fn {mfa, group} ->
        kind =
          cond do
            mfa == @control -> :control
            share.(group) >= control + 0.1 -> :held
            true -> :stretched
          end

        for {pid, mfa, longest} <- over.(group),
            do: %{kind: kind, who: pid, ms: System.convert_time_unit(longest, :native, :millisecond), in: mfa, out: mfa}
      end)

    monitored = for {who, info} <- collect_monitor([]), do: classify(who, info, watch.timed -- [@control], traced)
    # What was timed at all, one :timed event per function with its number of calls: a watch that
    # timed none of plugboard's calls (tracing not attached) would pass anything (timed_calls/1).
    timed = for {mfa, group} <- groups, mfa != @control, do: %{kind: :timed, who: nil, ms: 0, in: mfa, out: mfa, calls: length(group)}
    held ++ monitored ++ timed
  end

  @doc "How many calls of timed functions (the control and collections left out) a run's events saw."
  def timed_calls(events) do
    for %{kind: :timed, in: {m, _, _}, calls: n} <- events, m != :garbage_collection, reduce: 0, do: (acc -> acc + n)
  end

  @doc "The events that count against plugboard."
  def counted(events), do: Enum.filter(events, &(&1.kind in [:nif, :held]))

  @doc """
  Runs `run` (a function of no arguments returning `{result, events}`: one watched run) once, and
  again while the last run had counted events, up to `max` runs. `report` is called with each run's
  number and events. Returns `{the first run's result, [each run's events]}`.
  """
  def repeat(run, report \\ fn _, _ -> :ok end, max \\ 3) do
    {result, events} = run.()
    report.(1, events)
    {result, more(run, report, max, [events])}
  end

  defp more(run, report, max, [last | _] = runs) do
    if counted(last) == [] or length(runs) >= max do
      Enum.reverse(runs)
    else
      {_, events} = run.()
      report.(length(runs) + 1, events)
      more(run, report, max, [events | runs])
    end
  end

  @doc """
  What fails a check: the counted events of each function (by `in`) that counted in at least two of
  `runs` (lists of events), as `[{function, [{run number, [event]}]}]`. One unlucky run is not enough;
  a function that holds its scheduler, every time or now and then, does it again.
  """
  def recurring(runs) do
    runs
    |> Enum.with_index(1)
    |> Enum.flat_map(fn {events, i} -> for e <- counted(events), do: {e.in, i, e} end)
    |> Enum.group_by(fn {f, _, _} -> f end)
    |> Enum.map(fn {f, hits} -> {f, hits |> Enum.group_by(fn {_, i, _} -> i end, fn {_, _, e} -> e end) |> Enum.sort()} end)
    |> Enum.filter(fn {_, per_run} -> length(per_run) >= 2 end)
  end

  @doc "recurring/1's result as text."
  def describe_recurring(recurring) do
    Enum.map_join(recurring, "\n", fn {f, per_run} ->
      "  #{inspect(f)}:\n" <> Enum.map_join(per_run, "\n", fn {i, events} -> "   run #{i}:\n" <> describe(events) end)
    end)
  end

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
