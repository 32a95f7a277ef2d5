defmodule Mix.Tasks.Compile.PlugboardNative do
  @moduledoc """
  Builds plugboard's native part and installs it into the application's `priv/`:

      priv/lib/plugboard_nif.so          the NIF (c_src/), over the embedding library
      priv/lib/libplugboard.so.0         plugboard's embedding library
      priv/lib/libplugboard_*_bridge.so  device callback bridges, where they were built
      priv/bin/plugboard                 the CLI (the release step assembles bundles with it)
      priv/bin/plugboard-isolate         the helper that loads a plugin in a child process

  The library comes from an installed plugboard when `PLUGBOARD_PREFIX` names one (what
  `cmake --install BUILD --prefix P` made); otherwise it is built from this repository's sources
  into `_build/<env>/plugboard_native/` (minutes the first time; CMake, Ninja and the PJRT header
  that `scripts/setup.sh` fetches are needed). Nothing is written into the source tree.
  """
  use Mix.Task.Compiler

  @repository Path.expand("../../../..", __DIR__)
  @c_src Path.expand("../c_src", __DIR__)

  @impl true
  def run(_args) do
    work = Path.join(Mix.Project.build_path(), "plugboard_native")
    prefix = library_prefix(work)
    nif_build = Path.join(work, "nif")

    configure = ["-S", @c_src, "-B", nif_build, "-DCMAKE_BUILD_TYPE=Release", "-Dplugboard_DIR=#{Path.join([prefix, "lib", "cmake", "plugboard"])}",
                 "-DERTS_INCLUDE_DIR=#{erts_include()}"] ++ generator() ++ nif_flags()
    stamp = Path.join(work, "nif.configured")

    # Configured again only when something it was configured with changed.
    if File.read(stamp) != {:ok, inspect(configure)} do
      cmake!(configure, "configuring the NIF")
      File.write!(stamp, inspect(configure))
    end

    cmake!(["--build", nif_build, "--parallel", "#{System.schedulers_online()}"], "building the NIF")
    install_priv(prefix, nif_build)
    {:ok, []}
  end

  @impl true
  def clean do
    File.rm_rf!(Path.join(Mix.Project.build_path(), "plugboard_native"))
    File.rm_rf!(Path.join(Mix.Project.app_path(), "priv"))
    :ok
  end

  defp library_prefix(work) do
    case System.get_env("PLUGBOARD_PREFIX") do
      prefix when prefix not in [nil, ""] ->
        prefix = Path.expand(prefix)

        unless File.exists?(Path.join([prefix, "lib", "cmake", "plugboard", "plugboardConfig.cmake"])) do
          Mix.raise("PLUGBOARD_PREFIX=#{prefix} is not an installed plugboard (no lib/cmake/plugboard/plugboardConfig.cmake)")
        end

        prefix

      _ ->
        build = Path.join(work, "library")
        prefix = Path.join(work, "prefix")

        unless File.exists?(Path.join(build, "CMakeCache.txt")) do
          Mix.shell().info("plugboard: building the native library from #{@repository} (the first build takes minutes)")
          deps = System.get_env("PLUGBOARD_DEPS_DIR") || Path.join([System.user_home!(), ".cache", "plugboard", "deps"])

          cmake!(
            ["-S", @repository, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DPLUGBOARD_TESTS=OFF",
             "-DPLUGBOARD_BENCH=OFF", "-DPLUGBOARD_DEPS_DIR=#{deps}",
             "-DPLUGBOARD_CUDA_BRIDGE=#{System.get_env("PLUGBOARD_CUDA_BRIDGE", "AUTO")}"] ++ generator(),
            "configuring plugboard"
          )
        end

        cmake!(["--build", build, "--parallel", "#{System.schedulers_online()}"], "building plugboard")
        cmake!(["--install", build, "--prefix", prefix, "--strip"], "installing plugboard")
        prefix
    end
  end

  defp install_priv(prefix, nif_build) do
    priv = Path.join(Mix.Project.app_path(), "priv")
    lib = Path.join(priv, "lib")
    bin = Path.join(priv, "bin")
    File.mkdir_p!(lib)
    File.mkdir_p!(bin)
    copy(Path.join(nif_build, "plugboard_nif.so"), Path.join(lib, "plugboard_nif.so"))
    copy(Path.join([prefix, "lib", "libplugboard.so.0"]), Path.join(lib, "libplugboard.so.0"))

    for bridge <- Path.wildcard(Path.join([prefix, "lib", "libplugboard_*_bridge.so"])),
        do: copy(bridge, Path.join(lib, Path.basename(bridge)))

    for tool <- ["plugboard", "plugboard-isolate"],
        do: copy(Path.join([prefix, "bin", tool]), Path.join(bin, tool))
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
