# The Nx side of the sample's apps (compute's Nx jobs and serving, web's cluster client): Nx 0.13 and
# plugboard_nx need Elixir 1.17 or later and come from Hex (plain requirements; where the public Hex
# repository cannot be reached, scripts/hex_registry.sh serves a local one). Without them (an older
# Elixir, or no Hex) the apps are built without their Nx parts. Required by apps/*/mix.exs.
defmodule Sample.NxDeps do
  @doc "`{:plugboard_nx, ...}` and the Hex packages `hex` names (e.g. [axon: \"~> 0.8\"]), or [] when Nx cannot be had."
  def deps(hex) do
    if Version.match?(System.version(), ">= 1.17.0") and Code.ensure_loaded?(Hex),
      do: [{:plugboard_nx, path: Path.expand("../plugboard_nx", __DIR__)} | hex],
      else: []
  end
end
