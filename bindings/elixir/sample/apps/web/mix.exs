Code.require_file("../../nx_deps.exs", __DIR__)

defmodule Web.MixProject do
  use Mix.Project

  def project do
    [app: :web, version: "0.1.0", build_path: "../../_build", config_path: "../../config/config.exs",
     deps_path: "../../deps", lockfile: "../../mix.lock", elixir: "~> 1.14",
     # The cluster client (Web.Cluster: Plugboard.Serving.run/3 to the compute nodes) when Nx can be had.
     deps: Sample.NxDeps.deps([])]
  end

  def application, do: [extra_applications: [:logger], mod: {Web.Application, []}]
end
