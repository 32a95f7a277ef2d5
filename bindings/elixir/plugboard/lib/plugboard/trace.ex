defmodule Plugboard.Trace do
  @moduledoc """
  Traces: where the time of a VM goes, as spans on a timeline that Perfetto (ui.perfetto.dev) and
  `chrome://tracing` open (the Chrome trace-event JSON format).

  One switch records both sides: plugboard's C++ library (the boot's stages per candidate, compiles
  and the compile cache, each execution's launch, its plugin call and its time on the device's
  track, copies with their bytes, host callbacks waiting on the plugin's thread, deliveries: the
  guide "Traces") and the Elixir side (`Plugboard.run/3` and `await/2`, host callback functions,
  and any span you record here).

      :ok = Plugboard.Trace.start()
      Plugboard.run!(exe, [x])
      {:ok, trace} = Plugboard.Trace.stop()
      :ok = Plugboard.Trace.write(trace, "run.trace.json")   # open it in Perfetto

      # Your own spans, on the calling process's track ("elixir #PID<0.123.0>"):
      Plugboard.Trace.span("load batch", "app", %{batch: 3}, fn -> load(3) end)

      # Or from times you took (Plugboard.Trace.now/0), on a named track:
      t0 = Plugboard.Trace.now()
      ...
      Plugboard.Trace.record("request", "serving", t0, Plugboard.Trace.now(), %{node: "b@host"}, "elixir serving")

  From the configuration, tracing starts with the `:plugboard` application, before its boot (so the
  boot's stages are in the trace), and the trace is written when the application stops:

      config :plugboard, trace: "boot.trace.json"
      config :plugboard, trace: [path: "boot.trace.json", max_spans: 100_000]

  A path that cannot be written is refused when the application starts (the log names it and the
  application does not start) and, should it become unwritable meanwhile, named in the log at stop.
  A trace stopped by `stop/0` before the application stops is the caller's: nothing is written then
  (the log says so at stop).

  **The Elixir side's spans** (category "elixir", on the track of the process that ran them): `run`,
  from `Plugboard.run/3`'s (or `run_async/3`'s) launch to the outcome received by the process that
  awaits it (args `executable`, `result`); `host_callback` and `ordered_host_callback`, the time the
  Elixir function bound to a host callback runs (args `target`, `executable`; `sequence`): a
  blocking one lies inside the plugin thread's `blocking_callback`, the time the program waited.
  `Plugboard.Nx` and `Plugboard.Serving` add theirs (their module docs).

  **What spans cost.** Off (the default), an instrumented site in Elixir costs a `:persistent_term`
  read (`enabled?/0`), or nothing where the site's check rides on a branch the code takes anyway
  (`Plugboard.run/3`: the NIF answers whether tracing is on with the launch); in C++, one relaxed
  atomic load. On, a span recorded from Elixir costs two `now/0` calls and one `record/6` (a NIF
  call that copies the span into the recorder): 12 reductions and a few hundred nanoseconds
  (`bench/trace.exs`).

  **Clock.** Every time is nanoseconds of the machine's CLOCK_MONOTONIC (`now/0`), the C++ spans'
  clock; `:erlang.monotonic_time/0` is another clock. `clock_monotonic_ns` and `clock_realtime_ns`
  are read side by side when the trace starts: a span's wall-clock time is
  `start_ns - clock_monotonic_ns + clock_realtime_ns`.

  **Tracks.** Each OS thread that recorded (a scheduler, a plugin's thread, `pb-delivery`), each
  device (`"device 0 (cpu)"`), each Erlang process that recorded (`"elixir <registered name or
  pid>"`) and each named track is a track (`tracks`: tid => name). Spans on a thread's track nest;
  spans of a named track that overlap without nesting are drawn on lanes of their own
  (`"elixir serving [2]"`). A process has at most 4096 named tracks over its life; past them a span
  goes to the recording scheduler thread's track.

  At most `max_spans` spans are kept (default 262_144); the rest are counted in `dropped_spans`.
  """

  alias Plugboard.{Error, Native}

  @type span :: %{
          name: String.t(),
          category: String.t(),
          start_ns: integer(),
          end_ns: integer(),
          tid: integer(),
          args: %{String.t() => integer() | float() | String.t()}
        }
  @type t :: %__MODULE__{
          process_name: String.t(),
          pid: integer(),
          node: node(),
          clock_monotonic_ns: integer(),
          clock_realtime_ns: integer(),
          started_ns: integer(),
          stopped_ns: integer(),
          max_spans: pos_integer(),
          dropped_spans: non_neg_integer(),
          tracks: %{integer() => String.t()},
          spans: [span()],
          notes: [String.t()],
          alignment: map() | nil
        }
  # `notes`: what went wrong while recording that is not a span (a plugin's own profiler that could
  # not be started or collected). `alignment`: nil here; Plugboard.Trace.Cluster puts a node's clock
  # alignment there.
  defstruct [:process_name, :pid, :node, :clock_monotonic_ns, :clock_realtime_ns, :started_ns, :stopped_ns,
             :max_spans, dropped_spans: 0, tracks: %{}, spans: [], notes: [], alignment: nil]

  @on {__MODULE__, :on}
  @track {__MODULE__, :track}
  @default_max_spans 262_144

  @doc """
  Starts recording. Options: `max_spans:` (spans kept at most, default 262_144), `process_name:`
  (the trace's process: default the node's name, or "plugboard (pid N)" when not distributed).
  A trace already being recorded is refused (`:failed_precondition`).
  """
  @spec start(keyword()) :: :ok | {:error, Error.t()}
  def start(opts \\ []) do
    with {:ok, max_spans} <- option(opts, :max_spans, @default_max_spans, &(is_integer(&1) and &1 > 0), "a positive integer"),
         {:ok, name} <- option(opts, :process_name, default_name(), &is_binary/1, "a string"),
         :ok <- known(opts),
         :ok <- Native.trace_start(max_spans, name) do
      set_on(true)
    else
      {:error, %Error{message: m} = e} -> {:error, %{e | message: "Plugboard.Trace.start: " <> m}}
    end
  end

  @doc """
  Stops recording and returns the trace. Without a trace being recorded: `:failed_precondition`.
  The recorder stops on a dirty scheduler; the spans then come into the calling process a chunk at
  a time (no NIF call or garbage collection of the whole trace at once on its scheduler).
  """
  @spec stop() :: {:ok, t()} | {:error, Error.t()}
  def stop do
    result = Native.trace_stop()
    set_on(false)

    case result do
      {:ok, fields, stopped} ->
        with {:ok, spans} <- spans(stopped, []),
             do: {:ok, struct!(__MODULE__, fields |> Map.put(:node, node()) |> Map.put(:spans, spans))}

      {:error, %Error{message: m} = e} ->
        {:error, %{e | message: "Plugboard.Trace.stop: " <> m}}
    end
  end

  # Spans and their args a NIF call builds at most: well under a millisecond.
  @chunk 256

  defp spans(stopped, chunks) do
    case Native.trace_spans(stopped, @chunk) do
      [] -> {:ok, chunks |> Enum.reverse() |> Enum.concat()}
      chunk when is_list(chunk) -> spans(stopped, [chunk | chunks])
      # The NIF could not build a chunk (out of memory): the trace is lost, and the error says so.
      {:error, %Error{message: m} = e} -> {:error, %{e | message: "Plugboard.Trace.stop: " <> m}}
    end
  end

  @doc "Whether a trace is being recorded (one `:persistent_term` read: for guarding span sites)."
  @spec enabled?() :: boolean()
  def enabled?, do: :persistent_term.get(@on, false)

  @doc "Nanoseconds of CLOCK_MONOTONIC: the clock of every span (not `:erlang.monotonic_time/0`'s)."
  @spec now() :: integer()
  def now, do: Native.trace_now()

  @doc """
  Records a finished span from `start_ns` to `end_ns` (`now/0` times): nothing when tracing is off.
  `args`: a map of atom or string keys to integers, floats, strings or atoms (anything else is kept
  as its `inspect/1`). `track`: nil for the calling process's track (`"elixir <name or pid>"`), or a
  track's name. A span that began before the trace started is not kept.
  """
  @spec record(String.t(), String.t(), integer(), integer(), map(), String.t() | nil) :: :ok | {:error, Error.t()}
  def record(name, category, start_ns, end_ns, args \\ %{}, track \\ nil) do
    if enabled?(), do: put(name, category, start_ns, end_ns, args, track || own_track()), else: :ok
  end

  @doc """
  Runs `fun` (no arguments) and returns its result; when tracing is on, records the time it took as
  a span on the calling process's track (also when it raises, throws or exits).

      iex> Plugboard.Trace.span("load batch", "app", fn -> :loaded end)
      :loaded
      iex> :ok = Plugboard.Trace.start()
      iex> Plugboard.Trace.span("load batch", "app", %{batch: 3}, fn -> :loaded end)
      :loaded
      iex> {:ok, trace} = Plugboard.Trace.stop()
      iex> [span] = Enum.filter(trace.spans, &(&1.name == "load batch"))
      iex> {span.category, span.args, span.end_ns >= span.start_ns}
      {"app", %{"batch" => 3}, true}
  """
  @spec span(String.t(), String.t(), map(), (-> result)) :: result when result: term()
  def span(name, category, args \\ %{}, fun) when is_function(fun, 0) do
    if enabled?() do
      start = Native.trace_now()

      try do
        fun.()
      after
        put(name, category, start, Native.trace_now(), args, own_track())
      end
    else
      fun.()
    end
  end

  @doc false
  # A span of plugboard's own Elixir code, the start taken by the caller (enabled? checked there).
  def own(name, category, start_ns, args), do: put(name, category, start_ns, Native.trace_now(), args, own_track())

  defp put(name, category, start_ns, end_ns, args, track) do
    case Native.trace_record(name, category, start_ns, end_ns, track, args) do
      :unsupported -> Native.trace_record(name, category, start_ns, end_ns, track, plain(args)) |> as_ok()
      other -> as_ok(other)
    end
  end

  defp as_ok(:ok), do: :ok
  defp as_ok(:unsupported), do: :ok
  defp as_ok({:error, %Error{}} = error), do: error

  # Args the recorder keeps: text keys; integers of 64 bits, floats, strings and atoms; the rest inspected.
  defp plain(args) do
    Map.new(args, fn {k, v} ->
      key = if is_atom(k) or is_binary(k), do: k, else: inspect(k)

      value =
        cond do
          is_integer(v) and v >= -0x8000000000000000 and v <= 0x7FFFFFFFFFFFFFFF -> v
          is_float(v) or is_binary(v) or is_atom(v) -> v
          true -> inspect(v)
        end

      {key, value}
    end)
  end

  # The calling process's track name, made once per process.
  defp own_track do
    case Process.get(@track) do
      nil ->
        name =
          case Process.info(self(), :registered_name) do
            {:registered_name, n} when is_atom(n) and n != [] -> "elixir " <> inspect(n)
            _ -> "elixir " <> inspect(self())
          end

        Process.put(@track, name)
        name

      name ->
        name
    end
  end

  defp set_on(on) do
    if :persistent_term.get(@on, false) != on, do: :persistent_term.put(@on, on)
    :ok
  end

  defp default_name, do: if(node() == :nonode@nohost, do: "", else: Atom.to_string(node()))

  defp option(opts, key, default, valid?, expected) do
    cond do
      not Keyword.keyword?(opts) -> invalid("options must be a keyword list, got #{inspect(opts, limit: 5)}")
      not Keyword.has_key?(opts, key) -> {:ok, default}
      valid?.(opts[key]) -> {:ok, opts[key]}
      true -> invalid("#{key}: must be #{expected}, got #{inspect(opts[key], limit: 5)}")
    end
  end

  defp known(opts) do
    case Keyword.keys(opts) -- [:max_spans, :process_name] do
      [] -> :ok
      unknown -> invalid("unknown options #{inspect(unknown)} (known: :max_spans, :process_name)")
    end
  end

  defp invalid(message), do: {:error, Error.new(:invalid_argument, message)}

  # ------------------------------------------------------------------------------------------------
  # JSON

  @doc """
  The Chrome trace-event JSON document of a trace, or of several (a cluster's, merged): "X"
  (complete) events with `ts` and `dur` in microseconds (three decimals: exact nanoseconds), "M"
  events naming each process and track, and under `otherData` each trace's clocks, node, span count
  and `dropped_spans` (and `notes` and `alignment`, when there are). Each trace is one process
  (`pid`): its OS pid, or
  1, 2, ... when the traces' pids collide (several machines).
  """
  @spec to_json(t() | [t()]) :: iodata()
  def to_json(%__MODULE__{} = trace), do: to_json([trace])

  def to_json(traces) when is_list(traces) do
    pids = Enum.map(traces, & &1.pid)
    pids = if length(Enum.uniq(pids)) == length(pids), do: pids, else: Enum.to_list(1..length(traces)//1)
    numbered = Enum.zip(pids, traces)
    events = Enum.flat_map(numbered, fn {pid, t} -> events(pid, t) end)

    ["{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", Enum.intersperse(events, ",\n"), "\n],\"otherData\":",
     other_data(numbered), "}\n"]
  end

  defp events(pid, t) do
    p = Integer.to_string(pid)

    process = ["{\"ph\":\"M\",\"pid\":", p, ",\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":", string(t.process_name), "}}"]

    tracks =
      for {tid, name} <- Enum.sort(t.tracks) do
        ["{\"ph\":\"M\",\"pid\":", p, ",\"tid\":", Integer.to_string(tid), ",\"name\":\"thread_name\",\"args\":{\"name\":", string(name), "}}"]
      end

    spans =
      for s <- t.spans do
        ["{\"ph\":\"X\",\"pid\":", p, ",\"tid\":", Integer.to_string(s.tid), ",\"name\":", string(s.name), ",\"cat\":",
         string(if(s.category == "", do: "plugboard", else: s.category)), ",\"ts\":", micros(s.start_ns), ",\"dur\":",
         micros(max(s.end_ns - s.start_ns, 0)), args(s.args), "}"]
      end

    [process | tracks] ++ spans
  end

  defp args(args) when map_size(args) == 0, do: []
  defp args(args), do: [",\"args\":", object(args)]

  defp other_data([{pid, t}]), do: trace_data(pid, t)
  defp other_data(numbered), do: ["{\"traces\":[", Enum.map_intersperse(numbered, ",", fn {pid, t} -> trace_data(pid, t) end), "]}"]

  defp trace_data(pid, t) do
    fields = [
      {"clock", "CLOCK_MONOTONIC"}, {"pid", pid}, {"os_pid", t.pid}, {"process_name", t.process_name},
      {"node", Atom.to_string(t.node || :nonode@nohost)}, {"clock_monotonic_ns", t.clock_monotonic_ns},
      {"clock_realtime_ns", t.clock_realtime_ns}, {"started_ns", t.started_ns}, {"stopped_ns", t.stopped_ns},
      {"spans", length(t.spans)}, {"dropped_spans", t.dropped_spans}, {"max_spans", t.max_spans}
    ]

    fields = if Map.get(t, :notes, []) != [], do: fields ++ [{"notes", t.notes}], else: fields
    fields = if t.alignment, do: fields ++ [{"alignment", t.alignment}], else: fields
    object(fields)
  end

  defp object(pairs), do: ["{", Enum.map_intersperse(pairs, ",", fn {k, v} -> [string(key(k)), ":", value(v)] end), "}"]

  defp key(k) when is_binary(k), do: k
  defp key(k) when is_atom(k), do: Atom.to_string(k)
  defp key(k), do: inspect(k)

  defp value(v) when is_integer(v), do: Integer.to_string(v)
  # JSON has no NaN or infinity (the BEAM makes neither): a float as Erlang prints it shortest.
  defp value(v) when is_float(v), do: :erlang.float_to_binary(v, [:short])
  defp value(v) when is_binary(v), do: string(v)
  defp value(nil), do: "null"
  defp value(v) when is_boolean(v), do: Atom.to_string(v)
  defp value(v) when is_atom(v), do: string(Atom.to_string(v))
  defp value(v) when is_map(v), do: object(v)
  defp value(v) when is_list(v), do: ["[", Enum.map_intersperse(v, ",", &value/1), "]"]
  defp value(v), do: string(inspect(v))

  # Nanoseconds as microseconds with three decimals, exact.
  defp micros(ns) when ns < 0, do: ["-", micros(-ns)]

  defp micros(ns) do
    r = rem(ns, 1000)
    [Integer.to_string(div(ns, 1000)), if(r < 10, do: ".00", else: if(r < 100, do: ".0", else: ".")), Integer.to_string(r)]
  end

  @doc false
  # A JSON string: quotes, backslashes and control characters escaped, invalid UTF-8 replaced by U+FFFD.
  def string(s) do
    if plain?(s), do: [?", s, ?"], else: [?", escape(s, []), ?"]
  end

  # ASCII that needs no escape (the usual name); anything else goes through escape/2.
  defp plain?(<<c, rest::binary>>) when c >= 0x20 and c < 0x80 and c != ?" and c != ?\\, do: plain?(rest)
  defp plain?(<<>>), do: true
  defp plain?(_), do: false

  defp escape(<<?", rest::binary>>, acc), do: escape(rest, [acc | "\\\""])
  defp escape(<<?\\, rest::binary>>, acc), do: escape(rest, [acc | "\\\\"])
  defp escape(<<?\n, rest::binary>>, acc), do: escape(rest, [acc | "\\n"])
  defp escape(<<?\r, rest::binary>>, acc), do: escape(rest, [acc | "\\r"])
  defp escape(<<?\t, rest::binary>>, acc), do: escape(rest, [acc | "\\t"])

  defp escape(<<c, rest::binary>>, acc) when c < 0x20,
    do: escape(rest, [acc, "\\u00", String.pad_leading(Integer.to_string(c, 16), 2, "0")])

  defp escape(<<c::utf8, rest::binary>>, acc), do: escape(rest, [acc | <<c::utf8>>])
  defp escape(<<_, rest::binary>>, acc), do: escape(rest, [acc | "\uFFFD"])
  defp escape(<<>>, acc), do: acc

  @doc """
  Writes `to_json/1` of the trace (or traces) to `path`, whole or not at all (a temporary file beside
  it, renamed). An error names the path.
  """
  @spec write(t() | [t()], Path.t()) :: :ok | {:error, Error.t()}
  def write(trace_or_traces, path) do
    path = to_string(path)
    temp = Path.join(Path.dirname(path), ".#{Path.basename(path)}.#{System.unique_integer([:positive])}.tmp")

    with :ok <- file(File.write(temp, to_json(trace_or_traces)), path),
         :ok <- file(File.rename(temp, path), path) do
      :ok
    else
      error ->
        File.rm(temp)
        error
    end
  end

  @doc false
  # Whether a trace could be written at `path` now (its folder exists and takes a new file; an existing
  # file there is not touched): :ok or the error write/2 would give.
  def writable(path) do
    path = to_string(path)
    probe = Path.join(Path.dirname(path), ".#{Path.basename(path)}.#{System.unique_integer([:positive])}.probe")

    cond do
      File.dir?(path) -> {:error, Error.new(:invalid_argument, "cannot write the trace to #{path}: it is a directory")}
      true ->
        with :ok <- file(File.write(probe, ""), path), do: File.rm(probe)
    end
  end

  defp file(:ok, _path), do: :ok

  defp file({:error, reason}, path),
    do: {:error, Error.new(:permission_denied |> code(reason), "cannot write the trace to #{path}: #{:file.format_error(reason)}")}

  defp code(_, :enoent), do: :not_found
  defp code(_, :enospc), do: :resource_exhausted
  defp code(default, _), do: default
end
