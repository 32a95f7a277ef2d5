# plugboard for Elixir: one release carries several accelerator targets (PJRT plugins) and picks one
# when it boots. One optional Hex dependency (:telemetry, see deps/0); the native part is built by CMake
# through the Mix compiler in mix/native_compiler.exs (a compiler module must exist before lib/ is compiled).
Code.require_file("mix/native_compiler.exs", __DIR__)

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
      docs: [main: "Plugboard"]
    ]
  end

  def application do
    [extra_applications: [:logger], mod: {Plugboard.Application, []}]
  end

  # :telemetry, optional (Plugboard.Telemetry emits nothing without it): from the folder of Hex
  # packages PLUGBOARD_HEX_MIRROR names (its telemetry/), else from Hex when Hex is loaded, else none.
  defp deps do
    mirror = System.get_env("PLUGBOARD_HEX_MIRROR")

    cond do
      mirror not in [nil, ""] and File.dir?(Path.expand("telemetry", mirror)) ->
        [{:telemetry, path: Path.expand("telemetry", mirror), optional: true}]

      Code.ensure_loaded?(Hex) ->
        [{:telemetry, "~> 1.0", optional: true}]

      true ->
        []
    end
  end

  defp elixirc_paths(:test), do: ["lib", "test/support"]
  defp elixirc_paths(_), do: ["lib"]
end
