defmodule Compute.MixProject do
  use Mix.Project

  def project do
    [app: :compute, version: "0.1.0", build_path: "../../_build", config_path: "../../config/config.exs",
     deps_path: "../../deps", lockfile: "../../mix.lock", elixir: "~> 1.14",
     deps: [{:plugboard, path: "../../../plugboard"}] ++ nx()]
  end

  # The Nx job (Compute.NxJob) needs Nx 0.13 (so Elixir 1.17 or later): from Hex, or from the folder
  # of Hex packages that PLUGBOARD_HEX_MIRROR names. Without them the release is built without it.
  defp nx do
    cond do
      not Version.match?(System.version(), ">= 1.17.0") ->
        []

      System.get_env("PLUGBOARD_HEX_MIRROR") not in [nil, ""] or Code.ensure_loaded?(Hex) ->
        [{:plugboard_nx, path: "../../../plugboard_nx"}]

      true ->
        []
    end
  end

  def application, do: [extra_applications: [:logger], mod: {Compute.Application, []}]
end
