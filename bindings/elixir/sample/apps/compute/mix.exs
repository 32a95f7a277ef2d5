defmodule Compute.MixProject do
  use Mix.Project

  def project do
    [app: :compute, version: "0.1.0", build_path: "../../_build", config_path: "../../config/config.exs",
     deps_path: "../../deps", lockfile: "../../mix.lock", elixir: "~> 1.14",
     deps: [{:plugboard, path: "../../../plugboard"}] ++ nx()]
  end

  # The Nx jobs (Compute.NxJob, Compute.AxonJob) need Nx 0.13 and Axon 0.8 (so Elixir 1.17 or later):
  # from Hex, or from the folder of Hex packages that PLUGBOARD_HEX_MIRROR names (its nx/, axon/,
  # polaris/ and their neighbours). Without them the release is built without the jobs.
  defp nx do
    mirror = System.get_env("PLUGBOARD_HEX_MIRROR")

    cond do
      not Version.match?(System.version(), ">= 1.17.0") ->
        []

      mirror not in [nil, ""] ->
        [{:plugboard_nx, path: "../../../plugboard_nx"}, {:axon, path: Path.expand("axon", mirror)}]

      Code.ensure_loaded?(Hex) ->
        [{:plugboard_nx, path: "../../../plugboard_nx"}, {:axon, "~> 0.8"}]

      true ->
        []
    end
  end

  def application, do: [extra_applications: [:logger], mod: {Compute.Application, []}]
end
