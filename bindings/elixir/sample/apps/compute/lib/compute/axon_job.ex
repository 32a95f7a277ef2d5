# Compiled only when the release is built with Axon (see apps/compute/mix.exs).
if Code.ensure_loaded?(Axon) and Code.ensure_loaded?(Plugboard.Nx) do
  defmodule Compute.AxonJob do
    @moduledoc """
    An Axon model on the target the release booted, from training to serving:

      1. a small CNN (28×28×1 → two 3×3 convolutions with max pooling → dense 10, softmax) is
         trained with `Axon.Loop` and Polaris' Adam for a few hundred steps on synthetic
         MNIST-shaped data (ten fixed class prototypes plus noise), every step compiled by
         `Plugboard.Nx` for the booted client;
      2. held-back data (drawn from the same prototypes with other noise) gives the loss and the
         accuracy before and after training;
      3. the trained parameters are saved with `Nx.serialize/1` (Axon's parameters-only format)
         and read back from the file;
      4. a named `Nx.Serving` (`Compute.Digits`, batching up to 16 images) is started under
         the compute supervisor with the parameters read back, and concurrent single-image
         requests are answered through it; their answers are compared with the direct prediction.

    Every figure it prints is computed on the target; nothing is fixed in advance.
    """
    import Nx.Defn

    @classes 10
    @train_size 2048
    @test_size 512
    @batch 32
    @steps 300
    @serving_batch 16
    @requests 64

    @doc "The model: two convolutions with pooling, then a dense softmax over the ten classes."
    def model do
      Axon.input("images", shape: {nil, 28, 28, 1})
      |> Axon.conv(8, kernel_size: 3, activation: :relu)
      |> Axon.max_pool(kernel_size: 2)
      |> Axon.conv(16, kernel_size: 3, activation: :relu)
      |> Axon.max_pool(kernel_size: 2)
      |> Axon.flatten()
      |> Axon.dense(@classes, activation: :softmax)
    end

    # Ten prototypes from one key, shared by the training and the held-back set; each sample is its
    # class's prototype plus noise of twice the prototypes' scale, with the one-hot label.
    defn samples(prototype_key, key, opts \\ []) do
      opts = keyword!(opts, [:size])
      {prototypes, _} = Nx.Random.normal(prototype_key, shape: {@classes, 28, 28, 1})
      {labels, key} = Nx.Random.randint(key, 0, @classes, shape: {opts[:size]})
      {noise, _} = Nx.Random.normal(key, 0.0, 2.0, shape: {opts[:size], 28, 28, 1})
      x = Nx.take(prototypes, labels) + noise
      y = Nx.new_axis(labels, 1) == Nx.iota({1, @classes})
      {x, Nx.as_type(y, :f32)}
    end

    defn loss_and_accuracy(probabilities, y) do
      loss = Axon.Losses.categorical_cross_entropy(y, probabilities, reduction: :mean)
      hits = Nx.argmax(probabilities, axis: 1) == Nx.argmax(y, axis: 1)
      {loss, Nx.mean(hits)}
    end

    @doc "Trains, evaluates, saves, reloads and serves; prints one line per stage. Returns `:ok`."
    def run(client) do
      jit = [compiler: Plugboard.Nx, client: client]
      data = fn key, size -> Nx.Defn.jit_apply(&samples/3, [Nx.Random.key(42), Nx.Random.key(key), [size: size]], jit) end
      {train_x, train_y} = data.(1, @train_size)
      {test_x, test_y} = data.(2, @test_size)

      model = model()
      {init, predict} = Axon.build(model, jit)
      initial = init.(Nx.template({1, 28, 28, 1}, :f32), Axon.ModelState.empty())
      evaluate = fn state -> Nx.Defn.jit_apply(&loss_and_accuracy/2, [predict.(state, test_x), test_y], jit) end
      {loss0, acc0} = evaluate.(initial)

      batches = Stream.cycle(Enum.zip(Nx.to_batched(train_x, @batch), Nx.to_batched(train_y, @batch)))
      {microseconds, trained} =
        :timer.tc(fn ->
          model
          |> Axon.Loop.trainer(:categorical_cross_entropy, Polaris.Optimizers.adam(learning_rate: 1.0e-3), log: 0)
          |> Axon.Loop.run(batches, initial, [epochs: 1, iterations: @steps] ++ jit)
        end)

      {loss1, acc1} = evaluate.(trained)
      IO.puts("axon: CNN on #{client.platform} (#{Path.basename(client.plugin)}): held-back loss #{round4(loss0)} -> #{round4(loss1)}, " <>
                "accuracy #{round4(acc0)} -> #{round4(acc1)} after #{@steps} steps of #{@batch} (#{div(microseconds, 1000)} ms)")

      path = save(trained)
      params = path |> File.read!() |> Nx.deserialize() |> Axon.ModelState.new()
      IO.puts("axon: parameters saved to #{path} (#{File.stat!(path).size} bytes) and read back")
      serve(model, params, test_x, jit)
    end

    defp save(%Axon.ModelState{data: data}) do
      dir = System.get_env("COMPUTE_MODEL_DIR") || System.tmp_dir!()
      path = Path.join(dir, "digits_cnn.nx")
      File.write!(path, Nx.serialize(data))
      path
    end

    # The serving answers single images; Nx.Serving batches concurrent requests (up to @serving_batch).
    defp serve(model, params, images, jit) do
      counts = :counters.new(2, [])

      serving =
        Nx.Serving.new(fn defn_options ->
          {_init, predict} = Axon.build(model, defn_options)
          fn %Nx.Batch{size: size} = batch ->
            :counters.add(counts, 1, 1)
            :counters.add(counts, 2, size)
            predict.(params, batch)
          end
        end, jit)

      {:ok, _} = Supervisor.start_child(Compute.Supervisor, {Nx.Serving, serving: serving, name: Compute.Digits, batch_size: @serving_batch, batch_timeout: 50})
      requests = Enum.to_list(0..(@requests - 1))

      served =
        requests
        |> Task.async_stream(fn i -> Nx.Serving.batched_run(Compute.Digits, Nx.Batch.stack([images[i]])) end, max_concurrency: @requests, ordered: true, timeout: 60_000)
        |> Enum.map(fn {:ok, probabilities} -> probabilities |> Nx.argmax(axis: 1) |> Nx.to_flat_list() |> hd() end)

      {_init, predict} = Axon.build(model, jit)
      direct = predict.(params, images[0..(@requests - 1)]) |> Nx.argmax(axis: 1) |> Nx.to_flat_list()
      batches = :counters.get(counts, 1)

      IO.puts("axon: Nx.Serving #{inspect(Compute.Digits)} answered #{@requests} concurrent requests in #{batches} batches " <>
                "(batch_size #{@serving_batch}, #{:counters.get(counts, 2)} images); answers equal the direct prediction: #{served == direct}")
      :ok
    end

    defp round4(tensor), do: tensor |> Nx.to_number() |> Float.round(4)
  end
end
