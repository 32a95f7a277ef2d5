# Nx on plugboard: a defn compiler (Plugboard.Nx) that lowers Nx.Defn.Expr to StableHLO text and runs
# it on the target the :plugboard application booted, and an Nx backend (Plugboard.Nx.Backend) whose
# tensors live in plugboard buffers.
#
# Nx comes from Hex (~> 0.13; needs Elixir 1.17 or later) or, where Hex cannot be reached, from a
# folder of Hex packages as sources: PLUGBOARD_HEX_MIRROR=DIR (DIR/nx with its neighbours complex/
# and telemetry/, and for the tests axon/ and polaris/, as ../shared/vendor/hex-nx0.13 lays them
# out; see the README).
defmodule PlugboardNx.MixProject do
  use Mix.Project

  def project do
    [
      app: :plugboard_nx,
      version: "0.1.0",
      elixir: "~> 1.17",
      start_permanent: Mix.env() == :prod,
      elixirc_paths: elixirc_paths(Mix.env()),
      deps: deps()
    ]
  end

  def application do
    [extra_applications: [:logger], mod: {Plugboard.Nx.Application, []}]
  end

  defp elixirc_paths(:test), do: ["lib", "test/support"]
  defp elixirc_paths(_), do: ["lib"]

  # Axon and Polaris only for the tests (test/axon_test.exs: Nx software nobody here wrote, on
  # plugboard).
  defp deps do
    [
      {:plugboard, path: "../plugboard"},
      hex_package(:nx, "~> 0.13", []),
      # Test-only and not started: :plugboard_nx's own .app must not list them (Nx's suite, run by
      # test/nx_suite/run.sh, starts :plugboard_nx from its ebin without Axon on the path).
      hex_package(:axon, "~> 0.8", only: :test, runtime: false),
      hex_package(:polaris, "~> 0.1", only: :test, runtime: false)
    ]
  end

  defp hex_package(name, requirement, opts) do
    case System.get_env("PLUGBOARD_HEX_MIRROR") do
      dir when dir in [nil, ""] ->
        {name, requirement, opts}

      dir ->
        path = Path.expand(Atom.to_string(name), dir)
        File.dir?(path) || Mix.raise("PLUGBOARD_HEX_MIRROR=#{dir}: no #{name} folder there (#{path})")
        {name, [path: path] ++ opts}
    end
  end
end
