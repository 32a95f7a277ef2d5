# Compiled only when the release is built with Nx (see apps/compute/mix.exs).
if Code.ensure_loaded?(Nx) and Code.ensure_loaded?(Plugboard.Serving) do
  defmodule Compute.Model do
    @moduledoc """
    The compute node's share of the cluster: a named serving (`Compute.Model`) started through
    `Plugboard.Serving` on the target the node booted, for `web` (or any node) to call with
    `Plugboard.Serving.run(Compute.Model, batch)`.

    The model is an affine map of 64 features to 16, `x · W + b`, with `W[i][j] = rem(7i + 3j, 7) - 3`
    and `b[j] = j`: on inputs of small integers every answer is exact in f32, so a caller can check
    each one (`Web.Cluster` does). The serving is declared idempotent (a pure function: a request
    lost with its node may run again elsewhere).

    Configuration (`config :compute`, from `config/runtime.exs`): `serving_weight:` overrides the
    weight `Plugboard.Serving` gives the node (devices × kind); `serving_delay_ms:` adds that much
    to every batch — a slower machine, simulated, for the routing benchmark.
    """
    import Nx.Defn

    @features 64
    @outputs 16
    @batch_size 16

    def features, do: @features

    defn affine(x, w, b), do: Nx.dot(x, w) + b

    @doc "The weights, as the formula in the moduledoc gives them."
    def weights do
      rows = for i <- 0..(@features - 1), do: for(j <- 0..(@outputs - 1), do: rem(7 * i + 3 * j, 7) - 3)
      w = Nx.tensor(rows, type: :f32)
      {w, Nx.iota({@outputs}, type: :f32)}
    end

    @doc "The child that starts the serving (under Compute.Supervisor)."
    def child_spec(_) do
      config = Application.get_all_env(:compute)
      opts = [serving: serving(config[:serving_delay_ms] || 0), name: __MODULE__, batch_size: @batch_size, batch_timeout: 5, idempotent: true]
      opts = if config[:serving_weight], do: Keyword.put(opts, :weight, config[:serving_weight]), else: opts
      Supervisor.child_spec({Plugboard.Serving, opts}, id: __MODULE__)
    end

    @doc "Batches and rows this node has run (`{batches, rows}`): the batch fill ratio is rows / (batches × #{@batch_size})."
    def stats do
      case :persistent_term.get({__MODULE__, :counts}, nil) do
        nil -> {0, 0}
        counts -> {:counters.get(counts, 1), :counters.get(counts, 2)}
      end
    end

    def batch_size, do: @batch_size

    defp serving(delay_ms) do
      counts = :counters.new(2, [:atomics])
      :persistent_term.put({__MODULE__, :counts}, counts)

      Nx.Serving.new(
        fn defn_options ->
          {w, b} = weights()
          run = Nx.Defn.jit(&affine/3, defn_options)

          # Every batch padded to the full size: one shape, so one compile per device (Nx.Serving
          # drops the padding rows from the answers).
          fn %Nx.Batch{size: size} = batch ->
            if delay_ms > 0, do: Process.sleep(delay_ms)
            :counters.add(counts, 1, 1)
            :counters.add(counts, 2, size)
            run.(Nx.Batch.pad(batch, @batch_size - size), w, b)
          end
        end,
        compiler: Plugboard.Nx
      )
    end
  end
end
