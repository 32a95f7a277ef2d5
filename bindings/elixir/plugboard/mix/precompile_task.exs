defmodule Mix.Tasks.Plugboard.Precompile do
  @shortdoc "Packs the compiled native part as a precompiled archive and records its sha256"
  @moduledoc """
  For whoever publishes the package: compiles the native part (from `PLUGBOARD_PREFIX` or the
  sources, never from a precompiled archive), packs `priv/lib` and `priv/bin` into
  `OUT_DIR/plugboard-nif-NIF-TARGET-VERSION.tar.gz` and records its sha256 in the project's
  `checksum.exs` (kept: the entries for other NIF versions and targets, built elsewhere).

      mix plugboard.precompile OUT_DIR

  Upload the archive where the URL template (`PlugboardNative.Precompiled`) points, then
  `mix hex.build`: the package carries `checksum.exs`.
  """
  use Mix.Task

  alias PlugboardNative.Precompiled

  @impl true
  def run([out_dir]) do
    if System.get_env("PLUGBOARD_PREFIX") in [nil, ""], do: System.put_env("PLUGBOARD_BUILD", "true")
    Mix.Task.run("compile.plugboard_native", [])

    version = Mix.Project.config()[:version]
    priv = Path.join(Mix.Project.app_path(), "priv")
    {path, sha256} = Precompiled.pack(priv, out_dir, version)

    checksum_path = Path.join(File.cwd!(), Precompiled.checksum_file())

    checksums =
      case Precompiled.read_checksums(File.cwd!()) do
        {:ok, map} -> map
        :none -> %{}
        {:error, message} -> Mix.raise(message)
      end
      |> Map.put(Path.basename(path), "sha256:" <> sha256)

    File.write!(checksum_path, inspect(checksums, pretty: true, limit: :infinity) <> "\n")
    Mix.shell().info("#{path}\nsha256:#{sha256} (recorded in #{checksum_path})")
  end

  def run(_), do: Mix.raise("usage: mix plugboard.precompile OUT_DIR")
end
