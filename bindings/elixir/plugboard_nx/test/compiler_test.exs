defmodule Plugboard.Nx.CompilerTest do
  use ExUnit.Case, async: true
  import Plugboard.Nx.Case

  for {label, path} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        %{c: client(unquote(path))}
      end

      test "elementwise arithmetic with broadcasting and type promotion", %{c: c} do
        a = Nx.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        b = Nx.tensor([10, 20, 30], type: :s32)
        assert_same(c, fn a, b -> Nx.add(a, b) |> Nx.multiply(2) |> Nx.subtract(b) |> Nx.divide(3) end, [a, b])
        assert_same(c, fn a, b -> {Nx.max(a, b), Nx.min(a, 2.5), Nx.pow(a, 2), Nx.remainder(b, 7)} end, [a, b])
      end

      test "integer ops: quotient, remainder, shifts, bitwise", %{c: c} do
        a = Nx.tensor([-7, 7, 100, -100], type: :s32)
        b = Nx.tensor([2, -3, 7, 9], type: :s32)
        assert_same(c, fn a, b -> {Nx.quotient(a, b), Nx.remainder(a, b), Nx.bitwise_and(a, b), Nx.bitwise_xor(a, b)} end, [a, b])
        assert_same(c, fn a -> {Nx.left_shift(a, 2), Nx.right_shift(a, 1), Nx.bitwise_not(a)} end, [a])
        u = Nx.tensor([1, 128, 255, 7], type: :u8)
        assert_same(c, fn u -> {Nx.right_shift(u, 1), Nx.population_count(u), Nx.count_leading_zeros(u)} end, [u])
      end

      test "comparisons, logical ops and select", %{c: c} do
        a = Nx.tensor([1.0, :nan, 3.0, -1.0])
        b = Nx.tensor([1.0, 2.0, 2.0, 0.0])
        assert_same(c, fn a, b -> {Nx.equal(a, b), Nx.greater(a, b), Nx.less_equal(a, b), Nx.not_equal(a, b)} end, [a, b])
        assert_same(c, fn a, b -> Nx.select(Nx.greater(a, b), a, b) end, [a, b])
        assert_same(c, fn a, b -> {Nx.logical_and(a, b), Nx.logical_or(a, 0), Nx.logical_xor(a, b), Nx.logical_not(b)} end, [a, b])
        inf = Nx.tensor([1.0, :infinity, :nan, :neg_infinity])
        assert_same(c, fn a, inf -> {Nx.is_nan(a), Nx.is_infinity(inf), Nx.is_nan(inf)} end, [a, inf])
      end

      test "unary math", %{c: c} do
        x = Nx.tensor([0.1, 0.5, 0.9, 1.5])
        fun = fn x ->
          {Nx.exp(x), Nx.log(x), Nx.sqrt(x), Nx.rsqrt(x), Nx.tanh(x), Nx.sigmoid(x), Nx.sin(x), Nx.cos(x),
           Nx.tan(x), Nx.erf(x), Nx.erfc(x), Nx.expm1(x), Nx.log1p(x), Nx.cbrt(x), Nx.atan(x), Nx.asinh(x),
           Nx.cosh(x), Nx.sinh(x), Nx.acosh(Nx.add(x, 1)), Nx.atanh(Nx.multiply(x, 0.5)), Nx.asin(Nx.multiply(x, 0.5)),
           Nx.acos(Nx.multiply(x, 0.5)), Nx.erf_inv(Nx.multiply(x, 0.5))}
        end

        assert_same(c, fun, [x])
        y = Nx.tensor([-2.5, -0.5, 0.5, 2.5])
        assert_same(c, fn y -> {Nx.floor(y), Nx.ceil(y), Nx.round(y), Nx.abs(y), Nx.sign(y), Nx.negate(y)} end, [y])
      end

      test "types: as_type, bitcast, f16, bf16, f64, u64, complex", %{c: c} do
        x = Nx.tensor([1.5, -2.25, 3.0e4, 0.0])
        assert_same(c, fn x -> {Nx.as_type(x, :f16), Nx.as_type(x, :bf16), Nx.as_type(x, :f64), Nx.as_type(x, :s32)} end, [x])
        assert_same(c, fn x -> Nx.bitcast(x, :u32) end, [x])
        z = Nx.tensor([Complex.new(1, 2), Complex.new(-3, 0.5)])
        assert_same(c, fn z -> {Nx.real(z), Nx.imag(z), Nx.conjugate(z), Nx.abs(z), Nx.multiply(z, z)} end, [z])
        # stablehlo.cbrt refuses complex operands (regression): the principal root, as Nx computes it.
        w = Nx.tensor([Complex.new(8, 0), Complex.new(-1, 1), Complex.new(0, -27), Complex.new(-8, 0)])
        assert_same(c, &Nx.cbrt/1, [w])
        assert_same(c, &Nx.cbrt/1, [Nx.as_type(w, :c128)])
        assert_same(c, fn z -> Nx.Defn.grad(z, &Nx.sum(Nx.real(Nx.cbrt(&1)))) end, [w])
        u = Nx.tensor([1, 18_446_744_073_709_551_615], type: :u64)
        assert_same(c, fn u -> Nx.subtract(u, 1) end, [u])
      end

      test "constants and literal tensors inside defn", %{c: c} do
        x = Nx.tensor([1.0, 2.0])
        assert_same(c, fn x -> Nx.add(x, Nx.tensor([10.0, 20.0])) |> Nx.multiply(Nx.Constants.pi()) end, [x])
        assert_same(c, fn x -> {Nx.add(x, Nx.Constants.nan()), Nx.min(x, Nx.Constants.infinity())} end, [x])
      end

      test "shape ops: reshape, transpose, broadcast, pad (negative too), reverse, concatenate, squeeze", %{c: c} do
        x = Nx.iota({2, 3, 4}, type: :f32)
        assert_same(c, fn x -> {Nx.reshape(x, {6, 4}), Nx.transpose(x, axes: [2, 0, 1]), Nx.reverse(x, axes: [1])} end, [x])
        assert_same(c, fn x -> Nx.broadcast(Nx.sum(x, axes: [2]), {5, 2, 3}) end, [x])
        assert_same(c, fn x -> Nx.pad(x, 0.5, [{1, 2, 0}, {0, 0, 1}, {-1, 1, 0}]) end, [x])
        assert_same(c, fn x -> Nx.concatenate([x, Nx.multiply(x, 2)], axis: 1) end, [x])
        assert_same(c, fn x -> Nx.squeeze(Nx.new_axis(x, 0)) end, [x])
      end

      test "slices: static, dynamic and strided; put_slice", %{c: c} do
        x = Nx.iota({5, 6}, type: :s64)
        assert_same(c, fn x -> {Nx.slice(x, [1, 2], [3, 3]), Nx.slice(x, [0, 0], [5, 6], strides: [2, 3])} end, [x])
        i = Nx.tensor(3)
        assert_same(c, fn x, i -> Nx.slice(x, [i, 1], [2, 4], strides: [1, 2]) end, [x, i])
        assert_same(c, fn x, i -> Nx.put_slice(x, [i, 4], Nx.tensor([[100, 200, 300]])) end, [x, i])
      end

      test "iota, eye, dot (batched, mixed precision)", %{c: c} do
        a = Nx.iota({2, 3, 4}, type: :f32)
        b = Nx.iota({2, 4, 5}, type: :s32)
        assert_same(c, fn a, b -> Nx.dot(a, [2], [0], b, [1], [0]) end, [a, b])
        assert_same(c, fn a -> {Nx.dot(a, a), Nx.eye(3), Nx.iota({2, 3}, axis: 1), Nx.iota({2, 3})} end, [Nx.tensor([1.0, 2.0])])
      end

      test "reductions: sum, product, max, min, all, any, keep_axes", %{c: c} do
        x = Nx.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
        assert_same(c, fn x ->
          {Nx.sum(x), Nx.sum(x, axes: [1]), Nx.product(x, axes: [0], keep_axes: true), Nx.reduce_max(x), Nx.reduce_min(x, axes: [1]),
           Nx.all(x), Nx.any(Nx.greater(x, 4), axes: [0])}
        end, [x])
        i = Nx.tensor([[1, 2], [3, 4]], type: :u8)
        assert_same(c, fn i -> {Nx.sum(i), Nx.reduce_max(i), Nx.reduce_min(Nx.as_type(i, :s16))} end, [i])
      end

      test "reduce with a function, cond and while", %{c: c} do
        x = Nx.tensor([1.0, 2.0, 3.0, 4.0])
        assert_same(c, fn x -> Nx.reduce(x, 1.0, fn a, b -> Nx.multiply(a, b) end) end, [x])
        assert_same(c, &Plugboard.Nx.Fixtures.clamp_sum/1, [x])
        assert_same(c, &Plugboard.Nx.Fixtures.count_to/1, [Nx.tensor(5)])
        assert_same(c, &Plugboard.Nx.Fixtures.tuple_loop/2, [Nx.tensor(3), x])
      end

      test "a parameter used after a while loop is the function's, not the loop's (regression)", %{c: c} do
        # Two loops in a row over a key, as Nx.Random does: the second loop's initial values and
        # the code after it read the function's parameter again.
        key = Nx.Random.key(42)
        assert_same(c, fn key -> Nx.Random.uniform(key, shape: {3}) end, [key])
        assert_same(c, fn key -> {Nx.Random.normal(key, shape: {2, 2}), Nx.Random.randint(key, 0, 10, shape: {4})} end, [key])
      end

      test "an MLP forward and its gradient", %{c: c} do
        key = Nx.Random.key(42)
        {w1, key} = Nx.Random.normal(key, shape: {4, 8})
        {w2, key} = Nx.Random.normal(key, shape: {8, 2})
        {x, _} = Nx.Random.uniform(key, shape: {16, 4})
        assert_same(c, &Plugboard.Nx.Fixtures.mlp_grad/3, [w1, w2, x], atol: 1.0e-4)
      end

      test "vectorized tensors: elementwise, reductions and dot per vectorized entry", %{c: c} do
        x = Nx.iota({3, 4}, type: :f32) |> Nx.vectorize(:rows)
        w = Nx.tensor([1.0, -1.0, 2.0, 0.5])
        out = assert_same(c, fn x, w -> {Nx.sum(x), Nx.multiply(x, w), Nx.dot(x, w)} end, [x, w])
        assert elem(out, 0).vectorized_axes == [rows: 3]
      end

      test "a cond over vectorized predicates returning a container with vectorized leaves (regression)", %{c: c} do
        # The branches' vectorized values were typed by their inner shape: a module XLA refused.
        pred = Nx.vectorize(Nx.tensor([2, 0, 0]), :pred)
        args = [pred, {1, 2, 3}, {7, 8, Nx.vectorize(Nx.tensor([9, 10, 11]), :x)}]
        assert_same(c, &Plugboard.Nx.VectorizedFixtures.vectorized_if/3, args)
      end

      test "calls whose containers differ (a map's keys) compile apart (regression)", %{c: c} do
        # The cache was keyed by the flattened tensors only: the second map got the first's keys.
        assert_same(c, &Plugboard.Nx.ScopeFixtures.next_iteration/1, [%{iteration: 0, abc: 1}])
        assert_same(c, &Plugboard.Nx.ScopeFixtures.next_iteration/1, [%{iteration: 0, xyz: 1}])
        assert_same(c, &Plugboard.Nx.ScopeFixtures.next_iteration/1, [%{iteration: 0}])
      end

      test "output_backend: transfers the results (here to Nx.BinaryBackend)", %{c: c} do
        out = Nx.Defn.jit_apply(fn x -> {Nx.add(x, 1), x} end, [Nx.tensor([1, 2])], compiler: Plugboard.Nx, client: c, output_backend: Nx.BinaryBackend)
        assert {%Nx.Tensor{data: %Nx.BinaryBackend{}} = a, %Nx.Tensor{data: %Nx.BinaryBackend{}}} = out
        assert a == Nx.tensor([2, 3])
      end

      test "results stay on the device as Plugboard.Nx.Backend tensors", %{c: c} do
        out = Nx.Defn.jit_apply(fn x -> Nx.add(x, 1) end, [Nx.tensor([1, 2])], compiler: Plugboard.Nx, client: c)
        assert %Plugboard.Nx.Backend{} = out.data
        again = Nx.Defn.jit_apply(fn x -> Nx.multiply(x, 3) end, [out], compiler: Plugboard.Nx, client: c)
        assert Nx.to_flat_list(again) == [6, 9]
      end
    end
  end

  test "Nx.Serving partitions: max_concurrency copies of the options (one per device otherwise: placement_test)" do
    assert Plugboard.Nx.__partitions_options__(max_concurrency: 3, debug: true) == List.duplicate([max_concurrency: 3, debug: true], 3)
  end

  test "to_mlir returns the module for reading" do
    text = Plugboard.Nx.to_mlir(fn a, b -> Nx.add(a, Nx.multiply(b, 2)) end, [Nx.template({2}, :f32), Nx.template({2}, :f32)])
    assert text =~ "func.func public @main(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>) -> (tensor<2xf32>)"
    assert text =~ "stablehlo.multiply"
    assert text =~ "stablehlo.add"
  end

  test "a large captured constant is a parameter, not megabytes of program text; small ones stay inline" do
    big = Nx.iota({1_000_000}, type: :f32, backend: Nx.BinaryBackend)
    fun = fn x -> Nx.add(x, big) end
    text = Plugboard.Nx.to_mlir(fun, [Nx.template({1_000_000}, :f32)])
    assert byte_size(text) < 2_000
    assert text =~ "%const0: tensor<1000000xf32>"
    small = Plugboard.Nx.to_mlir(fn x -> Nx.add(x, Nx.tensor([1.0, 2.0], backend: Nx.BinaryBackend)) end, [Nx.template({2}, :f32)])
    assert small =~ "stablehlo.constant dense<"

    {_, path} = hd(cpu_plugins())
    c = client(path)
    x = Nx.broadcast(1.0, {1_000_000})
    for device <- [nil, 1] do
      opts = [compiler: Plugboard.Nx, client: c] ++ if(device, do: [device_id: device], else: [])
      result = Nx.Defn.jit_apply(fun, [x], opts)
      assert result |> Nx.slice([999_998], [2]) |> Nx.to_flat_list() == [999_999.0, 1_000_000.0]
    end
  end

  @tag timeout: 30_000
  test "a closure over a heavily shared expression (Nx.Defn.Graph.run) compiles without hashing every path (regression)" do
    # The cache keyed on the closure itself, so on the expression it holds: hashing a chain of 45
    # `acc + acc` visits 2^45 paths, and Nx's own graph_test held a scheduler for good.
    {_, path} = hd(cpu_plugins())
    c = client(path)
    fun = fn x -> Enum.reduce(1..45, x, fn _, acc -> Nx.add(acc, acc) end) end
    x = Nx.tensor([1.0, 2.0])
    stages = Nx.Defn.Graph.split(Nx.Defn.debug_expr(fun).(x), fn _ -> :none end)
    result = Nx.Defn.Graph.run(stages, [x], compiler: Plugboard.Nx, client: c)
    assert Nx.to_flat_list(result) == [:math.pow(2, 45), :math.pow(2, 46)]
  end
end
