defmodule Plugboard.Application do
  @moduledoc """
  Starts plugboard and boots a target, from configuration (usually `config/runtime.exs`):

      config :plugboard,
        bundle: "/path/to/bundle",      # default: the bundle a release step embedded (priv/bundle)
        target: "cuda13",               # explicit: that target or the boot fails
        targets: ["cuda13", "cpu"],     # or a preference list, falling back in order
        probes: true, isolate: false,
        use_environment: false,         # default false when booting from a bundle (see below)
        bundle_required: true,          # false: a release whose embedded bundle is missing boots without it
        boot: true,                     # false: never boot at start (call Plugboard.boot/1 yourself)
        telemetry: true,                # false: emit no :telemetry events (Plugboard.Telemetry)
        trace: "boot.trace.json"        # or [path: ..., max_spans: ...]: a trace from before the boot
                                        # to the application's stop (Plugboard.Trace)

  **A release is its bundle.** Booting from a bundle (the embedded one or `bundle:`), only the
  bundle's own targets are candidates: plugins named by `PLUGBOARD_PLUGIN_PATH` or
  `PJRT_NAMES_AND_LIBRARY_PATHS` on the host are not in the bundle's hashed manifest and are not
  considered, unless `use_environment: true` (then they follow the bundle's targets, and the report
  gives them `origin: :environment`; choosing one logs a warning). `PLUGBOARD_TARGET` and
  `PLUGBOARD_TARGETS` stay honoured either way when `target:`/`targets:` are not configured: they are
  the operator's knob to choose among the bundle's own targets and add no candidate (with
  `use_environment: false` the report's policy and the log name the variable; `PLUGBOARD_PROBES`, `PLUGBOARD_ISOLATE` are then not read: use `probes:`/`isolate:`).
  With no bundle at all, `use_environment` defaults to true: the environment is the only source.

  **A release without its bundle does not boot.** `Plugboard.Release.embed/1` writes
  `priv/bundle.required` into the release before it builds the bundle. When that file is there and
  `priv/bundle/plugboard.json` is not (a failed or interrupted release build: `mix release
  --overwrite` recopies the application, old bundle included, before the step runs), the application
  does not start: the reason goes to the log and `bin/REL start` / `eval` exit non-zero. Set
  `bundle_required: false` (or `boot: false`, or `bundle:` elsewhere) to boot without it. A bundle
  that is there but unreadable fails the boot the same way.

  **A native part that cannot load stops the start.** When the NIF cannot be loaded on this host
  (a library it needs is missing: the native part was built for another machine), the application
  does not start and the log says so in one line, naming every missing library and what to do;
  `Plugboard.client/0` and the other calls return that error.

  When nothing names a target (no bundle, no configuration, no environment), plugboard starts without
  one and `Plugboard.client/0` says so. When a target was asked for and none starts, the application
  does not start: the report goes to the log and, in a release, the boot stops with a non-zero exit.
  A preference that fell back logs why each earlier target was skipped; a chosen target whose
  precompiled programs were compiled for another processor logs why they will compile again
  (`Plugboard.Report.Candidate`'s `precompiled_mismatch`).
  """
  use Application
  require Logger

  @impl true
  def start(_type, _args) do
    # A NIF that did not load (a library it needs is missing here) stops the start before anything
    # else, with one line that names what is missing and what to do (Plugboard.Native.load_failure/2).
    case Plugboard.Native.load_error() do
      nil -> start_supervised()
      %Plugboard.Error{message: message} ->
        Logger.error("plugboard: " <> safe(message))
        {:error, {:plugboard_nif_not_loaded, message}}
    end
  end

  defp start_supervised do
    # Tracing first (`trace:`), so that the boot's stages are in the trace; stopped again when the
    # start fails.
    with :ok <- start_trace(Application.get_env(:plugboard, :trace)) do
      case start_children() do
        {:ok, _} = started -> started
        error ->
          stop_trace()
          error
      end
    end
  end

  defp start_children do
    # The cluster's :pg directory on every node. The connector (only when peers are configured)
    # starts after the boot: a node whose boot failed never joins the cluster.
    # Telemetry first: the summary attaches before the boot emits its event.
    Plugboard.Telemetry.setup()
    # Plugboard.KeyValueStore.Supervisor holds the key-value store's cluster leader, when this node
    # started it (Plugboard.KeyValueStore); Plugboard.KeyValueStore.Registry names this node's store
    # handlers (what tells a store's pid from another process's).
    children = [Plugboard.Printer, Plugboard.Cluster, Plugboard.Telemetry.Summary,
                {DynamicSupervisor, name: Plugboard.KeyValueStore.Supervisor, strategy: :one_for_one},
                {Registry, keys: :unique, name: Plugboard.KeyValueStore.Registry}]

    with {:ok, connector} <- connector(Application.get_env(:plugboard, :cluster)),
         {:ok, sup} <- Supervisor.start_link(children, strategy: :one_for_one, name: Plugboard.Supervisor) do
      case with(:ok <- boot_from_config(), do: start_connector(sup, connector)) do
        {:ok, _} ->
          {:ok, sup}

        error ->
          # Stopped now: left to the exit of the application master (after this answer), it could
          # still hold its name when the application is started again (`{:already_started, pid}`).
          Supervisor.stop(sup)
          error
      end
    end
  end

  # A malformed `cluster:` configuration stops the start with the reason in the log.
  defp connector(config) do
    {:ok, Plugboard.Cluster.Connector.child(config)}
  rescue
    e in ArgumentError ->
      Logger.error("plugboard: " <> safe(Exception.message(e)))
      {:error, {:plugboard_cluster_config, Exception.message(e)}}
  end

  defp start_connector(_sup, nil), do: {:ok, nil}
  defp start_connector(sup, child), do: Supervisor.start_child(sup, child)

  # The VM exits soon after the last application stops: clients, executables and buffers that the
  # stopped applications dropped are still being torn down on the NIF's threads, and a plugin whose
  # objects are destroyed while exit() tears down its own statics can crash (the 0.106 plugin aborted
  # in ~ExecutionEngine at 2 of 24 stops). :plugboard stops after every application that uses it, so
  # waiting here for those teardowns (5 s at most) lets them finish first.
  @teardown_wait_ms 5_000

  @impl true
  def stop(_state) do
    # The booted client's term is let go of here, so that the client's teardown is among those
    # awaited: erasing the term alone frees it only once every process has been scanned for it, after
    # the wait. Executables and buffers made from it hold the native client too: one still held by a
    # live process keeps the client past the wait (docs/release.md says so).
    case :persistent_term.get({Plugboard, :boot}, nil) do
      %{client: %Plugboard.Client{} = client} -> Plugboard.close(client)
      _ -> :ok
    end

    :persistent_term.erase({Plugboard, :boot})

    case Plugboard.Native.await_teardowns(@teardown_wait_ms) do
      :ok -> :ok
      :timeout -> Logger.warning("plugboard: native objects still being torn down after #{@teardown_wait_ms} ms at stop")
    end

    stop_trace()
    :ok
  end

  @trace {__MODULE__, :trace}

  # `config :plugboard, trace: path | [path: path, max_spans: n]`: the path must take a file now (the
  # start fails naming it otherwise); the trace is written there at stop.
  defp start_trace(nil), do: :ok

  defp start_trace(config) do
    with {:ok, path, opts} <- trace_config(config),
         :ok <- Plugboard.Trace.writable(path),
         :ok <- Plugboard.Trace.start(opts) do
      :persistent_term.put(@trace, path)
      :ok
    else
      {:error, %Plugboard.Error{message: message}} ->
        Logger.error("plugboard: trace: " <> safe(message))
        {:error, {:plugboard_trace_config, message}}
    end
  end

  @doc false
  # The trace configuration as {:ok, path, Plugboard.Trace.start/1 options} or an error.
  def trace_config(path) when is_binary(path), do: {:ok, path, []}

  def trace_config(config) do
    with true <- Keyword.keyword?(config),
         path when is_binary(path) <- Keyword.get(config, :path),
         [] <- Keyword.keys(config) -- [:path, :max_spans] do
      {:ok, path, Keyword.take(config, [:max_spans])}
    else
      _ -> {:error, Plugboard.Error.new(:invalid_argument, "config :plugboard, trace: must be a path or [path: path, max_spans: n], got #{inspect(config, limit: 5)}")}
    end
  end

  # The configured trace, stopped and written to its path (an error names the path, in the log).
  defp stop_trace do
    case :persistent_term.get(@trace, nil) do
      nil -> :ok
      path ->
        :persistent_term.erase(@trace)

        with {:ok, trace} <- Plugboard.Trace.stop(),
             :ok <- Plugboard.Trace.write(trace, path) do
          :ok
        else
          {:error, %Plugboard.Error{message: message}} ->
            Logger.error("plugboard: trace configured for #{safe(path)} not written: " <> safe(message))
        end
    end
  end

  @doc false
  def boot_from_config do
    case boot_plan(Application.get_all_env(:plugboard), priv_dir(), &System.get_env/1) do
      :skip -> :ok
      {:boot, opts, from_env} -> boot(opts, from_env)
      {:error, reason} ->
        Logger.error("plugboard: " <> safe(reason))
        {:error, {:plugboard_bundle_missing, reason}}
    end
  end

  @environment ["PLUGBOARD_TARGET", "PLUGBOARD_TARGETS", "PLUGBOARD_PLUGIN_PATH", "PJRT_NAMES_AND_LIBRARY_PATHS"]
  @bundle_marker "bundle.required"

  # Every value from the environment, the configuration, a manifest or a plugin goes into a log line
  # through this: one value per line, control characters spelled out (docs/hostile-input.md's promise).
  defp safe(text), do: Plugboard.Report.terminal_safe(text)

  @doc false
  # The file Plugboard.Release.embed/1 writes into priv/ before it builds the bundle.
  def bundle_marker, do: @bundle_marker

  @doc false
  # What the start does, from the configuration, the application's priv folder (nil: none) and the
  # environment (a getter): :skip, {:boot, opts, target_from_env} or {:error, reason}.
  def boot_plan(config, priv, getenv) do
    embedded = priv && Path.join(priv, "bundle")
    marker = priv && Path.join(priv, @bundle_marker)
    present? = embedded != nil and File.exists?(Path.join(embedded, "plugboard.json"))
    expected? = marker != nil and File.exists?(marker)
    required? = expected? and Keyword.get(config, :bundle_required, true) != false

    bundle =
      cond do
        config[:bundle] -> config[:bundle]
        present? -> embedded
        true -> nil
      end

    cond do
      Keyword.get(config, :boot, true) == false ->
        :skip

      bundle == nil and required? ->
        {:error,
         "this release expects its bundle at #{embedded} (#{marker} says so: Plugboard.Release.embed/1 wrote it), " <>
           "but #{Path.join(embedded, "plugboard.json")} is missing: the release build failed or was interrupted; " <>
           "build the release again, or set `config :plugboard, bundle_required: false` to boot without it"}

      true ->
        use_env = Keyword.get(config, :use_environment, bundle == nil)
        {policy, from_env} = policy(config, use_env, getenv)

        source = from_env && from_env |> String.split("=", parts: 2) |> hd()

        opts =
          Enum.reject([bundle: bundle, probes: config[:probes], isolate: config[:isolate], use_environment: use_env,
                       policy_source: source] ++ policy,
                      fn {_, v} -> is_nil(v) end)

        if bundle != nil or policy != [] or (use_env and Enum.any?(@environment, &(getenv.(&1) not in [nil, ""]))),
          do: {:boot, opts, from_env},
          else: :skip
    end
  end

  # target:/targets: from the configuration; else, when the environment is not read by the boot
  # itself, PLUGBOARD_TARGET / PLUGBOARD_TARGETS (an operator's choice among the bundle's targets).
  defp policy(config, use_env, getenv) do
    cond do
      config[:target] || config[:targets] -> {Enum.reject([target: config[:target], targets: config[:targets]], &is_nil(elem(&1, 1))), nil}
      use_env -> {[], nil}
      (t = getenv.("PLUGBOARD_TARGET")) not in [nil, ""] -> {[target: t], "PLUGBOARD_TARGET=#{t}"}
      (ts = getenv.("PLUGBOARD_TARGETS")) not in [nil, ""] ->
        {[targets: ts |> String.split(",", trim: true) |> Enum.map(&String.trim/1)], "PLUGBOARD_TARGETS=#{ts}"}
      true -> {[], nil}
    end
  end

  # The bundle, target and targets to boot with; the release's embedded bundle by default.
  @doc false
  def boot_options(config) do
    case boot_plan(config, priv_dir(), &System.get_env/1) do
      {:boot, opts, _} -> opts
      _ -> []
    end
  end

  defp priv_dir do
    case :code.priv_dir(:plugboard) do
      {:error, _} -> nil
      priv -> to_string(priv)
    end
  end

  @doc "The bundle `Plugboard.Release.embed/1` put into the release, or nil."
  @spec embedded_bundle() :: Path.t() | nil
  def embedded_bundle do
    case priv_dir() do
      nil -> nil
      priv -> (path = Path.join(priv, "bundle")) |> Path.join("plugboard.json") |> File.exists?() |> if(do: path)
    end
  end

  defp boot(opts, from_env) do
    case Plugboard.boot(opts) do
      {:ok, client, report} ->
        for line <- Plugboard.Report.skipped(report), do: Logger.warning("plugboard: skipped #{safe(line)}")
        via = if from_env, do: ", #{safe(from_env)}", else: ""
        Logger.info("plugboard: target #{safe(report.chosen)} chosen (#{safe(report.policy)}#{via}): #{safe(client.platform)} #{safe(client.plugin)}")
        chosen = Plugboard.Report.candidate(report, report.chosen)

        if chosen && chosen.origin == :environment,
          do: Logger.warning("plugboard: target #{safe(chosen.name)} comes from the environment (#{safe(chosen.source)}), not from a bundle (use_environment: true)")

        if chosen && chosen.precompiled_mismatch, do: Logger.warning("plugboard: " <> safe(chosen.precompiled_mismatch))
        :persistent_term.put({Plugboard, :boot}, %{client: client, report: report})
        :ok

      {:error, error, report} ->
        via = if from_env, do: " (#{safe(from_env)})", else: ""
        # The report's text has its own lines; the C++ report spelled out what is in them.
        Logger.error("plugboard: no target started#{via}: #{safe(Exception.message(error))}\n#{report && report.text}")
        {:error, {:plugboard_boot_failed, Exception.message(error)}}
    end
  end
end
