# Nx on plugboard: a defn compiler (Plugboard.Nx) that lowers Nx.Defn.Expr to StableHLO text and runs
# it on the target the :plugboard application booted, and an Nx backend (Plugboard.Nx.Backend) whose
# tensors live in plugboard buffers.
#
# Nx and the test-only Axon and Polaris come from Hex (Nx ~> 0.13 needs Elixir 1.17 or later; where
# the public Hex repository cannot be reached, scripts/hex_registry.sh serves a local one). :plugboard is
# the folder beside this one in the repository, and the Hex package everywhere else (a Hex package, or
# a copy of this folder alone, as scripts/package.sh builds the package from).
defmodule PlugboardNx.MixProject do
  use Mix.Project

  def project do
    [
      app: :plugboard_nx,
      version: "0.1.0",
      elixir: "~> 1.17",
      start_permanent: Mix.env() == :prod,
      elixirc_paths: elixirc_paths(Mix.env()),
      deps: deps(),
      description: "Nx on plugboard: a defn compiler and a backend over the accelerator a release booted",
      package: [
        licenses: ["Apache-2.0"],
        links: %{"Source" => "https://github.com/plugboard/plugboard"},
        files: ~w(lib mix.exs README.md)
      ]
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
      plugboard(),
      {:nx, "~> 0.13"},
      # Test-only and not started: :plugboard_nx's own .app must not list them (Nx's suite, run by
      # test/nx_suite/run.sh, starts :plugboard_nx from its ebin without Axon on the path).
      {:axon, "~> 0.8", only: :test, runtime: false},
      {:polaris, "~> 0.1", only: :test, runtime: false}
    ]
  end

  # In the repository, ../plugboard; in a Hex package (hex_metadata.config beside mix.exs) or a copy of
  # this folder alone, the Hex package.
  defp plugboard do
    sibling = Path.expand("../plugboard", __DIR__)

    if File.exists?(Path.join(sibling, "mix.exs")) and not File.exists?(Path.expand("hex_metadata.config", __DIR__)),
      do: {:plugboard, path: sibling},
      else: {:plugboard, "~> 0.1"}
  end
end
