Code.require_file("../../nx_deps.exs", __DIR__)

defmodule Compute.MixProject do
  use Mix.Project

  def project do
    [app: :compute, version: "0.1.0", build_path: "../../_build", config_path: "../../config/config.exs",
     deps_path: "../../deps", lockfile: "../../mix.lock", elixir: "~> 1.14",
     deps: [{:plugboard, path: "../../../plugboard"}] ++ nx()]
  end

  # The Nx jobs and the serving (Compute.NxJob, Compute.AxonJob, Compute.Model) need Nx 0.13, Axon 0.8
  # and plugboard_nx: ../../nx_deps.exs says where they come from.
  defp nx, do: Sample.NxDeps.deps(axon: "~> 0.8")

  def application, do: [extra_applications: [:logger], mod: {Compute.Application, []}]
end
