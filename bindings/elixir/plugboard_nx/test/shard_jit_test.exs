defmodule Plugboard.Nx.ShardJitTest do
  # Nx.Defn.shard_jit/3 on Plugboard.Nx: a data-parallel training step (an MLP; the batch split over
  # the mesh, the parameters whole on every device, the gradient's mean over the whole batch made
  # by XLA's all-reduce) over 2 and 4 devices equals the one-device step on the whole batch, to f32
  # rounding, on every device; each device's result lives on that device. Also: results split as
  # their inputs, a 2x2 mesh, the sharding text, and every refusal by name.
  use ExUnit.Case, async: false
  import Plugboard.Nx.Case

  defmodule Model do
    @moduledoc false
    import Nx.Defn

    defn predict(p, x) do
      h = Nx.tanh(Nx.dot(x, p.w1) + p.b1)
      Nx.dot(h, p.w2) + p.b2
    end

    defn loss(p, x, y) do
      d = predict(p, x) - y
      Nx.mean(d * d)
    end

    defn step(p, x, y) do
      {loss, g} = value_and_grad(p, &loss(&1, x, y))
      lr = 0.1
      {%{w1: p.w1 - lr * g.w1, b1: p.b1 - lr * g.b1, w2: p.w2 - lr * g.w2, b2: p.b2 - lr * g.b2}, loss}
    end

    defn scale_rows(x, s), do: x * 2 + s
  end

  @batch 16

  # Deterministic data: no two rows alike, so that a device seeing only its rows gets another loss.
  defp data do
    w = fn shape, k -> Nx.iota(shape, type: :f32) |> Nx.multiply(k) |> Nx.sin() |> Nx.multiply(0.5) end
    params = %{w1: w.({8, 16}, 0.37), b1: w.({16}, 0.11), w2: w.({16, 4}, 0.23), b2: w.({4}, 0.71)}
    x = w.({@batch, 8}, 0.53)
    y = Nx.cos(w.({@batch, 4}, 0.29))
    {params, x, y}
  end

  defp device_of(%Nx.Tensor{data: %Plugboard.Nx.Backend{buffer: b}}), do: b.device

  # A client of the plugin with four devices, opened once per test run.
  defp four_devices(path) do
    case :persistent_term.get({__MODULE__, path}, nil) do
      nil ->
        {:ok, c} = Plugboard.open(path, [{"cpu_device_count", 4}])
        :persistent_term.put({__MODULE__, path}, c)
        c

      c ->
        c
    end
  end

  # Both forms, each with its partitioner: the three CPU plugins split both (docs/nx.md, "Many devices").
  @forms [:gspmd, :shardy]

  for {label, path} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        %{c: four_devices(unquote(path))}
      end

      for form <- @forms, devices <- [2, 4] do
        test "a data-parallel training step over #{devices} devices (#{form}) equals the one-device step", %{c: c} do
          form = unquote(form)
          n = unquote(devices)

          {params, x, y} = data()
          {want_params, want_loss} = Nx.Defn.jit_apply(&Model.step/3, [params, x, y], compiler: Plugboard.Nx, client: c)

          rows = div(@batch, n)
          args = for k <- 0..(n - 1), do: [params, Nx.slice_along_axis(x, k * rows, rows), Nx.slice_along_axis(y, k * rows, rows)]
          mesh = %Nx.Mesh{name: "batch", shape: {n}}

          results =
            Nx.Defn.shard_jit(&Model.step/3, mesh, compiler: Plugboard.Nx, client: c, partitioner: form, input_shardings: [%{}, %{0 => [0]}, %{0 => [0]}]).(args)

          assert length(results) == n
          # Each device's result is on that device: the step ran on n devices.
          assert Enum.map(results, fn {p, l} -> [device_of(l) | Enum.map(Map.values(p), &device_of/1)] |> Enum.uniq() end) ==
                   Enum.map(0..(n - 1), &[&1])

          # And each holds the whole batch's step: the devices' gradients were combined.
          for {got_params, got_loss} <- results do
            assert_containers(got_loss, want_loss, atol: 1.0e-6, rtol: 1.0e-5)
            assert_containers(got_params, want_params, atol: 1.0e-6, rtol: 1.0e-5)
          end

          # The comparison can tell: one device's rows alone give another loss.
          {_, alone} = Nx.Defn.jit_apply(&Model.step/3, Enum.at(args, 0), compiler: Plugboard.Nx, client: c)
          refute Nx.to_number(Nx.all_close(alone, want_loss, atol: 1.0e-6, rtol: 1.0e-5)) == 1
        end
      end

      test "a result split as its input comes back in parts, each on its device", %{c: c} do
        for form <- @forms do
          x = Nx.iota({8, 3}, type: :f32)
          s = Nx.tensor([1.0, 2.0, 3.0])
          args = for k <- 0..3, do: [Nx.slice_along_axis(x, 2 * k, 2), s]
          mesh = %Nx.Mesh{name: "rows", shape: {4}}
          parts = Nx.Defn.shard_jit(&Model.scale_rows/2, mesh, compiler: Plugboard.Nx, client: c, partitioner: form, input_shardings: [%{0 => [0]}, %{}]).(args)
          assert Enum.map(parts, &device_of/1) == [0, 1, 2, 3]
          assert Enum.map(parts, & &1.shape) == List.duplicate({2, 3}, 4)
          assert_containers(Nx.concatenate(Enum.map(parts, &Nx.backend_transfer(&1, Nx.BinaryBackend))), Model.scale_rows(x, s), [])
        end
      end

      test "a vectorized and a plain call of the same inner shape get each their own program (regression)", %{c: c} do
        # The cache key once left out the vectorized axes (a copy of jit's key that lost them): the
        # second call ran the first's program.
        mesh = %Nx.Mesh{name: "rows", shape: {2}}
        s = Nx.tensor([1.0, 2.0, 3.0])
        plain = Nx.iota({4, 3}, type: :f32)
        vectorized = Nx.iota({2, 4, 3}, type: :f32) |> Nx.add(100) |> Nx.vectorize(:v)
        split = fn x -> for k <- 0..1, do: [x[[2 * k..(2 * k + 1), ..]], s] end
        want = fn x -> Model.scale_rows(x, s) end

        for form <- @forms, order <- [[vectorized, plain], [plain, vectorized]] do
          Plugboard.Nx.Cache.clear()

          for x <- order do
            jit = Nx.Defn.shard_jit(&Model.scale_rows/2, mesh, compiler: Plugboard.Nx, client: c, partitioner: form, input_shardings: [%{0 => [0]}, %{}])
            parts = jit.(split.(x))
            assert Enum.map(parts, &device_of/1) == [0, 1]
            assert Enum.map(parts, & &1.vectorized_axes) == List.duplicate(x.vectorized_axes, 2)
            got = parts |> Enum.map(&Nx.backend_transfer(&1, Nx.BinaryBackend)) |> Nx.concatenate()
            assert got.vectorized_axes == x.vectorized_axes
            assert Nx.to_flat_list(Nx.devectorize(got)) == Nx.to_flat_list(Nx.devectorize(want.(x)))
          end
        end
      end

      test "a constant over 64 KiB (a parameter kept on each device) takes part whole", %{c: c} do
        big = Nx.iota({8, 4096}, type: :f32) |> Nx.divide(1000)
        x = Nx.iota({8, 4096}, type: :f32) |> Nx.negate()
        args = for k <- 0..3, do: [Nx.slice_along_axis(x, 2 * k, 2)]
        mesh = %Nx.Mesh{name: "rows", shape: {4}}

        for form <- @forms do
          parts = Nx.Defn.shard_jit(&Nx.add(&1, big), mesh, compiler: Plugboard.Nx, client: c, partitioner: form, input_shardings: [%{0 => [0]}]).(args)
          assert Enum.map(parts, &device_of/1) == [0, 1, 2, 3]
          assert_containers(Nx.concatenate(Enum.map(parts, &Nx.backend_transfer(&1, Nx.BinaryBackend))), Nx.add(x, big), [])
        end
      end

      test "a 2x2 mesh: the batch split over both axes, on chosen devices", %{c: c} do
        for form <- @forms do
          {params, x, y} = data()
          {want_params, want_loss} = Nx.Defn.jit_apply(&Model.step/3, [params, x, y], compiler: Plugboard.Nx, client: c)
          args = for k <- 0..3, do: [params, Nx.slice_along_axis(x, 4 * k, 4), Nx.slice_along_axis(y, 4 * k, 4)]
          mesh = %Nx.Mesh{name: "grid", shape: {2, 2}}
          shardings = [%{}, %{0 => [0, 1]}, %{0 => [0, 1]}]
          results = Nx.Defn.shard_jit(&Model.step/3, mesh, compiler: Plugboard.Nx, client: c, partitioner: form, input_shardings: shardings, devices: [3, 2, 1, 0]).(args)
          assert Enum.map(results, fn {_, l} -> device_of(l) end) == [3, 2, 1, 0]

          for {got_params, got_loss} <- results do
            assert_containers(got_loss, want_loss, atol: 1.0e-6, rtol: 1.0e-5)
            assert_containers(got_params, want_params, atol: 1.0e-6, rtol: 1.0e-5)
          end
        end
      end

      test "what cannot be done is named", %{c: c} do
        mesh = %Nx.Mesh{name: "m", shape: {2}}
        x = Nx.tensor([1.0, 2.0])
        jit = fn opts, args -> Nx.Defn.shard_jit(&Nx.add(&1, 1), mesh, [compiler: Plugboard.Nx, client: c] ++ opts).(args) end
        assert_raise ArgumentError, ~r/input_shardings: is required/, fn -> jit.([], [[x], [x]]) end
        assert_raise ArgumentError, ~r/has 2 device\(s\); 1 argument list\(s\) given/, fn -> jit.([input_shardings: [%{0 => [0]}]], [[x]]) end
        assert_raise ArgumentError, ~r/input_shardings: 2 given for 1 argument/, fn -> jit.([input_shardings: [%{}, %{}]], [[x], [x]]) end
        assert_raise ArgumentError, ~r/argument 0: 3 is no axis/, fn -> jit.([input_shardings: [%{3 => [0]}]], [[x], [x]]) end
        assert_raise ArgumentError, ~r/mesh axes are indices/, fn -> jit.([input_shardings: [%{0 => [1]}]], [[x], [x]]) end
        assert_raise ArgumentError, ~r/partitioner: must be :gspmd or :shardy/, fn -> jit.([input_shardings: [%{}], partitioner: :mpmd], [[x], [x]]) end

        big = %Nx.Mesh{name: "big", shape: {8}}
        assert_raise ArgumentError, ~r/the mesh has 8 devices, the client .* has 4 .*cpu_device_count/, fn ->
          Nx.Defn.shard_jit(&Nx.add(&1, 1), big, compiler: Plugboard.Nx, client: c, input_shardings: [%{}]).(List.duplicate([x], 8))
        end

        hooked = fn t -> Nx.Defn.Kernel.hook(Nx.add(t, 1), :seen, fn _ -> :ok end) end
        assert_raise ArgumentError, ~r/host calls/, fn ->
          Nx.Defn.shard_jit(hooked, mesh, compiler: Plugboard.Nx, client: c, input_shardings: [%{}]).([[x], [x]])
        end
      end
    end
  end

  test "GSPMD sharding text: tiles per axis, replicated mesh axes last, devices in tile order" do
    assert Plugboard.Nx.Shard.gspmd({4}, [], 2) == "{replicated}"
    assert Plugboard.Nx.Shard.gspmd({4}, [{0, [0]}], 2) == "{devices=[4,1]0,1,2,3}"
    # Axis 1 over mesh axis 0 of a 2x2 mesh, replicated over mesh axis 1.
    assert Plugboard.Nx.Shard.gspmd({2, 2}, [{1, [0]}], 2) == "{devices=[1,2,2]0,1,2,3 last_tile_dim_replicate}"
    # Over mesh axis 1 only: the tiles follow axis 1, replicas go down axis 0.
    assert Plugboard.Nx.Shard.gspmd({2, 2}, [{0, [1]}], 1) == "{devices=[2,2]0,2,1,3 last_tile_dim_replicate}"
    # Axis 0 over both mesh axes, major first; transposed.
    assert Plugboard.Nx.Shard.gspmd({2, 2}, [{0, [0, 1]}], 1) == "{devices=[4]0,1,2,3}"
    assert Plugboard.Nx.Shard.gspmd({2, 2}, [{0, [1, 0]}], 1) == "{devices=[4]0,2,1,3}"
    assert Plugboard.Nx.Shard.gspmd({2, 2}, [{0, [1]}, {1, [0]}], 2) == "{devices=[2,2]0,2,1,3}"
  end
end
