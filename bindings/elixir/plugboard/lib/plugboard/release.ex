defmodule Plugboard.Release do
  @moduledoc """
  A `mix release` step that embeds a bundle of PJRT plugins into the release, so that the release
  chooses its accelerator when it boots (`Plugboard.Application` boots from the embedded bundle):

      releases: [
        compute: [
          applications: [compute: :permanent],
          steps: [:assemble, &Plugboard.Release.embed/1],
          plugboard: [
            targets: [cpu: "xla-cpu-pjrt==0.0.1", cuda13: "jax-cuda13-pjrt==0.12.0.1", rocm7: "jax-rocm7-pjrt==0.12.0"],
            companions: [cuda13: "nvidia-cuda-runtime==13.0.96"],   # wheels of libraries a target needs
            priority: [cpu: 20],                                      # boot priority (higher first)
            probes: [cuda13: :cuda],                                  # none | cuda | rocm | tpu
            create_options: [cpu: [cpu_device_count: 4]],             # PJRT client create options
            lock_file: "plugboard.lock",                              # the default, in the project root
            offline: "wheels/"                                        # a folder of wheels: never pip
          ]
        ]
      ]

  A target is `"PACKAGE==VERSION"` (a wheel, fetched) or the path of a local plugin file. The step
  runs the `plugboard` CLI that ships in the release (`fetch`, then `bundle`): wheels come from pip
  or, offline, from the wheels folder; each wheel and plugin hash is recorded in the lock file and
  enforced on every later build; plugins are extracted once into plugboard's cache
  (`$XDG_CACHE_HOME/plugboard`, or `cache:`), so a second build downloads and extracts nothing. The
  bundle (the plugins, `plugboard.json`, the CUDA callback bridge beside a CUDA target) is laid out at
  `lib/plugboard-VSN/priv/bundle` inside the release.

  Precompiled programs: `precompile: ["programs/model.mlir", ...]` compiles each program (with the
  default options of `Plugboard.compile/3`) for every target that can compile on the build machine
  and stores the executables in the bundle, hashed in its manifest: the booted release's
  `Plugboard.compile/3` of the same program loads it (`source: :precompiled`) instead of compiling.
  CPU targets always compile here; a CUDA target compiles with no GPU for the GPU that
  `gpu_target_configs: [cuda13: "h200.textproto"]` describes (a text GpuTargetConfigProto whose
  `device_description_str` is the device kind the release will run on); other targets are listed as
  not precompiled, with the reason, and compile when they first run.

  Other options: `cache:` (the plugin cache folder), `python:` (the Python whose pip downloads),
  `callback_bridge: false` (do not ship the CUDA callback bridge). Relative paths are taken from the
  project root.

  The environment of the build:

    * `PLUGBOARD_WHEELS=DIR` — offline from that folder of wheels (wins over `offline:`).
    * `PLUGBOARD_EXTRA_TARGETS="name=/path/plugin.so,..."` — targets added to the configured ones,
      for testing a release with a local plugin (`name=PACKAGE==VERSION` works as well).
    * `PLUGBOARD_EXTRA_CREATE_OPTIONS="name:key=value,..."` — client create options added to
      `create_options:` (for an extra target: `cpu115:cpu_device_count=2`).

  An unknown package, a hash that does not match the lock, or pip that cannot download fails the
  build with the target named and the CLI's own error.

  **Replacing the bundle.** The new bundle is built beside the old one (`priv/.bundle.staging`) and
  swapped in by a rename only when it is complete (`plugboard bundle --replace`); two `embed`s of
  the same release at once take turns on an flock of `priv/bundle.lock` (outside the bundle folder,
  which the swap replaces) and leave one whole bundle. `mix release --overwrite` itself recopies
  `lib/plugboard-VSN/` (old bundle included) before this step runs, so a rebuild that fails here
  cannot keep the old bundle; instead the step first writes `priv/bundle.required`, and a release
  with that file and no bundle does not boot (`Plugboard.Application`: the reason in the log, a
  non-zero exit of `bin/REL start` / `eval`) unless configured with `bundle_required: false`.

  **Precompiled programs and other processors.** A CPU program's cache key holds the processor that
  compiled it (model and feature flags; XLA's CPU compiler emits code for the host it runs on), so the
  release's precompiled CPU programs load only on the same processor model; elsewhere they compile
  on first use. The manifest records the build host's processor per program (`built_on`), and a boot
  on another one says so in the report (`Plugboard.Report.Candidate`'s `precompiled_mismatch`) and
  the log, with the features that differ. XLA's CPU plugins (0.81, 0.106, 0.115) offer
  `xla_cpu_max_isa` (a `DebugOptions` field: SSE4_2, AVX, AVX2, AVX512, AVX512_VNNI, AVX512_BF16,
  AMX, AMX_FP16), which caps the instructions emitted but not the processor the code is tuned for,
  and the executable does not record it;
  plugboard does not use it, so keys stay per processor: build the release on the processor model it
  will run on for the precompiled CPU programs to load.
  """

  @typedoc "A target's source: `\"PACKAGE==VERSION\"` or the path of a local plugin file."
  @type source :: String.t()

  @typedoc "The options under the release's `plugboard:` key."
  @type option ::
          {:targets, [{atom() | String.t(), source()}]}
          | {:companions, [{atom() | String.t(), String.t() | [String.t()]}]}
          | {:priority, [{atom() | String.t(), integer()}]}
          | {:probes, [{atom() | String.t(), :none | :cuda | :rocm | :tpu | String.t()}]}
          | {:create_options, [{atom() | String.t(), [{atom() | String.t(), term()}]}]}
          | {:lock_file, Path.t()}
          | {:offline, Path.t() | nil}
          | {:cache, Path.t()}
          | {:python, Path.t()}
          | {:callback_bridge, boolean()}
          | {:precompile, [Path.t()]}
          | {:gpu_target_configs, [{atom() | String.t(), Path.t()}]}

  @known [:targets, :companions, :priority, :probes, :create_options, :lock_file, :offline, :cache, :python, :callback_bridge,
          :precompile, :gpu_target_configs]

  @doc """
  The release step: fetches the configured targets, writes the bundle into the release's copy of
  the `:plugboard` application (`priv/bundle`) and returns the release. Raises `Mix.Error` when the
  bundle cannot be made.
  """
  @spec embed(Mix.Release.t()) :: Mix.Release.t()
  def embed(release) do
    app = app_dir(release)
    # First of all: whatever fails below, this release no longer boots quietly without a bundle.
    expect_bundle!(app, release)
    opts = Keyword.get(release.options, :plugboard) || Mix.raise("plugboard: release #{release.name} has no plugboard: [targets: ...] options")

    case Keyword.keys(opts) -- @known do
      [] -> :ok
      unknown -> Mix.raise("plugboard: unknown option(s) #{inspect(unknown)} in release #{release.name}; known: #{inspect(@known)}")
    end

    root = Path.dirname(Mix.Project.project_file())

    targets =
      for {name, source} <- pairs(opts[:targets]) ++ extra_targets(System.get_env("PLUGBOARD_EXTRA_TARGETS")),
          do: {name, source(name, source, root)}

    if targets == [], do: Mix.raise("plugboard: release #{release.name} names no target (plugboard: [targets: [cpu: \"xla-cpu-pjrt==0.0.1\"]])")

    cli = Path.join([app, "priv", "bin", "plugboard"])
    bundle = Path.join([app, "priv", "bundle"])
    fetching = fetch_args(opts, root)

    # Fetched first, on its own: one line per package says whether it came from the cache.
    packages = for {_, source} <- targets, package?(source), uniq: true, do: source
    if packages != [], do: cli!(cli, ["fetch" | packages] ++ fetching, release, targets, root)

    # Built beside the old bundle and swapped in whole, under the lock priv/bundle.lock.
    target_args = Enum.flat_map(targets, fn {name, source} -> ["--target", "#{name}=#{source}"] end)
    cli!(cli, ["bundle", "--replace", "--out", bundle] ++ target_args ++ layout_args(opts) ++ precompile_args(opts, root) ++ fetching,
         release, targets, root)
    release
  end

  # The plugboard application inside the release (the CLI shipped with it is the one that runs).
  defp app_dir(release) do
    case release.applications[:plugboard] do
      nil -> Mix.raise("plugboard: release #{release.name} does not include the :plugboard application")
      app -> Path.join([release.path, "lib", "plugboard-#{app[:vsn]}"])
    end
  end

  defp expect_bundle!(app, release) do
    marker = Path.join([app, "priv", Plugboard.Application.bundle_marker()])

    text =
      "release #{release.name} boots from the bundle beside this file (priv/bundle), which " <>
        "Plugboard.Release.embed/1 builds; without it the release does not boot " <>
        "(config :plugboard, bundle_required: false to allow that)\n"

    with :ok <- File.mkdir_p(Path.dirname(marker)), :ok <- File.write(marker, text) do
      :ok
    else
      {:error, why} -> Mix.raise("plugboard: cannot write #{marker}: #{:file.format_error(why)}")
    end
  end

  defp fetch_args(opts, root) do
    wheels = non_empty(System.get_env("PLUGBOARD_WHEELS")) || opts[:offline]

    ["--lock", "--lock-file", Path.expand(opts[:lock_file] || "plugboard.lock", root)] ++
      if(wheels, do: ["--offline", "--from", Path.expand(wheels, root)], else: []) ++
      if(opts[:cache], do: ["--cache", Path.expand(opts[:cache], root)], else: []) ++
      if(opts[:python], do: ["--python", opts[:python]], else: [])
  end

  defp layout_args(opts) do
    Enum.flat_map(pairs(opts[:companions]), fn {name, specs} -> Enum.flat_map(List.wrap(specs), &["--companion", "#{name}=#{&1}"]) end) ++
      Enum.flat_map(pairs(opts[:priority]), fn {name, n} -> ["--priority", "#{name}=#{n}"] end) ++
      Enum.flat_map(pairs(opts[:probes]), fn {name, kind} -> ["--probe", "#{name}=#{kind}"] end) ++
      Enum.flat_map(pairs(opts[:create_options]), fn {name, kvs} ->
        Enum.flat_map(kvs, fn {k, v} -> ["--create-option", "#{name}:#{k}=#{v}"] end)
      end) ++
      Enum.flat_map(extra_create_options(System.get_env("PLUGBOARD_EXTRA_CREATE_OPTIONS")), &["--create-option", &1]) ++
      if(opts[:callback_bridge] == false, do: ["--no-callback-bridge"], else: [])
  end

  # Programs as given (relative to the project root, where the CLI runs: the manifest names them so).
  defp precompile_args(opts, root) do
    programs = List.wrap(opts[:precompile])

    for p <- programs, not File.regular?(Path.expand(p, root)),
        do: Mix.raise("plugboard: precompile: #{inspect(p)} is not a file (relative paths are taken from #{root})")

    Enum.flat_map(programs, &["--precompile", &1]) ++
      Enum.flat_map(pairs(opts[:gpu_target_configs]), fn {name, file} ->
        ["--gpu-target-config", "#{name}=#{Path.expand(file, root)}"]
      end)
  end

  defp cli!(cli, args, release, targets, root) do
    unless File.exists?(cli), do: Mix.raise("plugboard: the CLI #{cli} is missing from release #{release.name}")
    # From the project root: the relative program paths of precompile: are named so in the manifest.
    {output, status} = System.cmd(cli, args, stderr_to_stdout: true, cd: root)

    if status == 0 do
      for line <- String.split(output, "\n", trim: true), do: Mix.shell().info("plugboard: " <> line)
    else
      # The targets the CLI's error names (by package or path), else all of them.
      named = for {name, source} <- targets, String.contains?(output, source), do: "#{name} (#{source})"
      named = if named == [], do: Enum.map(targets, fn {name, source} -> "#{name} (#{source})" end), else: named

      Mix.raise(
        "plugboard: release #{release.name}: cannot embed target(s) #{Enum.join(named, ", ")}: " <>
          "`plugboard #{hd(args)}` exited with status #{status}:\n" <> String.trim(output)
      )
    end
  end

  defp source(_name, source, root) when is_binary(source),
    do: if(package?(source), do: source, else: Path.expand(source, root))

  defp source(name, source, _),
    do: Mix.raise("plugboard: target #{name} is #{inspect(source)}: give \"PACKAGE==VERSION\" or the path of a plugin file")

  defp package?(source), do: String.contains?(source, "==")

  defp pairs(nil), do: []
  defp pairs(list), do: Enum.map(list, fn {k, v} -> {to_string(k), v} end)

  defp extra_targets(nil), do: []

  defp extra_targets(text) do
    for entry <- String.split(text, ",", trim: true) do
      case String.split(String.trim(entry), "=", parts: 2) do
        [name, source] when name != "" and source != "" -> {name, source}
        _ -> Mix.raise("plugboard: PLUGBOARD_EXTRA_TARGETS entry #{inspect(entry)} is not name=/path/plugin.so")
      end
    end
  end

  defp extra_create_options(nil), do: []

  defp extra_create_options(text) do
    for entry <- String.split(text, ",", trim: true), entry = String.trim(entry) do
      if Regex.match?(~r/^[^:=\s]+:[^:=\s]+=\S+$/, entry),
        do: entry,
        else: Mix.raise("plugboard: PLUGBOARD_EXTRA_CREATE_OPTIONS entry #{inspect(entry)} is not target:key=value")
    end
  end

  defp non_empty(nil), do: nil
  defp non_empty(""), do: nil
  defp non_empty(s), do: s
end
