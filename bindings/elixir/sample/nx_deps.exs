# The Nx side of the sample's apps (compute's Nx jobs and serving, web's cluster client): Nx 0.13 and
# plugboard_nx need Elixir 1.17 or later; they come from Hex, or from the folder of Hex packages that
# PLUGBOARD_HEX_MIRROR names (its nx/, axon/, polaris/ and their neighbours). Without them the apps
# are built without their Nx parts. Required by apps/*/mix.exs.
defmodule Sample.NxDeps do
  @doc "`{:plugboard_nx, ...}` and the Hex packages `hex` names (e.g. [axon: \"~> 0.8\"]), or [] when Nx cannot be had."
  def deps(hex) do
    mirror = System.get_env("PLUGBOARD_HEX_MIRROR")
    plugboard_nx = {:plugboard_nx, path: Path.expand("../plugboard_nx", __DIR__)}

    cond do
      not Version.match?(System.version(), ">= 1.17.0") -> []
      mirror not in [nil, ""] -> [plugboard_nx | for({name, _} <- hex, do: {name, path: Path.expand(to_string(name), mirror)})]
      Code.ensure_loaded?(Hex) -> [plugboard_nx | hex]
      true -> []
    end
  end
end
