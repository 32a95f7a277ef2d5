# The Nx side of the sample's apps (compute's Nx jobs and serving, web's cluster client): Nx 0.13 and
# plugboard_nx need Elixir 1.17 or later and come from Hex (plain requirements; where the public Hex
# repository cannot be reached, scripts/hex_registry.sh serves a local one). Without them (an older
# Elixir, or no Hex) the apps are built without their Nx parts. Required by apps/*/mix.exs.
#
# PLUGBOARD_NX_PATH=/path/to/nx (an Nx source folder, such as Nx main's nx/) builds against that Nx
# instead, as plugboard_nx's own mix.exs does: Nx, its neighbours complex/ and telemetry/, and every
# package `hex` names (axon, and polaris with it) come from the same parent folder, overriding what
# the other dependencies ask of Hex; Hex is then not needed.
defmodule Sample.NxDeps do
  @doc "`{:plugboard_nx, ...}` and the packages `hex` names (e.g. [axon: \"~> 0.8\"]), or [] when Nx cannot be had."
  def deps(hex) do
    cond do
      not Version.match?(System.version(), ">= 1.17.0") -> []
      nx = nx_path() -> [plugboard_nx() | from_source(nx, hex)]
      Code.ensure_loaded?(Hex) -> [plugboard_nx() | hex]
      true -> []
    end
  end

  defp plugboard_nx, do: {:plugboard_nx, path: Path.expand("../plugboard_nx", __DIR__)}

  defp from_source(nx, hex) do
    parent = Path.dirname(nx)
    # Axon asks for Polaris: both from the folder, or Polaris from Hex would ask for the Hex Nx.
    names = [:complex, :telemetry] ++ Keyword.keys(hex) ++ if(Keyword.has_key?(hex, :axon), do: [:polaris], else: [])

    for name <- Enum.uniq(names), reduce: [{:nx, path: nx, override: true}] do
      acc ->
        dir = Path.join(parent, Atom.to_string(name))
        unless File.exists?(Path.join(dir, "mix.exs")), do: Mix.raise("PLUGBOARD_NX_PATH=#{nx}: no #{name}/mix.exs beside it (#{dir})")
        acc ++ [{name, path: dir, override: true}]
    end
  end

  defp nx_path do
    case System.get_env("PLUGBOARD_NX_PATH") do
      nil -> nil
      "" -> nil
      path ->
        path = Path.expand(path)
        unless File.exists?(Path.join(path, "mix.exs")), do: Mix.raise("PLUGBOARD_NX_PATH=#{path}: no mix.exs there (give the folder of Nx's mix.exs, such as a checkout's nx/)")
        path
    end
  end
end
