# Nx on plugboard: a defn compiler (Plugboard.Nx) that lowers Nx.Defn.Expr to StableHLO text and runs
# it on the target the :plugboard application booted, and an Nx backend (Plugboard.Nx.Backend) whose
# tensors live in plugboard buffers.
#
# Nx and the test-only Axon and Polaris come from Hex (Nx ~> 0.13 or ~> 1.0, which need Elixir 1.17 or
# later; where the public Hex repository cannot be reached, scripts/hex_registry.sh serves a local one).
# :plugboard is the folder beside this one in the repository, and the Hex package everywhere else (a Hex
# package, or a copy of this folder alone, as scripts/package.sh builds the package from).
#
# PLUGBOARD_NX_PATH=/path/to/nx (an Nx source folder, such as a checkout's nx/) builds against that Nx
# instead: its neighbours complex/ and telemetry/ (and axon/ and polaris/ for the tests), where present,
# come from the same parent folder, and the lock is mix.nx-path.lock, so the Hex build's mix.lock stays
# as it is. Plugboard.Nx decides what to lower by what that Nx provides (Plugboard.Nx.Features), never by
# its version.
# The guides and their groups, shared with plugboard (in the repository only).
if File.exists?(Path.expand("../docs_config.exs", __DIR__)), do: Code.require_file("../docs_config.exs", __DIR__)

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
      lockfile: if(nx_path(), do: "mix.nx-path.lock", else: "mix.lock"),
      docs: docs(),
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
  # ex_doc only for `MIX_ENV=docs mix docs` (scripts/docs.sh).
  defp deps do
    [plugboard() | nx_deps(nx_path())] ++ [{:ex_doc, "~> 0.40", only: :docs, runtime: false}]
  end

  @nx_requirement "~> 0.13 or ~> 1.0"

  defp nx_deps(nil) do
    [
      {:nx, @nx_requirement},
      # Test-only and not started: :plugboard_nx's own .app must not list them (Nx's suite, run by
      # test/nx_suite/run.sh, starts :plugboard_nx from its ebin without Axon on the path).
      {:axon, "~> 0.8", only: :test, runtime: false},
      {:polaris, "~> 0.1", only: :test, runtime: false}
    ]
  end

  # Nx from a source folder: it and its neighbours override what other dependencies ask of Hex
  # (:plugboard's optional telemetry, Axon's and Polaris' nx). Axon and Polaris from Hex would ask for
  # the Hex Nx, so they come from the same folder or not at all (test/axon_test.exs is then skipped).
  defp nx_deps(nx) do
    parent = Path.dirname(nx)
    beside = fn name -> Path.join(parent, name) end

    unless File.exists?(Path.join(nx, "mix.exs")) do
      Mix.raise("PLUGBOARD_NX_PATH=#{nx}: no mix.exs there (give the folder of Nx's mix.exs, such as a checkout's nx/)")
    end

    present? = fn name -> File.exists?(Path.join(beside.(name), "mix.exs")) end

    # A checkout of Nx's repository has no complex/ or telemetry/ beside nx/: Nx's own requirements
    # then take them from Hex.
    required = for name <- ~w(complex telemetry), present?.(name), do: {String.to_atom(name), path: beside.(name), override: true}

    tests =
      for name <- ~w(axon polaris), present?.(name),
          do: {String.to_atom(name), path: beside.(name), only: :test, runtime: false, override: true}

    [{:nx, @nx_requirement, path: nx, override: true} | required ++ tests]
  end

  # Never in a Hex package (hex_metadata.config beside mix.exs): a user's environment does not change
  # what a dependency asks for.
  defp nx_path do
    case System.get_env("PLUGBOARD_NX_PATH") do
      nil -> nil
      "" -> nil
      path -> if File.exists?(Path.expand("hex_metadata.config", __DIR__)), do: nil, else: Path.expand(path)
    end
  end

  # In the repository, ../plugboard; in a Hex package (hex_metadata.config beside mix.exs) or a copy of
  # this folder alone, the Hex package.
  defp plugboard do
    sibling = Path.expand("../plugboard", __DIR__)

    if File.exists?(Path.join(sibling, "mix.exs")) and not File.exists?(Path.expand("hex_metadata.config", __DIR__)),
      do: {:plugboard, path: sibling},
      else: {:plugboard, "~> 0.1"}
  end

  defp docs do
    groups = [
      "Compiler and backend": [Plugboard.Nx, Plugboard.Nx.Backend],
      "Serving across nodes": [Plugboard.Serving]
    ]

    if Code.ensure_loaded?(Plugboard.DocsConfig), do: Plugboard.DocsConfig.docs("Plugboard.Nx", groups), else: [main: "Plugboard.Nx"]
  end
end
