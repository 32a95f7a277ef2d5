defmodule Plugboard.Nx.AxonTest do
  # Axon (with Polaris) on Plugboard.Nx, as an Axon user writes it: training with Axon.Loop and a
  # Polaris optimizer, checkpoints read back, Axon.build with compiler: Plugboard.Nx, a mixed precision
  # policy, hooks on map containers. Approximate results are judged against Nx.Defn.Evaluator on
  # Nx.BinaryBackend from the same parameters.
  use ExUnit.Case, async: true
  import Plugboard.Nx.Case

  # Axon.Loop.run logs the options it forwards to the compiler (Logger.debug).
  @moduletag :tmp_dir
  @moduletag capture_log: true

  defp mlp do
    Axon.input("x", shape: {nil, 4})
    |> Axon.dense(16, activation: :tanh, name: "hidden")
    |> Axon.dense(1, name: "out")
  end

  # y = x0 - 2 x1 + 0.5 x2 x3: batches of 16, the same every run.
  defp batches(n) do
    key = Nx.Random.key(7)

    Enum.map(1..n, fn i ->
      {x, _} = Nx.Random.uniform(Nx.Random.fold_in(key, i), -1.0, 1.0, shape: {16, 4})
      y = Nx.add(Nx.subtract(x[[.., 0]], Nx.multiply(2, x[[.., 1]])), Nx.multiply(0.5, Nx.multiply(x[[.., 2]], x[[.., 3]])))
      {x, Nx.reshape(y, {16, 1})}
    end)
  end

  # Parameters made once, on the binary backend, so that both compilers start from the same ones.
  defp initial_state(model) do
    {init_fn, _} = Axon.build(model, compiler: Nx.Defn.Evaluator, seed: 11)
    init_fn.(Nx.template({1, 4}, :f32), Axon.ModelState.empty())
  end

  defp on_host(container), do: Nx.backend_copy(container, Nx.BinaryBackend)

  defp mse(model, state, {x, y}, opts) do
    {_, predict_fn} = Axon.build(model, opts)
    predict_fn.(state, x) |> Nx.subtract(y) |> Nx.pow(2) |> Nx.mean() |> Nx.to_number()
  end

  defp train(model, data, state, opts) do
    model
    |> Axon.Loop.trainer(:mean_squared_error, Polaris.Optimizers.adam(learning_rate: 0.02), log: 0)
    |> Axon.Loop.run(data, state, [epochs: 1] ++ opts)
  end

  for {label, path} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        %{c: client(unquote(path))}
      end

      test "Axon.build with compiler: Plugboard.Nx predicts as the Evaluator does, on the device", %{c: c} do
        model = mlp()
        state = initial_state(model)
        {x, _} = hd(batches(1))
        {_, predict_fn} = Axon.build(model, compiler: Plugboard.Nx, client: c)
        {_, expected_fn} = Axon.build(model, compiler: Nx.Defn.Evaluator)
        result = predict_fn.(state, x)
        assert %Plugboard.Nx.Backend{} = result.data
        assert_containers(result, expected_fn.(state, x), [])
        # Parameters made by Plugboard.Nx: the same shapes, on the device.
        {init_fn, _} = Axon.build(model, compiler: Plugboard.Nx, client: c, seed: 11)
        made = init_fn.(Nx.template({1, 4}, :f32), Axon.ModelState.empty())
        assert %Plugboard.Nx.Backend{} = made.data["hidden"]["kernel"].data
        assert Nx.shape(made.data["hidden"]["kernel"]) == {4, 16}
      end

      test "Axon.Loop with Polaris's Adam: the loss falls, the parameters follow the Evaluator's", %{c: c} do
        model = mlp()
        state = initial_state(model)
        data = batches(40)
        trained = train(model, data, state, compiler: Plugboard.Nx, client: c)
        before = mse(model, state, hd(data), compiler: Nx.Defn.Evaluator)
        after_ = mse(model, on_host(trained), hd(data), compiler: Nx.Defn.Evaluator)
        assert after_ < before / 4, "mean squared error #{before} -> #{after_}"
        # The same 40 steps under the Evaluator: the same parameters, to rounding (2.4e-7 measured).
        expected = train(model, data, state, compiler: Nx.Defn.Evaluator)
        assert_containers(on_host(trained.data), expected.data, [])
      end

      test "a checkpoint written by Axon.Loop.checkpoint, and Nx.serialize, read back: the same predictions", %{c: c, tmp_dir: dir} do
        model = mlp()
        data = batches(10)

        trained =
          model
          |> Axon.Loop.trainer(:mean_squared_error, Polaris.Optimizers.sgd(learning_rate: 0.05), log: 0)
          |> Axon.Loop.checkpoint(event: :epoch_completed, path: dir)
          |> Axon.Loop.run(data, initial_state(model), epochs: 1, compiler: Plugboard.Nx, client: c)

        {x, _} = hd(data)
        {_, predict_fn} = Axon.build(model, compiler: Plugboard.Nx, client: c)
        expected = on_host(predict_fn.(trained, x))

        [file] = File.ls!(dir)
        %Axon.Loop.State{step_state: %{model_state: restored}} = Axon.Loop.deserialize_state(File.read!(Path.join(dir, file)))
        assert Nx.to_binary(on_host(predict_fn.(restored, x))) == Nx.to_binary(expected)

        params = trained.data |> Nx.serialize() |> Nx.deserialize()
        assert Nx.to_binary(on_host(predict_fn.(%{trained | data: params}, x))) == Nx.to_binary(expected)
      end

      test "a mixed precision policy (bf16 and f16 compute) predicts close to f32", %{c: c} do
        model = mlp()
        state = initial_state(model)
        {x, _} = hd(batches(1))
        {_, f32_fn} = Axon.build(model, compiler: Plugboard.Nx, client: c)
        full = on_host(f32_fn.(state, x))

        # Measured: bf16 1.8e-3 from f32 and 3.9e-3 (2 ulps) from the Evaluator; f16 3.6e-4 and 0.
        for {compute, tolerance} <- [{{:bf, 16}, 1.0e-2}, {{:f, 16}, 2.0e-3}] do
          policy = Axon.MixedPrecision.create_policy(params: {:f, 32}, compute: compute, output: {:f, 32})
          mixed = Axon.MixedPrecision.apply_policy(model, policy)
          {_, mixed_fn} = Axon.build(mixed, compiler: Plugboard.Nx, client: c)
          result = on_host(mixed_fn.(state, x))
          assert result.type == {:f, 32}
          # Computed in 16 bits: not f32's numbers, but close to them, and to the Evaluator's.
          assert Nx.to_binary(result) != Nx.to_binary(full), "#{inspect(compute)}: the policy changed nothing"
          assert_containers(result, full, atol: tolerance, rtol: 0.0)
          {_, expected_fn} = Axon.build(mixed, compiler: Nx.Defn.Evaluator)
          assert_containers(result, expected_fn.(state, x), atol: tolerance, rtol: 0.0)
        end
      end

      test "hooks on map containers: a layer's parameters at initialization, a container's output", %{c: c} do
        test = self()
        x = Axon.input("x", shape: {nil, 4})
        hidden = x |> Axon.dense(3, name: "hidden") |> Axon.attach_hook(&send(test, {:init, &1}), on: :initialize)

        model =
          Axon.container(%{"a" => hidden, "b" => Axon.relu(hidden)})
          |> Axon.attach_hook(&send(test, {:forward, &1}), on: :forward)

        {init_fn, predict_fn} = Axon.build(model, compiler: Plugboard.Nx, client: c)
        state = init_fn.(Nx.template({2, 4}, :f32), Axon.ModelState.empty())
        assert_receive {:init, %{"kernel" => kernel, "bias" => bias}}
        assert_containers(kernel, on_host(state.data["hidden"]["kernel"]), [])
        assert_containers(bias, on_host(state.data["hidden"]["bias"]), [])

        input = Nx.iota({2, 4}, type: :f32) |> Nx.subtract(3)
        output = predict_fn.(state, input)
        assert_receive {:forward, %{"a" => a, "b" => b}}
        assert_containers(%{"a" => a, "b" => b}, on_host(output), [])
        assert_containers(output, Axon.predict(model, on_host(state), input, compiler: Nx.Defn.Evaluator), [])
      end
    end
  end
end
