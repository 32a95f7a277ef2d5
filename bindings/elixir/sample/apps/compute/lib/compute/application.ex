defmodule Compute.Application do
  @moduledoc """
  The compute release's application. `:plugboard` starts before it and boots a target from the
  bundle embedded in the release; when no target starts, neither does this application, and the
  release stops with a non-zero exit.

  With Nx in the release, it starts `Compute.Model`'s serving (`Plugboard.Serving`: the node's share
  of the cluster's requests). With `COMPUTE_DEMO=1`, `bin/compute start` runs `Compute.Demo` once and
  halts (0 when it succeeded).
  """
  use Application

  @impl true
  def start(_type, _args) do
    demo = if System.get_env("COMPUTE_DEMO") in ["1", "true"], do: [Supervisor.child_spec({Task, &Compute.Demo.run_and_halt/0}, restart: :temporary)], else: []
    model = if Code.ensure_loaded?(Compute.Model), do: [Compute.Model], else: []
    Supervisor.start_link(model ++ demo, strategy: :one_for_one, name: Compute.Supervisor)
  end
end
