defmodule Plugboard.Application do
  @moduledoc """
  Starts plugboard and boots a target, from configuration (usually `config/runtime.exs`):

      config :plugboard,
        bundle: "/path/to/bundle",      # default: the bundle a release step embedded (priv/bundle)
        target: "cuda13",               # explicit: that target or the boot fails
        targets: ["cuda13", "cpu"],     # or a preference list, falling back in order
        probes: true, isolate: false,
        boot: true                      # false: never boot at start (call Plugboard.boot/1 yourself)

  What is not configured comes from the environment (`PLUGBOARD_TARGET`, `PLUGBOARD_TARGETS`,
  `PLUGBOARD_PLUGIN_PATH`), and then from the bundle manifest's priorities (accelerators before CPU).

  When nothing names a target (no bundle, no configuration, no environment), plugboard starts without
  one and `Plugboard.client/0` says so. When a target was asked for and none starts, the application
  does not start: the report goes to the log and, in a release, the boot stops with a non-zero exit.
  A preference that fell back logs why each earlier target was skipped.
  """
  use Application
  require Logger

  @impl true
  def start(_type, _args) do
    children = [Plugboard.Printer]

    with {:ok, sup} <- Supervisor.start_link(children, strategy: :one_for_one, name: Plugboard.Supervisor),
         :ok <- boot_from_config() do
      {:ok, sup}
    end
  end

  @impl true
  def stop(_state) do
    :persistent_term.erase({Plugboard, :boot})
    :ok
  end

  @doc false
  def boot_from_config do
    config = Application.get_all_env(:plugboard)
    opts = boot_options(config)

    cond do
      Keyword.get(config, :boot, true) == false -> :ok
      not boot_requested?(opts) -> :ok
      true -> boot(opts)
    end
  end

  # The bundle, target and targets to boot with; the release's embedded bundle by default.
  @doc false
  def boot_options(config) do
    bundle = Keyword.get(config, :bundle) || embedded_bundle()

    [bundle: bundle, target: config[:target], targets: config[:targets], probes: config[:probes], isolate: config[:isolate]]
    |> Enum.reject(fn {_, v} -> is_nil(v) end)
  end

  @doc "The bundle `Plugboard.Release.embed/1` put into the release, or nil."
  @spec embedded_bundle() :: Path.t() | nil
  def embedded_bundle do
    case :code.priv_dir(:plugboard) do
      {:error, _} -> nil
      priv -> (path = Path.join(priv, "bundle")) |> Path.join("plugboard.json") |> File.exists?() |> if(do: path)
    end
  end

  @environment ["PLUGBOARD_TARGET", "PLUGBOARD_TARGETS", "PLUGBOARD_PLUGIN_PATH", "PJRT_NAMES_AND_LIBRARY_PATHS"]
  defp boot_requested?(opts),
    do: opts != [] or Enum.any?(@environment, &(System.get_env(&1) not in [nil, ""]))

  defp boot(opts) do
    case Plugboard.boot(opts) do
      {:ok, client, report} ->
        for line <- Plugboard.Report.skipped(report), do: Logger.warning("plugboard: skipped #{line}")
        Logger.info("plugboard: target #{report.chosen} chosen (#{report.policy}): #{client.platform} #{client.plugin}")
        :persistent_term.put({Plugboard, :boot}, %{client: client, report: report})
        :ok

      {:error, error, report} ->
        Logger.error("plugboard: no target started: #{Exception.message(error)}\n#{report && report.text}")
        {:error, {:plugboard_boot_failed, Exception.message(error)}}
    end
  end
end
