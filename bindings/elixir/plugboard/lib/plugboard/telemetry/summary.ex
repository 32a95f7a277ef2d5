defmodule Plugboard.Telemetry.Summary do
  @moduledoc """
  This node's plugboard activity since the `:plugboard` application started. Runs are counted by
  the NIF itself where each run's outcome is known (`c_src/run_counts.h`: a few atomic additions a
  run, no Elixir code and no `:telemetry` event on the run path); compiles (Plugboard.Nx's cache hits
  included) are added to `:counters` where their events are emitted, with no handler in between;
  boots and host callbacks through handlers that a process under `Plugboard.Supervisor` attaches
  (it owns the counters and an ETS table with the last boot). `snapshot/0` reads them (what
  `Plugboard.Cluster`'s node report carries).

  `snapshot/0` returns a plain map (durations in milliseconds, floats):

    * `node` — `node()`; `telemetry` — true when the events are emitted (`:telemetry` is loaded);
    * `boot` — the last boot: `%{result: :ok | :error, target, policy, duration_ms, candidates:
      [%{name, platform, origin, verdict, failed_stage, stages: [{stage, ms}]}]}`, or nil when
      plugboard did not boot;
    * `runs` — `%{count, total_ms, last_ms, in_flight, errors}`: runs that came to an outcome (an
      error counts in `count` and `errors`: refused by the NIF when started, or failed in the
      plugin), the time from the start of a recent one to its outcome (`total_ms`: summed), and
      executions started and not complete yet (whether or not anyone still waits for them). The
      execution's own outcome: a run whose `await/2` gave up counts when the plugin finishes it, an
      ordered callback that failed in Elixir does not make it an error, and a call refused in Elixir
      before reaching the NIF (bad options) is not a run;
    * `compiles` — by source (`:compiled`, `:compile_cache`, `:precompiled`, `:nx_cache`):
      `%{count, total_ms}` each, and `errors` (compilations that failed or timed out). Every hit of
      `Plugboard.Nx`'s cache counts in `:nx_cache`; its `total_ms` sums only the lookups timed while
      the run events were on (`Plugboard.Telemetry.run_events/1`: no clock is read otherwise);
    * `host_callbacks` — `%{count, total_ms, errors}` (an error: returned `{:error, _}` or raised);
    * `errors` — the sum of the three `errors`.

  Without `:telemetry` it is `%{node, telemetry: false, boot, runs}`, `boot` read from
  `Plugboard.report/0`, with no duration (nothing measured it).
  """
  use GenServer
  @compile {:no_warn_undefined, :telemetry}

  alias Plugboard.Telemetry

  @table __MODULE__
  @sources [:compiled, :compile_cache, :precompiled, :nx_cache]
  # Compiles are not among them: Plugboard.Telemetry adds them to the counters itself
  # (count_compile/2), a few :counters operations instead of a handler's dispatch on every hit of
  # Plugboard.Nx's cache. Runs are the NIF's (Plugboard.Native.run_counts/0).
  @events [
    [:plugboard, :boot, :stop],
    [:plugboard, :host_callback, :stop],
    [:plugboard, :host_callback, :exception]
  ]
  # Where the run path finds the counters (put at init, erased at terminate).
  @counters {__MODULE__, :counters}

  # The counters (one :counters array, given to the handlers as their config): per compile source a
  # count and a total (native units), then the rest.
  @compile_errors 9
  @calls 10
  @call_total 11
  @call_errors 12
  @size 12
  for {source, i} <- Enum.with_index(@sources), do: defp(count(unquote(source)), do: unquote(2 * i + 1))

  @doc false
  def start_link(_), do: GenServer.start_link(__MODULE__, [], name: __MODULE__)

  @impl true
  def init([]) do
    if Telemetry.enabled?() do
      counters = :counters.new(@size, [:write_concurrency])
      :ets.new(@table, [:named_table, :public, :set, read_concurrency: true])
      :ets.insert(@table, [{:counters, counters}, {:boot, nil}])
      Process.flag(:trap_exit, true)
      :ok = :telemetry.attach_many(handler_id(), @events, &__MODULE__.handle_event/4, counters)
      :persistent_term.put(@counters, counters)
    end

    {:ok, nil}
  end

  @impl true
  def handle_info(_, state), do: {:noreply, state}

  @impl true
  def terminate(_reason, _state) do
    if Telemetry.enabled?(), do: :telemetry.detach(handler_id())
    :persistent_term.erase(@counters)
    :ok
  end

  defp handler_id, do: {__MODULE__, node()}

  @doc false
  # A hit of Plugboard.Nx's cache not timed (the run events off): its count alone.
  def count_hit do
    case :persistent_term.get(@counters, nil) do
      nil -> :ok
      c -> :counters.add(c, count(:nx_cache), 1)
    end
  end

  @doc false
  # A compile's answer or a hit of Plugboard.Nx's cache (Plugboard.Telemetry.compiled/4,
  # cache_hit/2): `source` nil for an error.
  def count_compile(source, duration) do
    case :persistent_term.get(@counters, nil) do
      nil ->
        :ok

      c when source in @sources ->
        i = count(source)
        :counters.add(c, i, 1)
        :counters.add(c, i + 1, duration)

      c ->
        :counters.add(c, @compile_errors, 1)
    end
  end

  @doc false
  # Runs in the process that emitted the event.
  def handle_event([:plugboard, :host_callback, kind], %{duration: d}, metadata, c) do
    :counters.add(c, @calls, 1)
    :counters.add(c, @call_total, d)
    if kind == :exception or metadata[:result] == :error, do: :counters.add(c, @call_errors, 1)
  end

  def handle_event([:plugboard, :boot, :stop], %{duration: d}, metadata, _) do
    boot = Map.take(metadata, [:result, :target, :policy, :candidates]) |> Map.put(:duration_ms, ms(d))
    :ets.insert(@table, {:boot, boot})
  end

  @doc "This node's summary (see the module's documentation for its keys)."
  @spec snapshot() :: map()
  def snapshot do
    if Telemetry.enabled?() and :ets.whereis(@table) != :undefined,
      do: from_counters(),
      else: %{node: node(), telemetry: false, boot: boot_from_report(Plugboard.report()), runs: runs()}
  end

  defp from_counters do
    [{_, c}] = :ets.lookup(@table, :counters)
    [{_, boot}] = :ets.lookup(@table, :boot)
    get = &:counters.get(c, &1)
    runs = runs()
    compiles = Map.new(@sources, fn s -> {s, %{count: get.(count(s)), total_ms: ms(get.(count(s) + 1))}} end)

    %{
      node: node(),
      telemetry: true,
      boot: boot,
      compiles: Map.put(compiles, :errors, get.(@compile_errors)),
      runs: runs,
      host_callbacks: %{count: get.(@calls), total_ms: ms(get.(@call_total)), errors: get.(@call_errors)},
      errors: get.(@compile_errors) + runs.errors + get.(@call_errors)
    }
  end

  # The NIF's counts (nothing counted when the NIF did not load).
  defp runs do
    c = Plugboard.Native.run_counts()
    %{count: c.count, total_ms: c.total_ns / 1.0e6, last_ms: c.last_ns / 1.0e6, in_flight: c.in_flight, errors: c.errors}
  rescue
    _ -> %{count: 0, total_ms: 0.0, last_ms: 0.0, in_flight: 0, errors: 0}
  end

  defp boot_from_report(nil), do: nil

  defp boot_from_report(report) do
    %{result: if(report.chosen, do: :ok, else: :error), target: report.chosen, policy: report.policy, duration_ms: nil,
      candidates: Telemetry.candidates(report)}
  end

  defp ms(native), do: System.convert_time_unit(native, :native, :nanosecond) / 1.0e6
end
