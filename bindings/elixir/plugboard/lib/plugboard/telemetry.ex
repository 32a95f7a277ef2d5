defmodule Plugboard.Telemetry do
  @moduledoc """
  plugboard's `:telemetry` events, emitted from here only. `:telemetry` is an optional dependency:
  when it is not loaded (or its application did not start), nothing is emitted and each place that
  would emit costs one `:persistent_term` read. Whether it is there is decided once, when the
  `:plugboard` application starts; `config :plugboard, telemetry: false` turns the events off even
  where `:telemetry` is loaded (what they cost a run: the guide "Telemetry"). The per-run events
  are off unless asked for (`config :plugboard, run_events: true`, or `run_events/1`): the counts a
  node report carries (`Plugboard.Telemetry.Summary`) are kept by the NIF whether or not they are on.

  Events (measurements in `:native` time units unless named `_ms`; `System.convert_time_unit/3`):

    * `[:plugboard, :boot, :start | :stop]` — `Plugboard.boot/1` (the application's boot included).
      Start: `%{system_time, monotonic_time}`, metadata `%{}`. Stop: `%{duration, monotonic_time}`,
      metadata `%{result: :ok | :error, target: chosen name | nil, policy: string | nil,
      candidates: [candidate], error: %Plugboard.Error{} | nil, report: %Plugboard.Report{} | nil}`,
      each candidate `%{name, platform, origin, verdict, failed_stage, stages: [{stage, ms}]}` in the
      report's order (stage times in ms, as the report has them). A failed boot is a stop with
      `result: :error` (plugboard returns errors as values; nothing raises).
    * `[:plugboard, :compile]` — once per `Plugboard.compile/3` that got an answer (or gave up):
      `%{duration}` (the caller's wait) and `compile_ms` (what the compilation or load itself took,
      nil on error); metadata `%{name, source: :compiled | :compile_cache | :precompiled | nil,
      target, result: :ok | :error, error}` (`name` as `compile/3`'s `name:` gave it; `source` is the
      executable's). `Plugboard.Nx`'s own cache emits it too on a hit when the run events are on
      (a cached jit is a run), with `source: :nx_cache`, `name: nil` and the lookup's `duration`.
    * `[:plugboard, :run, :start | :stop]` (only with `run_events: true`: together about 1 µs a run
      even with no handler) — a span from `Plugboard.run/3`, `run_async/3` or
      `run_partitioned/3` to the outcome its `await/2` returns (once: a second await emits nothing;
      a run never awaited has no stop, and leaves nothing behind: what its stop needs is in its
      `Plugboard.Run`).
      Start: `%{system_time, monotonic_time}`, metadata `%{executable, target, device}` (`executable`
      is the `Plugboard.Executable`'s `name`; `device` a list of indices for `run_partitioned/3`). Stop: `%{duration, monotonic_time}`, the same
      metadata plus `result: :ok | :error` and `error` (a failed or timed-out run).
    * `[:plugboard, :host_callback, :start | :stop | :exception]` — a host callback answered by an
      Elixir function bound in `run/3`'s `callbacks:` or `ordered:` (`:telemetry.span/3`): metadata
      `%{name, ordered: boolean, executable}`, on stop also `result: :ok | :error`. `:exception`
      (the function raised, threw or exited) carries `kind`, `reason` and `stacktrace`; the
      execution then fails as before.
    * `[:plugboard, :key_value_store, :lost]` — the key-value store's leader stopped holding data
      (a crash): `%{keys, waiters}`, metadata `%{cluster, reason, node}` (`Plugboard.KeyValueStore`);
      or dropped one namespace whose last store crashed or stayed on a node out of reach past
      `key_value_store_away_ms`: the same, plus `namespace`.
    * `[:plugboard, :key_value_store, :merged]` — a healed split merged another leader's keys:
      `%{keys, conflicts}`, metadata `%{cluster, node, from_node, conflicting}` (the `{namespace,
      key}`s put on both sides whose other value was lost).

  `target` is the name of the target the client was booted as (`Plugboard.Client`'s `target`), or
  the plugin's path for a client from `Plugboard.open/2`.

  Reserved for `Plugboard.Serving` (which emits them): `[:plugboard, :serving, :route]`,
  `[:plugboard, :serving, :retry]`, `[:plugboard, :serving, :run, :start | :stop]`.
  """
  require Logger
  @compile {:no_warn_undefined, :telemetry}
  @key {__MODULE__, :enabled}
  @run_events {__MODULE__, :run_events}

  @doc false
  # Plugboard.Application's start: decides once whether events are emitted, and whether runs emit
  # theirs (read on every run).
  def setup do
    enabled =
      Application.get_env(:plugboard, :telemetry, true) != false and Code.ensure_loaded?(:telemetry) and
        match?({:ok, _}, Application.ensure_all_started(:telemetry))

    if :persistent_term.get(@key, nil) != enabled, do: :persistent_term.put(@key, enabled)
    run_events(run_events_config(Application.get_env(:plugboard, :run_events, false)))
    enabled
  end

  defp run_events_config(on?) when is_boolean(on?), do: on?

  defp run_events_config(other) do
    Logger.warning("plugboard: config :plugboard, run_events: must be true or false, got #{inspect(other, limit: 5)}; the per-run events stay off")
    false
  end

  @doc """
  Turns the per-run events (`[:plugboard, :run, :start | :stop]`) on or off from now on, for runs
  started after the call; returns whether they are on (never without `:telemetry`). Off by default
  (`config :plugboard, run_events: true` turns them on at start): a run then pays one
  `:persistent_term` read for them. Changing it is a `:persistent_term` update (a global GC pass):
  for a deployment's setup or a test, not for a hot path. A restart of `:plugboard` sets it from the
  config again.
  """
  @spec run_events(boolean()) :: boolean()
  def run_events(on?) when is_boolean(on?) do
    on? = on? and enabled?()
    if :persistent_term.get(@run_events, nil) != on?, do: :persistent_term.put(@run_events, on?)
    on?
  end

  @doc "Whether runs emit `[:plugboard, :run, :start | :stop]` (`run_events/1`)."
  @spec run_events?() :: boolean()
  def run_events?, do: :persistent_term.get(@run_events, false)

  @doc "Whether plugboard emits events (`:telemetry` was there when `:plugboard` started)."
  @spec enabled?() :: boolean()
  def enabled?, do: :persistent_term.get(@key, false)

  @doc "Emits one event (nothing when disabled)."
  @spec execute([atom()], map(), map()) :: :ok
  def execute(event, measurements, metadata) do
    if enabled?(), do: :telemetry.execute(event, measurements, metadata)
    :ok
  end

  @doc """
  `:telemetry.span/3` when enabled: `fun` returns `{result, stop_metadata}`; `result` is returned.
  Disabled, only `fun` runs.
  """
  @spec span([atom()], map(), (-> {term(), map()})) :: term()
  def span(prefix, metadata, fun) do
    if enabled?(), do: :telemetry.span(prefix, metadata, fun), else: elem(fun.(), 0)
  end

  # ------------------------------------------------------------------------------------------------
  # Spans that start in one call and end in another (Plugboard's run_async/3 and await/2).

  @doc false
  # A run started: its start event now; what its stop needs (kept in its %Plugboard.Run{}, so that a
  # run dropped without an await leaves nothing behind), or nil when run events are off. `once` (an
  # atomic) makes a second await of the same run emit nothing; a run whose caller awaits it in the
  # same call (`run/3`: nobody else sees its Plugboard.Run) needs none (`shared?` false).
  def run_start(executable, target, device, shared? \\ true) do
    if run_events?() do
      metadata = %{executable: executable, target: target, device: device}
      start = System.monotonic_time()
      # Erlang's system time is its monotonic time plus the time offset: one clock read, not two.
      :telemetry.execute([:plugboard, :run, :start], %{system_time: start + System.time_offset(), monotonic_time: start}, metadata)
      %{start: start, metadata: metadata, once: if(shared?, do: :atomics.new(1, []))}
    end
  end

  @doc false
  # The run's outcome, returned as it is; its stop event first, the first time only.
  def run_stop(nil, outcome), do: outcome

  def run_stop(%{start: start, metadata: metadata, once: once}, outcome) do
    if once == nil or :atomics.compare_exchange(once, 1, 0, 1) == :ok do
      stop = System.monotonic_time()
      :telemetry.execute([:plugboard, :run, :stop], %{duration: stop - start, monotonic_time: stop}, result(metadata, outcome))
    end

    outcome
  end

  @doc false
  # When a lookup of Plugboard.Nx's cache started: nil unless the run events are on (a cached jit is
  # a run: its hit's event is one of the per-run events, run_events/1), and then no clock is read.
  def hit_start, do: if(run_events?(), do: System.monotonic_time())

  @doc false
  # A hit of Plugboard.Nx's own cache (which never reaches Plugboard.compile/3), `start` from
  # hit_start/0: counted in the summary; with the run events on, also its [:plugboard, :compile]
  # event, with the lookup's duration (added to the summary's total).
  def cache_hit(nil, _target), do: Plugboard.Telemetry.Summary.count_hit()

  def cache_hit(start, target) do
    duration = System.monotonic_time() - start
    Plugboard.Telemetry.Summary.count_compile(:nx_cache, duration)
    :telemetry.execute([:plugboard, :compile], %{duration: duration, compile_ms: nil},
                       %{name: nil, source: :nx_cache, target: target, result: :ok, error: nil})
  end

  @doc false
  # Plugboard.compile/3's answer, returned as it is, after its event.
  def compiled(outcome, name, target, start) do
    if enabled?() do
      {source, ms} = with {:ok, exe} <- outcome, do: {exe.source, exe.compile_ms}, else: (_ -> {nil, nil})
      measurements = %{duration: System.monotonic_time() - start, compile_ms: ms}
      Plugboard.Telemetry.Summary.count_compile(source, measurements.duration)
      :telemetry.execute([:plugboard, :compile], measurements, result(%{name: name, source: source, target: target}, outcome))
    end

    outcome
  end

  @doc false
  # Plugboard.boot/1's answer, returned as it is, after its stop event.
  def booted(answer, start) do
    if enabled?() do
      {report, error} =
        case answer do
          {:ok, _client, report} -> {report, nil}
          {:error, error, report} -> {report, error}
        end

      stop = System.monotonic_time()

      metadata = %{
        result: if(error, do: :error, else: :ok),
        error: error,
        target: report && report.chosen,
        policy: report && report.policy,
        candidates: candidates(report),
        report: report
      }

      :telemetry.execute([:plugboard, :boot, :stop], %{duration: stop - start, monotonic_time: stop}, metadata)
    end

    answer
  end

  @doc false
  # The boot's start event; its time, for booted/2.
  def boot_start do
    start = System.monotonic_time()
    if enabled?(), do: :telemetry.execute([:plugboard, :boot, :start], %{system_time: System.system_time(), monotonic_time: start}, %{})
    start
  end

  @doc false
  # The candidates of a boot report as the boot event carries them (plain data).
  def candidates(nil), do: []

  def candidates(%Plugboard.Report{candidates: candidates}) do
    for c <- candidates do
      %{name: c.name, platform: c.platform, origin: c.origin, verdict: c.verdict, failed_stage: c.failed_stage,
        stages: for(s <- c.stages || [], do: {s.stage, s.ms})}
    end
  end

  defp result(metadata, {:ok, _}), do: Map.merge(metadata, %{result: :ok, error: nil})
  defp result(metadata, {:error, error}), do: Map.merge(metadata, %{result: :error, error: error})
end
