# plugboard for Elixir: one release carries several accelerator targets (PJRT plugins) and picks one
# when it boots. One optional Hex dependency (:telemetry); the native part comes precompiled and
# checksummed, or is built by CMake, through the Mix compiler in mix/native_compiler.exs (a compiler
# module must exist before lib/ is compiled). scripts/package.sh at the repository's root makes the
# Hex package (with the library's sources under native/ and checksum.exs).
Code.require_file("mix/native_compiler.exs", __DIR__)
Code.require_file("mix/precompile_task.exs", __DIR__)
# The guides and their groups, shared with plugboard_nx (in the repository only: a Hex package has
# no guides beside it).
if File.exists?(Path.expand("../docs_config.exs", __DIR__)), do: Code.require_file("../docs_config.exs", __DIR__)

defmodule Plugboard.MixProject do
  use Mix.Project

  @version "0.1.0"

  def project do
    [
      app: :plugboard,
      version: @version,
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      compilers: [:plugboard_native] ++ Mix.compilers(),
      elixirc_paths: elixirc_paths(Mix.env()),
      deps: deps(),
      description: "One Elixir release, many accelerators: PJRT plugins chosen when the release boots",
      package: package(),
      docs: docs()
    ]
  end

  def application do
    [extra_applications: [:logger], mod: {Plugboard.Application, []}]
  end

  # :telemetry is optional: Plugboard.Telemetry emits nothing without it. Asked for from Hex when Mix
  # has Hex (every project fetching packages does, and `mix hex.build` puts it in the package's
  # metadata); a path dependency built without Hex (offline, Debian's Elixir) goes without.
  # ex_doc only for `MIX_ENV=docs mix docs` (scripts/docs.sh).
  defp deps do
    if Code.ensure_loaded?(Hex),
      do: [{:telemetry, "~> 1.0", optional: true}, {:ex_doc, "~> 0.40", only: :docs, runtime: false}],
      else: []
  end

  defp docs do
    groups = [
      "Start and run": [Plugboard, Plugboard.Client, Plugboard.Executable, Plugboard.Buffer, Plugboard.Run, Plugboard.Error],
      "Behind Plugboard": [Plugboard.Clients, Plugboard.Compilation, Plugboard.Buffers, Plugboard.Execution, Plugboard.HostCalls],
      "One release, N targets": [Plugboard.Release, Plugboard.Report],
      "Host callbacks": [Plugboard.HostTensor, Plugboard.Call, Plugboard.OrderedCall],
      "Cluster": [Plugboard.Cluster, Plugboard.Cluster.Directory, Plugboard.KeyValueStore],
      "Observing": [Plugboard.Telemetry, Plugboard.Telemetry.Summary, Plugboard.Trace, Plugboard.Trace.Cluster, Plugboard.Trace.Summary]
    ]

    if Code.ensure_loaded?(Plugboard.DocsConfig), do: Plugboard.DocsConfig.docs("Plugboard", groups), else: [main: "Plugboard"]
  end

  # What `mix hex.build` packs: scripts/package.sh adds native/ (the library's sources and the PJRT
  # and XLA FFI headers) and checksum.exs (the precompiled archives' sha256) to a copy of this folder.
  defp package do
    [
      licenses: ["Apache-2.0"],
      links: %{"Source" => "https://github.com/plugboard/plugboard"},
      files: ~w(lib mix c_src native checksum.exs mix.exs README.md)
    ]
  end

  defp elixirc_paths(:test), do: ["lib", "test/support"]
  defp elixirc_paths(_), do: ["lib"]
end
