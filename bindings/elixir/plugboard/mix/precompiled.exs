defmodule PlugboardNative.Precompiled do
  @moduledoc """
  The precompiled native part: one archive per NIF version and target triple, named as
  `cc_precompiler` names them,

      plugboard-nif-NIF_VERSION-TARGET-VERSION.tar.gz     e.g. plugboard-nif-2.16-x86_64-linux-gnu-0.1.0.tar.gz

  holding what `priv/` needs (`lib/plugboard_nif.so`, `lib/libplugboard.so.0`, the device bridges,
  `bin/plugboard`, `bin/plugboard-isolate`), with the sha256 of every archive in the package's
  `checksum.exs` (a map, file name => "sha256:HEX").

  Where it is fetched from: `PLUGBOARD_PRECOMPILED_URL`, else `config :plugboard, precompiled_url:`
  (in the project's `config/config.exs`), else `@default_url`. The URL is a template: `{filename}`
  becomes the archive's name, `{version}` plugboard's version. A downloaded archive is kept in
  `$XDG_CACHE_HOME/plugboard/precompiled/` (`~/.cache` by default) and checked against `checksum.exs`
  every time it is used: an archive whose sha256 differs is refused, named, and removed from the cache.
  """

  @default_url "https://github.com/plugboard/plugboard/releases/download/v{version}/{filename}"
  @checksum_file "checksum.exs"

  def checksum_file, do: @checksum_file

  @doc "The archive name for this VM (or the given NIF version and target)."
  def artefact_name(version, nif_version \\ nif_version(), target \\ target()),
    do: "plugboard-nif-#{nif_version}-#{target}-#{version}.tar.gz"

  def nif_version, do: List.to_string(:erlang.system_info(:nif_version))

  @doc "The target triple as cc_precompiler writes it: x86_64-pc-linux-gnu -> x86_64-linux-gnu."
  def target do
    arch = List.to_string(:erlang.system_info(:system_architecture))

    case String.split(arch, "-") do
      [cpu, _vendor, os, abi] -> "#{cpu}-#{os}-#{abi}"
      _ -> arch
    end
  end

  @doc "The checksums the package carries: %{file => \"sha256:HEX\"}, or :none without a checksum file."
  def read_checksums(package_dir) do
    path = Path.join(package_dir, @checksum_file)

    if File.exists?(path) do
      case Code.eval_file(path) do
        {%{} = map, _} -> {:ok, map}
        _ -> {:error, "#{path} is not a map of archive names to \"sha256:HEX\""}
      end
    else
      :none
    end
  end

  @doc """
  Chooses the archive for this VM among those in `checksums`: its own NIF version when there is one,
  else the newest older 2.x one (a NIF built for 2.N loads on 2.M >= N).
  """
  def choose(checksums, version) do
    mine = nif_version()
    target = target()

    candidates =
      for {file, sum} <- checksums,
          [nif] <- [Regex.run(~r/^plugboard-nif-(\d+\.\d+)-#{Regex.escape(target)}-#{Regex.escape(version)}\.tar\.gz$/, file, capture: :all_but_first)],
          compatible?(nif, mine),
          do: {nif, file, sum}

    case Enum.max_by(candidates, fn {nif, _, _} -> nif_key(nif) end, fn -> nil end) do
      {_, file, "sha256:" <> hex} ->
        {:ok, file, String.downcase(hex)}

      {_, file, other} ->
        {:error, "checksum.exs gives #{file} the checksum #{inspect(other)}, not \"sha256:HEX\""}

      nil ->
        {:error,
         "no precompiled native part for NIF #{mine} on #{target} in this package (it has: " <>
           Enum.join(Enum.sort(Map.keys(checksums)), ", ") <> ")"}
    end
  end

  defp compatible?(nif, mine) do
    [major, minor] = nif_key(nif)
    [my_major, my_minor] = nif_key(mine)
    major == my_major and minor <= my_minor
  end

  defp nif_key(v), do: v |> String.split(".") |> Enum.map(&String.to_integer/1)

  def url(file, version) do
    template =
      case System.get_env("PLUGBOARD_PRECOMPILED_URL") do
        url when url not in [nil, ""] -> url
        _ -> Application.get_env(:plugboard, :precompiled_url, @default_url)
      end

    template |> String.replace("{filename}", file) |> String.replace("{version}", version)
  end

  def cache_dir, do: Path.join(:filename.basedir(:user_cache, ~c"plugboard") |> List.to_string(), "precompiled")

  @doc """
  The archive `file` as a verified local path: from the cache, else downloaded from `url`. Returns
  {:ok, path} or {:error, message}; the message names the URL or the archive and what to do.
  """
  def fetch(file, url, sha256) do
    path = Path.join(cache_dir(), file)

    with :ok <- (if File.exists?(path), do: :ok, else: download(url, path)),
         :ok <- verify(path, url, sha256) do
      {:ok, path}
    end
  end

  defp download(url, path) do
    File.mkdir_p!(Path.dirname(path))
    # Mix (Elixir >= 1.15) prunes OTP applications a project does not list from the code path.
    for app <- [:inets, :ssl, :public_key, :crypto] do
      if function_exported?(Mix, :ensure_application!, 1), do: Mix.ensure_application!(app)
      {:ok, _} = Application.ensure_all_started(app)
    end
    tmp = "#{path}.#{System.unique_integer([:positive])}.download"

    http_options = [timeout: 600_000, connect_timeout: 30_000, autoredirect: true] ++ ssl_options(url)
    request = {String.to_charlist(url), [{~c"user-agent", ~c"plugboard-mix"}]}

    result =
      try do
        :httpc.request(:get, request, http_options, stream: String.to_charlist(tmp))
      catch
        kind, reason -> {:error, {kind, reason}}
      end

    case result do
      {:ok, :saved_to_file} ->
        File.rename!(tmp, path)
        :ok

      {:ok, {{_, status, reason}, _headers, _body}} ->
        File.rm(tmp)
        {:error, cannot_download(url, "HTTP #{status} #{reason}")}

      {:error, reason} ->
        File.rm(tmp)
        {:error, cannot_download(url, inspect(reason))}
    end
  end

  defp ssl_options("https" <> _) do
    [ssl: [verify: :verify_peer, cacerts: :public_key.cacerts_get(), depth: 4,
           customize_hostname_check: [match_fun: :public_key.pkix_verify_hostname_match_fun(:https)]]]
  end

  defp ssl_options(_), do: []

  defp cannot_download(url, why) do
    "cannot download the precompiled native part from #{url}: #{why}. Set PLUGBOARD_PRECOMPILED_URL " <>
      "to a template where it can be had ({filename} stands for its name), or PLUGBOARD_BUILD=true to build " <>
      "it from the package's sources (needs CMake, a C++23 compiler and zlib's headers)"
  end

  @doc "Checks `path` against `sha256`; a mismatch removes it from the cache and says so."
  def verify(path, url, sha256) do
    actual = sha256_file(path)

    if actual == sha256 do
      :ok
    else
      File.rm(path)

      {:error,
       "the precompiled archive #{path} (from #{url}) has sha256 #{actual}, but the package's checksum.exs " <>
         "says #{sha256}: refused and removed (a tampered or corrupt download). Fetch it again, or set " <>
         "PLUGBOARD_BUILD=true to build the native part from the package's sources"}
    end
  end

  def sha256_file(path) do
    if function_exported?(Mix, :ensure_application!, 1), do: Mix.ensure_application!(:crypto)

    File.stream!(path, 1_048_576)
    |> Enum.reduce(:crypto.hash_init(:sha256), &:crypto.hash_update(&2, &1))
    |> :crypto.hash_final()
    |> Base.encode16(case: :lower)
  end

  @doc "Unpacks the archive into `priv` (its lib/ and bin/), replacing what was there."
  def unpack(archive, priv) do
    tmp = priv <> ".unpack"
    File.rm_rf!(tmp)
    File.mkdir_p!(tmp)

    case :erl_tar.extract(String.to_charlist(archive), [:compressed, cwd: String.to_charlist(tmp)]) do
      :ok ->
        for dir <- ["lib", "bin"] do
          File.rm_rf!(Path.join(priv, dir))
          File.mkdir_p!(priv)
          File.rename!(Path.join(tmp, dir), Path.join(priv, dir))
        end

        File.rm_rf!(tmp)
        :ok

      {:error, reason} ->
        File.rm_rf!(tmp)
        {:error, "cannot unpack #{archive}: #{:erl_tar.format_error(reason)}"}
    end
  end

  @doc "Packs `priv`'s lib/ and bin/ into `out_dir/<artefact name>`; returns {path, sha256}."
  def pack(priv, out_dir, version) do
    File.mkdir_p!(out_dir)
    path = Path.join(out_dir, artefact_name(version))

    files =
      for dir <- ["lib", "bin"], file <- Path.wildcard(Path.join([priv, dir, "*"])), File.regular?(file),
          do: {String.to_charlist(Path.relative_to(file, priv)), String.to_charlist(file)}

    :ok = :erl_tar.create(String.to_charlist(path), Enum.sort(files), [:compressed])
    {path, sha256_file(path)}
  end
end
