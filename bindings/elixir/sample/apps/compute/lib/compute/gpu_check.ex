# Compiled only when the release is built with Nx (see apps/compute/mix.exs).
if Code.ensure_loaded?(Nx) and Code.ensure_loaded?(Plugboard.Nx) do
  defmodule Compute.GpuCheck do
    @moduledoc """
    What `scripts/gpu_check.sh` runs on the booted target: a training step of `Compute.NxJob`'s MLP
    and an `Nx.runtime_call` (an Elixir function called from inside the running program, through
    plugboard's host callbacks: on CUDA, the callback bridge). Prints one line of `key=value`s for the
    script to compare with the same line from a CPU target.
    """
    import Nx.Defn

    # x * 2 goes out to Elixir, comes back + 0.5, and the program goes on with it.
    defn with_runtime_call(x) do
      y = Nx.runtime_call(x, x * 2, [offset: 0.5], &__MODULE__.add_offset/2)
      Nx.sum(y * y)
    end

    def add_offset(t, opts), do: Nx.add(t, opts[:offset])

    def run do
      client = Plugboard.client!()
      {:ok, devices} = Plugboard.devices(client)
      {first, last} = Compute.NxJob.train(client)

      called = Nx.Defn.jit(&with_runtime_call/1, compiler: Plugboard.Nx, client: client).(Nx.iota({8}, type: :f32))

      IO.puts(
        "gpu_check: platform=#{client.platform} devices=#{length(devices)} " <>
          "loss_first=#{Nx.to_number(first)} loss_last=#{Nx.to_number(last)} runtime_call=#{Nx.to_number(called)}"
      )
    end
  end
end
