defmodule Mix.Tasks.Plugboard.Precompile do
  @shortdoc "Packs the native part, built here, as a precompiled archive and records its sha256"
  @moduledoc """
  For whoever publishes the package: builds the native part (from `PLUGBOARD_PREFIX` or the sources,
  never from a precompiled archive), packs exactly the files it installed into `priv/lib` and
  `priv/bin` as `OUT_DIR/plugboard-nif-NIF-TARGET-VERSION.tar.gz`, and records its sha256 in the
  project's `checksum.exs` (kept: the entries for other NIF versions and targets, built elsewhere).

      mix plugboard.precompile OUT_DIR

  Upload the archive where the URL template (`PlugboardNative.Precompiled`) points, then
  `mix hex.build`: the package carries `checksum.exs`.
  """
  use Mix.Task

  alias PlugboardNative.Precompiled

  @impl true
  def run([out_dir]) do
    checksums =
      case Precompiled.read_checksums(File.cwd!()) do
        {:ok, map} -> map
        :none -> %{}
        {:error, message} -> Mix.raise(message)
      end

    files = Mix.Tasks.Compile.PlugboardNative.build!()
    version = Mix.Project.config()[:version]
    priv = Path.join(Mix.Project.app_path(), "priv")
    {path, sha256} = Precompiled.pack(priv, files, out_dir, version)

    checksum_path = Path.join(File.cwd!(), Precompiled.checksum_file())
    entries = Map.new(Map.put(checksums, Path.basename(path), sha256), fn {file, hex} -> {file, "sha256:" <> hex} end)
    File.write!(checksum_path, inspect(entries, pretty: true, limit: :infinity) <> "\n")
    Mix.shell().info("#{path}\nsha256:#{sha256} (recorded in #{checksum_path})")
  end

  def run(_), do: Mix.raise("usage: mix plugboard.precompile OUT_DIR")
end
