defmodule Plugboard.Telemetry.Summary do
  @moduledoc """
  This node's plugboard activity, summed from `Plugboard.Telemetry`'s events since the `:plugboard`
  application started: a process under `Plugboard.Supervisor` that owns `:counters` and an ETS table
  with the last boot and, per process with runs launched on a thread, how many it has not awaited
  yet (a row each, removed when the process exits: this process monitors it). Nothing waits on this
  process: runs and compiles (Plugboard.Nx's cache hits included) are added to the counters where
  their events are emitted, a few `:counters` operations, with no `:telemetry` handler in between
  (what a run pays for the summary: nanoseconds); boots and host callbacks through handlers it
  attaches. `snapshot/0` reads them (two ETS lookups, one ETS select and 16 counters; what
  `Plugboard.Cluster`'s node report carries).

  `snapshot/0` returns a plain map (durations in milliseconds, floats):

    * `node` — `node()`; `telemetry` — true when the events are emitted (`:telemetry` is loaded);
    * `boot` — the last boot: `%{result: :ok | :error, target, policy, duration_ms, candidates:
      [%{name, platform, origin, verdict, failed_stage, stages: [{stage, ms}]}]}`, or nil when
      plugboard did not boot;
    * `compiles` — by source (`:compiled`, `:compile_cache`, `:precompiled`, `:nx_cache`):
      `%{count, total_ms}` each, and `errors` (compilations that failed or timed out);
    * `runs` — `%{count, total_ms, last_ms, in_flight, errors}`: finished runs (an error counts in
      `count` and `errors`), the duration of the last one, and runs in flight: launched on a thread
      and not yet awaited by a process that is still alive (a run whose caller exited is not in
      flight, nor is one the plugin finished inside the call, awaited or not; a run launched on a
      thread and never awaited counts until its process exits);
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
  # Runs and compiles are not among them: Plugboard.Telemetry adds them to the counters itself
  # (count_run/2, count_compile/3), a few :counters operations instead of a handler's dispatch on
  # every run and every hit of Plugboard.Nx's cache.
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
  @runs 10
  @run_total 11
  @run_last 12
  @run_errors 13
  @calls 14
  @call_total 15
  @call_errors 16
  @size 16
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
  # A process that launched runs: its row goes when it exits (its runs with it).
  def handle_info({:watch, pid}, state) do
    Process.monitor(pid)
    {:noreply, state}
  end

  def handle_info({:DOWN, _, :process, pid, _}, state) do
    :ets.delete(@table, pid)
    {:noreply, state}
  end

  def handle_info(_, state), do: {:noreply, state}

  @impl true
  def terminate(_reason, _state) do
    if Telemetry.enabled?(), do: :telemetry.detach(handler_id())
    :persistent_term.erase(@counters)
    :ok
  end

  defp handler_id, do: {__MODULE__, node()}

  @doc false
  # In the process that launched a run on a thread (Plugboard.Telemetry.run_launched/1): one more in
  # flight on its row; the first row of a process asks this one to watch it. False when there is no
  # table or no registered summary (it is not running, or restarting): the run is not counted, and
  # its await takes nothing off. A first row whose summary cannot be told is taken back: nobody would
  # remove it when the process exits.
  def run_launched do
    pid = self()

    cond do
      :ets.whereis(@table) == :undefined -> false
      :ets.insert_new(@table, {pid, 1}) -> watched(pid)
      true ->
        :ets.update_counter(@table, pid, 1)
        true
    end
  rescue
    ArgumentError -> false
  end

  defp watched(pid) do
    send(__MODULE__, {:watch, pid})
    true
  rescue
    ArgumentError ->
      :ets.delete(@table, pid)
      false
  end

  @doc false
  # The run launched by this process was awaited: one fewer in flight (never under 0).
  def run_landed do
    :ets.update_counter(@table, self(), {2, -1, 0, 0})
    :ok
  rescue
    # No row: the summary restarted since the launch (the row went with its table).
    ArgumentError -> :ok
  end

  @doc false
  # A run's stop (Plugboard.Telemetry.run_stop/2), in the process that awaited it: nothing when the
  # summary is not running.
  def count_run(duration, outcome) do
    case :persistent_term.get(@counters, nil) do
      nil ->
        :ok

      c ->
        :counters.add(c, @runs, 1)
        :counters.add(c, @run_total, duration)
        :counters.put(c, @run_last, duration)
        if elem(outcome, 0) == :error, do: :counters.add(c, @run_errors, 1)
        :ok
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
      else: %{node: node(), telemetry: false, boot: boot_from_report(Plugboard.report())}
  end

  defp from_counters do
    [{_, c}] = :ets.lookup(@table, :counters)
    [{_, boot}] = :ets.lookup(@table, :boot)
    get = &:counters.get(c, &1)
    compiles = Map.new(@sources, fn s -> {s, %{count: get.(count(s)), total_ms: ms(get.(count(s) + 1))}} end)

    %{
      node: node(),
      telemetry: true,
      boot: boot,
      compiles: Map.put(compiles, :errors, get.(@compile_errors)),
      runs: %{count: get.(@runs), total_ms: ms(get.(@run_total)), last_ms: ms(get.(@run_last)), in_flight: in_flight(),
              errors: get.(@run_errors)},
      host_callbacks: %{count: get.(@calls), total_ms: ms(get.(@call_total)), errors: get.(@call_errors)},
      errors: get.(@compile_errors) + get.(@run_errors) + get.(@call_errors)
    }
  end

  # The rows of processes with runs launched: keyed by pid (the other rows by atoms).
  defp in_flight, do: @table |> :ets.select([{{:"$1", :"$2"}, [{:is_pid, :"$1"}], [:"$2"]}]) |> Enum.sum()

  defp boot_from_report(nil), do: nil

  defp boot_from_report(report) do
    %{result: if(report.chosen, do: :ok, else: :error), target: report.chosen, policy: report.policy, duration_ms: nil,
      candidates: Telemetry.candidates(report)}
  end

  defp ms(native), do: System.convert_time_unit(native, :native, :nanosecond) / 1.0e6
end
