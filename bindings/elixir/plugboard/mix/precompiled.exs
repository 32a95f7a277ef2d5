defmodule PlugboardNative.Precompiled do
  @moduledoc """
  The precompiled native part: one archive per NIF version and target triple, named as
  `cc_precompiler` names them,

      plugboard-nif-NIF_VERSION-TARGET-VERSION.tar.gz     e.g. plugboard-nif-2.16-x86_64-linux-gnu-0.1.0.tar.gz

  holding what `priv/` needs (`lib/plugboard_nif.so`, `lib/libplugboard.so.0`, the device bridges,
  `bin/plugboard`, `bin/plugboard-isolate`), with the sha256 of every archive in the package's
  `checksum.exs` (a literal map, file name => "sha256:HEX", read as data, never run).

  Where it is fetched from: `PLUGBOARD_PRECOMPILED_URL`, else `config :plugboard, precompiled_url:`
  (in the project's `config/config.exs`), else `@default_url`. The URL is a template: `{filename}`
  becomes the archive's name, `{version}` plugboard's version. HTTP(S)_PROXY are honoured. A
  downloaded archive is kept in `$XDG_CACHE_HOME/plugboard/precompiled/` (`~/.cache` by default) and
  checked against `checksum.exs` every time it is used, from the same bytes that are then unpacked:
  a cached copy that differs is fetched again once; a download that differs is refused, named, and
  not kept.
  """

  @default_url "https://github.com/plugboard/plugboard/releases/download/v{version}/{filename}"
  @checksum_file "checksum.exs"
  @build_advice "or set PLUGBOARD_BUILD=true to build the native part from the package's sources (needs CMake, " <>
                  "a C++23 compiler and zlib's headers)"

  def checksum_file, do: @checksum_file

  @doc "The file in priv/ that says which archive it was unpacked from (its sha256)."
  def stamp_file, do: ".precompiled"

  @doc "The archive name for this VM (or the given NIF version and target)."
  def artefact_name(version, nif_version \\ nif_version(), target \\ target()),
    do: "plugboard-nif-#{nif_version}-#{target}-#{version}.tar.gz"

  def nif_version, do: List.to_string(:erlang.system_info(:nif_version))

  @doc "The target triple as cc_precompiler writes it: x86_64-pc-linux-gnu -> x86_64-linux-gnu."
  def target(arch \\ List.to_string(:erlang.system_info(:system_architecture))) do
    case String.split(arch, "-") do
      [cpu, _vendor, os, abi] -> "#{cpu}-#{os}-#{abi}"
      _ -> arch
    end
  end

  @doc """
  The checksums the package carries, {:ok, %{file => sha256_hex}}, :none without a checksum file, or
  {:error, message} naming the file and the entry that is wrong.
  """
  def read_checksums(package_dir) do
    path = Path.join(package_dir, @checksum_file)

    with {:ok, text} <- File.read(path),
         {:ok, quoted} <- Code.string_to_quoted(text, file: path),
         true <- Macro.quoted_literal?(quoted) || {:error, "#{path} is not a literal map (it is read as data, never run)"},
         {map, _} when is_map(map) <- Code.eval_quoted(quoted),
         {:ok, checked} <- check_entries(map, path) do
      {:ok, checked}
    else
      {:error, :enoent} -> :none
      {:error, message} when is_binary(message) -> {:error, message}
      {:error, {_meta, message, token}} -> {:error, "#{path} cannot be read: #{inspect(message)} #{inspect(token)}"}
      {:error, reason} -> {:error, "#{path} cannot be read: #{inspect(reason)}"}
      {_other, _} -> {:error, "#{path} is not a map of archive names to \"sha256:HEX\""}
    end
  end

  defp check_entries(map, path) do
    Enum.reduce_while(map, {:ok, %{}}, fn
      {file, "sha256:" <> hex} = entry, {:ok, acc} when is_binary(file) ->
        if Regex.match?(~r/\A[0-9a-fA-F]{64}\z/, hex),
          do: {:cont, {:ok, Map.put(acc, file, String.downcase(hex))}},
          else: {:halt, {:error, "#{path}: the entry #{inspect(entry)} is not \"sha256:\" and 64 hex digits"}}

      entry, _ ->
        {:halt, {:error, "#{path}: the entry #{inspect(entry)} is not an archive name => \"sha256:HEX\""}}
    end)
  end

  @doc """
  Chooses the archive for this VM among `checksums` (as read_checksums/1 gives them): its own NIF
  version when there is one, else the newest older 2.x one (a NIF built for 2.N loads on 2.M >= N).
  {:ok, file, sha256} or {:error, message}.
  """
  def choose(checksums, version, nif_version \\ nif_version(), target \\ target()) do
    pattern = ~r/^plugboard-nif-(\d+)\.(\d+)-#{Regex.escape(target)}-#{Regex.escape(version)}\.tar\.gz$/
    [my_major, my_minor] = nif_key(nif_version)

    candidates =
      for {file, sum} <- checksums,
          [major, minor] <- [Regex.run(pattern, file, capture: :all_but_first) || []],
          String.to_integer(major) == my_major and String.to_integer(minor) <= my_minor,
          do: {String.to_integer(minor), file, sum}

    case Enum.max_by(candidates, &elem(&1, 0), fn -> nil end) do
      {_, file, sum} ->
        {:ok, file, sum}

      nil ->
        {:error,
         "no precompiled native part for NIF #{nif_version} on #{target} in this package (it has: " <>
           Enum.join(Enum.sort(Map.keys(checksums)), ", ") <> "): " <> @build_advice}
    end
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

  def cache_dir, do: Path.join(List.to_string(:filename.basedir(:user_cache, ~c"plugboard")), "precompiled")

  @doc """
  The bytes of archive `file`, checked against `sha256`: from the cache, else (or when the cached
  copy differs) downloaded from `url` and then kept. {:ok, bytes} or {:error, message}; the message
  names the URL or the archive and what to do.
  """
  def fetch(file, url, sha256) do
    path = Path.join(cache_dir(), file)

    with {:ok, bytes} <- File.read(path),
         ^sha256 <- sha256(bytes) do
      {:ok, bytes}
    else
      _missing_or_different ->
        with {:ok, bytes} <- download(url) do
          case sha256(bytes) do
            ^sha256 ->
              keep(path, bytes)
              {:ok, bytes}

            actual ->
              File.rm(path)

              {:error,
               "the precompiled archive #{file} downloaded from #{url} has sha256 #{actual}, but the package's " <>
                 "checksum.exs says #{sha256}: refused and not kept (a tampered or corrupt download). Fetch it " <>
                 "again, " <> @build_advice}
          end
        end
    end
  end

  # Written whole or not at all (a name of its own, then a rename): two builds sharing the cache
  # never mix their bytes.
  defp keep(path, bytes) do
    File.mkdir_p!(Path.dirname(path))
    tmp = "#{path}.#{System.pid()}.#{System.unique_integer([:positive])}.tmp"
    File.write!(tmp, bytes)
    File.rename!(tmp, path)
  end

  defp download(url) do
    # Mix (Elixir >= 1.15) prunes OTP applications a project does not list from the code path.
    for app <- [:inets, :ssl, :public_key, :crypto] do
      if function_exported?(Mix, :ensure_application!, 1), do: Mix.ensure_application!(app)
      {:ok, _} = Application.ensure_all_started(app)
    end

    set_proxies(url)
    http_options = [timeout: 600_000, connect_timeout: 30_000, autoredirect: true] ++ ssl_options(url)
    request = {String.to_charlist(url), [{~c"user-agent", ~c"plugboard-mix"}]}

    result =
      try do
        :httpc.request(:get, request, http_options, body_format: :binary)
      catch
        kind, reason -> {:error, {kind, reason}}
      end

    case result do
      {:ok, {{_, 200, _}, _headers, body}} -> {:ok, body}
      {:ok, {{_, status, reason}, _headers, _body}} -> {:error, cannot_download(url, "HTTP #{status} #{reason}")}
      {:error, reason} -> {:error, cannot_download(url, inspect(reason))}
    end
  end

  defp set_proxies(url) do
    {scheme, option} = if String.starts_with?(url, "https"), do: {"HTTPS_PROXY", :https_proxy}, else: {"HTTP_PROXY", :proxy}
    proxy = System.get_env(scheme) || System.get_env(String.downcase(scheme))

    with proxy when proxy not in [nil, ""] <- proxy,
         %URI{host: host, port: port} when is_binary(host) <- URI.parse(proxy) do
      no_proxy = (System.get_env("NO_PROXY") || System.get_env("no_proxy") || "") |> String.split(",", trim: true)
      :httpc.set_options([{option, {{String.to_charlist(host), port}, Enum.map(no_proxy, &String.to_charlist/1)}}])
    end
  end

  defp ssl_options("https" <> _) do
    # OTP 25 has the system's CA store; OTP 24 reads Debian's/Red Hat's bundle.
    cacerts =
      if function_exported?(:public_key, :cacerts_get, 0),
        do: [cacerts: :public_key.cacerts_get()],
        else: [cacertfile: Enum.find(["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"], &File.exists?/1)]

    [ssl: [verify: :verify_peer, depth: 4,
           customize_hostname_check: [match_fun: :public_key.pkix_verify_hostname_match_fun(:https)]] ++ cacerts]
  end

  defp ssl_options(_), do: []

  defp cannot_download(url, why) do
    "cannot download the precompiled native part from #{url}: #{why}. Set PLUGBOARD_PRECOMPILED_URL to a " <>
      "template where it can be had ({filename} stands for its name), " <> @build_advice
  end

  def sha256(bytes) do
    if function_exported?(Mix, :ensure_application!, 1), do: Mix.ensure_application!(:crypto)
    Base.encode16(:crypto.hash(:sha256, bytes), case: :lower)
  end

  # What an archive may hold: lib/ and bin/ files, the NIF among them, nothing else.
  @required ["lib/plugboard_nif.so", "lib/libplugboard.so.0", "bin/plugboard", "bin/plugboard-isolate"]

  @doc """
  Unpacks `bytes` (an archive, already checked) into `priv`'s lib/ and bin/. The archive is checked
  first (only regular files under lib/ and bin/, the NIF, library and tools among them); only then
  is `priv` touched, and lib/ and bin/ are replaced whole. :ok or {:error, message} naming `name`.
  """
  def unpack(bytes, name, priv) do
    with {:ok, entries} <- :erl_tar.table({:binary, bytes}, [:compressed, :verbose]),
         :ok <- check_members(entries, name) do
      staging = "#{priv}.unpack.#{System.pid()}"
      File.rm_rf!(staging)
      File.mkdir_p!(staging)

      try do
        case :erl_tar.extract({:binary, bytes}, [:compressed, cwd: String.to_charlist(staging)]) do
          :ok ->
            File.mkdir_p!(priv)

            for dir <- ["lib", "bin"] do
              File.rm_rf!(Path.join(priv, dir))
              File.rename!(Path.join(staging, dir), Path.join(priv, dir))
            end

            :ok

          {:error, reason} ->
            {:error, "cannot unpack #{name}: #{:erl_tar.format_error(reason)}"}
        end
      after
        File.rm_rf!(staging)
      end
    else
      {:error, message} when is_binary(message) -> {:error, message}
      {:error, reason} -> {:error, "cannot read #{name}: #{:erl_tar.format_error(reason)}"}
    end
  end

  defp check_members(entries, name) do
    names =
      for {entry, type, _size, _mtime, _mode, _uid, _gid} <- entries do
        {List.to_string(entry), type}
      end

    bad =
      for {entry, type} <- names,
          not (type == :regular and Regex.match?(~r{\A(lib|bin)/[A-Za-z0-9._+-]+\z}, entry)),
          do: "#{entry} (#{type})"

    missing = @required -- Enum.map(names, &elem(&1, 0))

    cond do
      bad != [] -> {:error, "#{name} holds what a precompiled archive must not: #{Enum.join(bad, ", ")}"}
      missing != [] -> {:error, "#{name} lacks #{Enum.join(missing, ", ")}"}
      true -> :ok
    end
  end

  @doc """
  Packs `files` (paths relative to `priv`, under lib/ and bin/) into `out_dir/<artefact name>`;
  returns {path, sha256}.
  """
  def pack(priv, files, out_dir, version) do
    File.mkdir_p!(out_dir)
    path = Path.join(out_dir, artefact_name(version))
    entries = for file <- Enum.sort(files), do: {String.to_charlist(file), String.to_charlist(Path.join(priv, file))}
    :ok = :erl_tar.create(String.to_charlist(path), entries, [:compressed])
    {path, sha256(File.read!(path))}
  end
end
