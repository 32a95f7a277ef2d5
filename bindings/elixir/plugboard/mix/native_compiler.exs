Code.require_file("precompiled.exs", __DIR__)

defmodule Mix.Tasks.Compile.PlugboardNative do
  @moduledoc """
  Puts plugboard's native part into the application's `priv/`:

      priv/lib/plugboard_nif.so          the NIF (c_src/), over the embedding library
      priv/lib/libplugboard.so.0         plugboard's embedding library
      priv/lib/libplugboard_*_bridge.so  device callback bridges, where they were built
      priv/bin/plugboard                 the CLI (the release step assembles bundles with it)
      priv/bin/plugboard-isolate         the helper that loads a plugin in a child process

  From, in this order:

    * `PLUGBOARD_PREFIX=P`: an installed plugboard (what `cmake --install BUILD --prefix P` made);
      only the NIF is compiled, over it.
    * `PLUGBOARD_BUILD=true`, or a checkout with no `checksum.exs` (the repository itself): built
      from the sources, the package's `native/` folder or this repository's, into
      `_build/<env>/plugboard_native/` (minutes; CMake, a C++23 compiler and the `-dev` packages
      the README lists; Ninja when there is one). The PJRT and XLA FFI headers come with the package.
    * otherwise the precompiled archive for this NIF version and target, downloaded and checked
      against the package's `checksum.exs` (`PlugboardNative.Precompiled`): no compiler is needed.

  Nothing is written into the source tree.
  """
  use Mix.Task.Compiler

  alias PlugboardNative.Precompiled

  @package Path.expand("..", __DIR__)
  @repository Path.expand("../../../..", __DIR__)
  @c_src Path.expand("../c_src", __DIR__)

  @impl true
  def run(_args) do
    case source(Precompiled.read_checksums(@package)) do
      {:precompiled, checksums} -> install_precompiled(checksums)
      built -> build!(built)
    end

    {:ok, []}
  end

  @doc false
  # For `mix plugboard.precompile`: builds from PLUGBOARD_PREFIX or the sources, never from an
  # archive; the files (relative to priv/) it installed.
  def build!(from \\ source(:none)) do
    work = Path.join(Mix.Project.build_path(), "plugboard_native")

    case from do
      {:prefix, prefix} -> build_nif(work, prefix)
      {:build, sources, headers} -> build_nif(work, build_library(work, sources, headers))
    end
  end

  @doc false
  # Where the native part comes from (see the moduledoc), given what read_checksums/1 found.
  def source(checksums) do
    prefix = System.get_env("PLUGBOARD_PREFIX")
    build? = System.get_env("PLUGBOARD_BUILD") in ["1", "true", "TRUE", "yes"]

    cond do
      prefix not in [nil, ""] -> {:prefix, installed_prefix(Path.expand(prefix))}
      build? -> sources()
      true ->
        case checksums do
          {:ok, checksums} -> {:precompiled, checksums}
          :none -> sources()
          {:error, message} -> Mix.raise("plugboard: " <> message <> " (set PLUGBOARD_BUILD=true to build from the sources)")
        end
    end
  end

  # The package's own copy of the library's sources (native/, with the third-party headers under
  # native/deps), else this repository's (headers from scripts/setup.sh's folder).
  defp sources do
    packaged = Path.join(@package, "native")

    cond do
      File.exists?(Path.join(packaged, "CMakeLists.txt")) ->
        {:build, packaged, Path.join(packaged, "deps")}

      File.exists?(Path.join(@repository, "CMakeLists.txt")) ->
        deps = System.get_env("PLUGBOARD_DEPS_DIR") || Path.join([System.user_home!(), ".cache", "plugboard", "deps"])
        {:build, @repository, deps}

      true ->
        Mix.raise("plugboard: no sources to build the native part from (neither #{packaged} nor a repository at #{@repository})")
    end
  end

  defp build_nif(work, prefix) do
    nif_build = Path.join(work, "nif")

    configure = ["-S", @c_src, "-B", nif_build, "-DCMAKE_BUILD_TYPE=Release", "-Dplugboard_DIR=#{Path.join([prefix, "lib", "cmake", "plugboard"])}",
                 "-DERTS_INCLUDE_DIR=#{erts_include()}"] ++ generator() ++ nif_flags()
    stamp = Path.join(work, "nif.configured")

    # Configured again only when something it was configured with changed.
    if File.read(stamp) != {:ok, inspect(configure)} do
      forget_moved_build(nif_build, @c_src)
      cmake!(configure, "configuring the NIF")
      File.write!(stamp, inspect(configure))
    end

    cmake!(["--build", nif_build, "--parallel", "#{System.schedulers_online()}"], "building the NIF")
    install_priv(prefix, nif_build)
  end

  defp install_precompiled(checksums) do
    version = Mix.Project.config()[:version]
    priv = Path.join(Mix.Project.app_path(), "priv")
    stamp = Path.join(priv, Precompiled.stamp_file())

    with {:ok, file, sha256} <- Precompiled.choose(checksums, version),
         false <- File.read(stamp) == {:ok, sha256} and File.exists?(Path.join([priv, "lib", "plugboard_nif.so"])),
         url = Precompiled.url(file, version),
         _ = Mix.shell().info("plugboard: the precompiled native part #{file} (#{url})"),
         {:ok, bytes} <- Precompiled.fetch(file, url, sha256),
         _ = File.rm(stamp),
         :ok <- Precompiled.unpack(bytes, file, priv) do
      File.write!(stamp, sha256)
    else
      true -> :ok
      {:error, message} -> Mix.raise("plugboard: " <> message)
    end
  end

  @impl true
  def clean do
    File.rm_rf!(Path.join(Mix.Project.build_path(), "plugboard_native"))
    File.rm_rf!(Path.join(Mix.Project.app_path(), "priv"))
    :ok
  end

  defp installed_prefix(prefix) do
    unless File.exists?(Path.join([prefix, "lib", "cmake", "plugboard", "plugboardConfig.cmake"])) do
      Mix.raise("PLUGBOARD_PREFIX=#{prefix} is not an installed plugboard (no lib/cmake/plugboard/plugboardConfig.cmake)")
    end

    prefix
  end

  # Builds and installs the library from `sources` (a CMake project) into _build; `headers` is the
  # folder holding files/pjrt_header and files/ffi_header (PLUGBOARD_DEPS_DIR's layout).
  defp build_library(work, sources, headers) do
    build = Path.join(work, "library")
    prefix = Path.join(work, "prefix")
    forget_moved_build(build, sources)

    unless File.exists?(Path.join(build, "CMakeCache.txt")) do
      Mix.shell().info("plugboard: building the native library from #{sources} (the first build takes minutes)")

      cmake!(
        ["-S", sources, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DPLUGBOARD_TESTS=OFF",
         "-DPLUGBOARD_BENCH=OFF", "-DPLUGBOARD_DEPS_DIR=#{headers}",
         "-DPLUGBOARD_CUDA_BRIDGE=#{System.get_env("PLUGBOARD_CUDA_BRIDGE", "AUTO")}"] ++ generator(),
        "configuring plugboard"
      )
    end

    cmake!(["--build", build, "--parallel", "#{System.schedulers_online()}"], "building plugboard")
    cmake!(["--install", build, "--prefix", prefix, "--strip"], "installing plugboard")
    prefix
  end

  # A build folder configured from sources somewhere else (the project moved, or a build root shared
  # with a copy of it): CMake refuses to configure it again, so it starts over.
  defp forget_moved_build(build, sources) do
    with {:ok, cache} <- File.read(Path.join(build, "CMakeCache.txt")),
         [_, configured] <- Regex.run(~r/^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$/m, cache),
         false <- Path.expand(configured) == Path.expand(sources) do
      Mix.shell().info("plugboard: #{build} was configured from #{configured}; configuring it again from #{sources}")
      File.rm_rf!(build)
    end

    :ok
  end

  # priv/ holds exactly what this build made: the precompiled stamp goes (a later precompiled
  # install must not take these files for its archive's) and so does anything the build no longer
  # makes (a bridge, a copy's leftover).
  defp install_priv(prefix, nif_build) do
    priv = Path.join(Mix.Project.app_path(), "priv")
    File.rm(Path.join(priv, Precompiled.stamp_file()))

    files =
      [{Path.join(nif_build, "plugboard_nif.so"), "lib/plugboard_nif.so"},
       {Path.join([prefix, "lib", "libplugboard.so.0"]), "lib/libplugboard.so.0"}] ++
        for(bridge <- Path.wildcard(Path.join([prefix, "lib", "libplugboard_*_bridge.so"])),
            do: {bridge, "lib/" <> Path.basename(bridge)}) ++
        for(tool <- ["plugboard", "plugboard-isolate"], do: {Path.join([prefix, "bin", tool]), "bin/" <> tool})

    for dir <- ["lib", "bin"], do: File.mkdir_p!(Path.join(priv, dir))
    for {from, to} <- files, do: copy(from, Path.join(priv, to))
    wanted = MapSet.new(files, &elem(&1, 1))

    for dir <- ["lib", "bin"], entry <- File.ls!(Path.join(priv, dir)), not MapSet.member?(wanted, "#{dir}/#{entry}"),
        do: File.rm_rf!(Path.join([priv, dir, entry]))

    Enum.map(files, &elem(&1, 1))
  end

  # Copies when the source changed (follows links: the library is installed as a link chain).
  defp copy(from, to) do
    unless File.exists?(from), do: Mix.raise("plugboard: #{from} is missing from the native build")
    %{mtime: src_time, size: src_size} = File.stat!(from, time: :posix)

    case File.stat(to, time: :posix) do
      {:ok, %{mtime: t, size: ^src_size}} when t >= src_time -> :ok
      _ ->
        tmp = to <> ".tmp"
        File.cp!(from, tmp)
        File.chmod!(tmp, File.stat!(from).mode)
        File.rename!(tmp, to)
    end
  end

  defp nif_flags do
    ["-DPLUGBOARD_NIF_WERROR=#{System.get_env("PLUGBOARD_WERROR", "OFF")}",
     "-DPLUGBOARD_NIF_SANITIZE=#{System.get_env("PLUGBOARD_NIF_SANITIZE", "OFF")}"]
  end

  defp erts_include do
    dir = Path.join([:code.root_dir(), "erts-#{:erlang.system_info(:version)}", "include"])

    if File.exists?(Path.join(dir, "erl_nif.h")),
      do: dir,
      else: Mix.raise("plugboard: erl_nif.h not found in #{dir} (on Debian: apt-get install erlang-dev)")
  end

  defp generator, do: if(System.find_executable("ninja"), do: ["-G", "Ninja"], else: [])

  defp cmake!(args, what) do
    cmake = System.find_executable("cmake") || Mix.raise("plugboard: cmake is needed to build the native part")
    {output, status} = System.cmd(cmake, args, stderr_to_stdout: true)
    if status != 0, do: Mix.raise("plugboard: #{what} failed (cmake #{Enum.join(args, " ")}):\n#{output}")
  end
end
