defmodule Sample.MixProject do
  use Mix.Project

  # An umbrella of three apps and three releases. Only `compute` runs programs: its release embeds a
  # bundle of three accelerator targets (Plugboard.Release.embed/1) and picks one when it boots.
  def project do
    [
      apps_path: "apps",
      version: "0.1.0",
      start_permanent: Mix.env() == :prod,
      deps: [],
      releases: releases()
    ]
  end

  defp releases do
    [
      web: [applications: [web: :permanent]],
      # scripts/gpu_check.sh's release: compute without an embedded bundle (small enough to carry to a
      # GPU machine); it boots the plugin PLUGBOARD_PLUGIN_PATH names there.
      gpu_check: [applications: [compute: :permanent]],
      worker: [applications: [worker: :permanent]],
      compute: [
        applications: [compute: :permanent],
        steps: [:assemble, &Plugboard.Release.embed/1],
        plugboard: [
          targets: [cpu: "xla-cpu-pjrt==0.0.1", cuda13: "jax-cuda13-pjrt==0.12.0.1", rocm7: "jax-rocm7-pjrt==0.12.0"],
          # Compiled into the bundle for every target that compiles here (cpu; cuda13 too, for an H200
          # described by gpu_target_configs, with no GPU here): the first request pays no compile.
          precompile: ["apps/compute/programs/model.mlir"],
          gpu_target_configs: [cuda13: "../../../examples/gpu/h200.textproto"]
          # lock_file: "plugboard.lock" (the default), offline: "wheels/" (or PLUGBOARD_WHEELS=DIR)
        ]
      ]
    ]
  end
end
