defmodule Plugboard.Telemetry.Summary do
  @moduledoc """
  This node's plugboard activity, summed from `Plugboard.Telemetry`'s events since the `:plugboard`
  application started: a process under `Plugboard.Supervisor` that owns a public ETS table; the
  handlers (run in the processes that emit) add to its counters, so nothing waits on this process.
  `snapshot/0` reads it (a few ETS lookups; what `Plugboard.Cluster`'s node report carries).

  `snapshot/0` returns a plain map (durations in milliseconds, floats):

    * `node` — `node()`; `telemetry` — true when the events are emitted (`:telemetry` is loaded);
    * `boot` — the last boot: `%{result: :ok | :error, target, policy, duration_ms, candidates:
      [%{name, platform, origin, verdict, failed_stage, stages: [{stage, ms}]}]}`, or nil when
      plugboard did not boot;
    * `compiles` — by source (`:compiled`, `:compile_cache`, `:precompiled`, `:nx_cache`):
      `%{count, total_ms}` each, and `errors` (compilations that failed or timed out);
    * `runs` — `%{count, total_ms, last_ms, in_flight, errors}`: finished runs (an error counts in
      `count` and `errors`), the duration of the last one, and runs started but not yet awaited;
    * `host_callbacks` — `%{count, total_ms, errors}` (an error: returned `{:error, _}` or raised);
    * `errors` — the sum of the three `errors`.

  Without `:telemetry` it is `%{node, telemetry: false, boot}`, `boot` read from
  `Plugboard.report/0`, with no duration (nothing measured it).
  """
  use GenServer
  @compile {:no_warn_undefined, :telemetry}

  alias Plugboard.Telemetry

  @table __MODULE__
  @sources [:compiled, :compile_cache, :precompiled, :nx_cache]
  @events [
    [:plugboard, :boot, :stop],
    [:plugboard, :compile],
    [:plugboard, :run, :start],
    [:plugboard, :run, :stop],
    [:plugboard, :host_callback, :stop],
    [:plugboard, :host_callback, :exception]
  ]

  @doc false
  def start_link(_), do: GenServer.start_link(__MODULE__, [], name: __MODULE__)

  @impl true
  def init([]) do
    if Telemetry.enabled?() do
      :ets.new(@table, [:named_table, :public, :set, write_concurrency: true])
      # Rows: {key, count, total (native units), errors}; runs also keep last and in flight.
      for source <- @sources, do: :ets.insert(@table, {{:compile, source}, 0, 0, 0})
      :ets.insert(@table, [{:compile_errors, 0}, {:runs, 0, 0, 0, 0, 0}, {:host_callbacks, 0, 0, 0}, {:boot, nil}])
      Process.flag(:trap_exit, true)
      :ok = :telemetry.attach_many(handler_id(), @events, &__MODULE__.handle_event/4, nil)
    end

    {:ok, nil}
  end

  @impl true
  def terminate(_reason, _state) do
    if Telemetry.enabled?(), do: :telemetry.detach(handler_id())
    :ok
  end

  defp handler_id, do: {__MODULE__, node()}

  @doc false
  # Runs in the process that emitted the event.
  def handle_event([:plugboard, :run, :start], _, _, _), do: :ets.update_counter(@table, :runs, {5, 1})

  def handle_event([:plugboard, :run, :stop], %{duration: d}, metadata, _) do
    :ets.update_counter(@table, :runs, [{2, 1}, {3, d}, {5, -1}, {6, error(metadata)}])
    :ets.update_element(@table, :runs, {4, d})
  end

  def handle_event([:plugboard, :compile], measurements, %{result: :ok, source: source}, _) when source in @sources,
    do: :ets.update_counter(@table, {:compile, source}, [{2, 1}, {3, measurements.duration}])

  def handle_event([:plugboard, :compile], _, _, _), do: :ets.update_counter(@table, :compile_errors, 1)

  def handle_event([:plugboard, :host_callback, :stop], %{duration: d}, metadata, _),
    do: :ets.update_counter(@table, :host_callbacks, [{2, 1}, {3, d}, {4, error(metadata)}])

  def handle_event([:plugboard, :host_callback, :exception], %{duration: d}, _, _),
    do: :ets.update_counter(@table, :host_callbacks, [{2, 1}, {3, d}, {4, 1}])

  def handle_event([:plugboard, :boot, :stop], %{duration: d}, metadata, _) do
    boot = Map.take(metadata, [:result, :target, :policy, :candidates]) |> Map.put(:duration_ms, ms(d))
    :ets.insert(@table, {:boot, boot})
  end

  defp error(%{result: :error}), do: 1
  defp error(_), do: 0

  @doc "This node's summary (see the module's documentation for its keys)."
  @spec snapshot() :: map()
  def snapshot do
    if Telemetry.enabled?() and :ets.whereis(@table) != :undefined,
      do: from_table(),
      else: %{node: node(), telemetry: false, boot: boot_from_report(Plugboard.report())}
  end

  defp from_table do
    compiles = Map.new(@sources, fn s -> [{_, n, total, _}] = :ets.lookup(@table, {:compile, s}); {s, %{count: n, total_ms: ms(total)}} end)
    [{_, compile_errors}] = :ets.lookup(@table, :compile_errors)
    [{_, runs, run_total, last, in_flight, run_errors}] = :ets.lookup(@table, :runs)
    [{_, calls, call_total, call_errors}] = :ets.lookup(@table, :host_callbacks)
    [{_, boot}] = :ets.lookup(@table, :boot)

    %{
      node: node(),
      telemetry: true,
      boot: boot,
      compiles: Map.put(compiles, :errors, compile_errors),
      runs: %{count: runs, total_ms: ms(run_total), last_ms: ms(last), in_flight: in_flight, errors: run_errors},
      host_callbacks: %{count: calls, total_ms: ms(call_total), errors: call_errors},
      errors: compile_errors + run_errors + call_errors
    }
  end

  defp boot_from_report(nil), do: nil

  defp boot_from_report(report) do
    %{result: if(report.chosen, do: :ok, else: :error), target: report.chosen, policy: report.policy, duration_ms: nil,
      candidates: Telemetry.candidates(report)}
  end

  defp ms(native), do: System.convert_time_unit(native, :native, :nanosecond) / 1.0e6
end
