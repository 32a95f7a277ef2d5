defmodule Plugboard.Nx.OpsTest do
  # Indexing, sorting, windows, conv, fft, linear algebra and map, each against Nx.Defn.Evaluator.
  use ExUnit.Case, async: true
  import Plugboard.Nx.Case

  for {label, path} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        %{c: client(unquote(path))}
      end

      test "16-bit float sums round once: exact answers, not the Evaluator's", %{c: c} do
        run = fn fun, arg -> Nx.to_number(Nx.Defn.jit_apply(fun, [arg], compiler: Plugboard.Nx, client: c)) end
        # 10,000 x f16(0.1) = 999.7559 exactly: 1000.0 in f16.
        assert run.(&Nx.sum/1, Nx.broadcast(Nx.tensor(0.1, type: :f16), {10_000})) == 1000.0
        # Nx.BinaryBackend's bf16 iota(512) holds values that sum to 130,688 exactly; that is 130,560
        # in bf16, and the mean (sum / 512) 255.0.
        bf16 = Nx.iota({512}, type: :bf16)
        assert Enum.sum(Nx.to_list(bf16)) == 130_688
        assert run.(&Nx.mean/1, bf16) == 255.0
        assert run.(&Nx.product/1, Nx.tensor([1.5, 1.5, 1.5, 1.5], type: :f16)) == 5.0625
      end

      test "backend_deallocate frees the device memory now; backend_transfer moves", %{c: c} do
        t = Nx.tensor([1.0, 2.0, 3.0], backend: {Plugboard.Nx.Backend, client: c})
        assert Nx.backend_deallocate(t) == :ok
        assert Nx.backend_deallocate(t) == :already_deallocated
        assert_raise Plugboard.Error, ~r/freed/, fn -> Nx.to_binary(t) end
        u = Nx.tensor([4.0, 5.0], backend: {Plugboard.Nx.Backend, client: c})
        host = Nx.backend_transfer(u, Nx.BinaryBackend)
        assert Nx.to_list(host) == [4.0, 5.0]
        assert Nx.backend_deallocate(u) == :already_deallocated
        # To the same client: nothing moves, nothing is freed.
        v = Nx.tensor([6.0], backend: {Plugboard.Nx.Backend, client: c})
        assert Nx.backend_transfer(v, {Plugboard.Nx.Backend, client: c}) == v
        assert Nx.to_list(v) == [6.0]
      end

      test "gather, take, take_along_axis (out-of-range indices clamped)", %{c: c} do
        t = Nx.iota({4, 5}, type: :f32)
        assert_same(c, fn t, i -> Nx.gather(t, i) end, [t, Nx.tensor([[0, 1], [3, 4], [2, 2]])])
        assert_same(c, fn t, i -> Nx.gather(t, i, axes: [1]) end, [t, Nx.tensor([[0], [4], [2]])])
        assert_same(c, fn t, i -> {Nx.take(t, i, axis: 1), Nx.take(t, i, axis: 0)} end, [t, Nx.tensor([[0, 2], [3, 1]])])
        assert_same(c, fn t, i -> Nx.take_along_axis(t, i, axis: 1) end, [t, Nx.tensor([[0, 4], [1, 1], [2, 0], [3, 3]])])
      end

      test "indexed_add and indexed_put", %{c: c} do
        t = Nx.broadcast(0.0, {3, 4})
        i = Nx.tensor([[0, 1], [2, 3], [0, 1]])
        u = Nx.tensor([1.0, 2.0, 3.0])
        assert_same(c, fn t, i, u -> {Nx.indexed_add(t, i, u), Nx.indexed_put(t, Nx.tensor([[1, 1], [2, 2]]), Nx.tensor([5.0, 6.0]))} end, [t, i, u])
        assert_same(c, fn t, i, u -> Nx.indexed_add(t, i, u, axes: [1]) end, [t, Nx.tensor([[0], [3]]), Nx.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])])
      end

      test "sort, argsort (stable, both directions, NaN), argmax/argmin (ties, NaN)", %{c: c} do
        x = Nx.tensor([[3.0, 1.0, :nan, 1.0, -2.0], [0.0, 0.0, 5.0, -1.0, 5.0]])
        assert_same(c, fn x -> {Nx.sort(x, axis: 1), Nx.sort(x, axis: 1, direction: :desc), Nx.sort(x, axis: 0)} end, [x])
        y = Nx.tensor([[3, 1, 2, 1, 3], [0, 0, 5, -1, 5]])
        assert_same(c, fn y -> {Nx.argsort(y, axis: 1), Nx.argsort(y, axis: 1, direction: :desc)} end, [y])
        assert_same(c, fn y -> {Nx.argmax(y, axis: 1), Nx.argmax(y, axis: 1, tie_break: :high), Nx.argmin(y), Nx.argmin(y, axis: 0, keep_axis: true)} end, [y])
        assert_same(c, fn x -> {Nx.argmax(x, axis: 1), Nx.argmin(x, axis: 1)} end, [x])
        assert_same(c, fn x -> Nx.argmax(x) end, [Nx.tensor([:nan, 1.0, 2.0])])
        # The last index of a narrow index type is a real answer, not the scan's "no index yet".
        # A NaN made at run time (it may carry the sign bit) sorts as a constant NaN does; -0.0 and
        # 0.0 are equal to sort (stable), as in Nx and JAX.
        run = fn fun, arg -> Nx.Defn.jit_apply(fun, [arg], compiler: Plugboard.Nx, client: c) end
        sorted = run.(&Nx.sort(Nx.sqrt(&1)), Nx.tensor([-1.0, 2.0, 0.5]))
        assert match?([a, b, :nan] when is_float(a) and is_float(b), Nx.to_list(sorted))
        assert Nx.to_list(run.(&Nx.sort(Nx.sqrt(&1), direction: :desc), Nx.tensor([-1.0, 2.0, 0.5]))) |> hd() == :nan
        signed = Nx.tensor([0.0, -0.0, 0.0, -0.0])
        assert Nx.to_binary(run.(&Nx.sort/1, signed)) == Nx.to_binary(signed)
        assert Nx.to_list(run.(&Nx.argsort(&1, direction: :desc), signed)) == [0, 1, 2, 3]
        on = fn fun, arg -> Nx.to_number(Nx.Defn.jit_apply(fun, [arg], compiler: Plugboard.Nx, client: c)) end
        assert on.(&Nx.argmax(&1, type: :u8), Nx.iota({256})) == 255
        assert on.(&Nx.argmax(&1, type: :s8), Nx.iota({128})) == 127
        assert on.(&Nx.argmin(&1, type: :u16), Nx.negate(Nx.iota({65_536}))) == 65_535
      end

      test "window reductions, window_reduce, window_scatter, cumulative sums", %{c: c} do
        x = Nx.iota({1, 4, 6}, type: :f32)
        assert_same(c, fn x -> {Nx.window_sum(x, {1, 2, 2}), Nx.window_max(x, {1, 2, 3}, strides: [1, 2, 3]), Nx.window_min(x, {1, 3, 2}, padding: :same)} end, [x])
        assert_same(c, fn x -> Nx.window_product(x, {1, 2, 1}, window_dilations: [1, 2, 1]) end, [x])
        assert_same(c, fn x -> Nx.window_reduce(x, 0.0, {1, 2, 2}, fn a, b -> Nx.add(a, b) end) end, [x])
        t = Nx.tensor([[7.0, 2.0, 5.0, 3.0], [3.0, 8.0, 9.0, 3.0]])
        s = Nx.tensor([[2.0, 6.0]])
        assert_same(c, fn t, s -> Nx.window_scatter_max(t, s, 0.0, {2, 2}, strides: [2, 2]) end, [t, s])
        assert_same(c, fn t -> {Nx.cumulative_sum(t, axis: 1), Nx.cumulative_max(t)} end, [t])
      end

      test "conv: padding, strides, dilations, groups, permutations", %{c: c} do
        key = Nx.Random.key(1)
        {inp, key} = Nx.Random.normal(key, shape: {2, 4, 7, 7})
        {k, key} = Nx.Random.normal(key, shape: {6, 2, 3, 3})
        assert_same(c, fn i, k -> Nx.conv(i, k, padding: :same, strides: [2, 1], feature_group_size: 2) end, [inp, k], atol: 1.0e-4)
        {k2, _} = Nx.Random.normal(key, shape: {3, 4, 2, 2})
        assert_same(c, fn i, k -> Nx.conv(i, k, kernel_dilation: [2, 1], input_dilation: 2, padding: [{1, 0}, {0, 2}]) end, [inp, k2], atol: 1.0e-4)
        nhwc = Nx.transpose(inp, axes: [0, 2, 3, 1])
        assert_same(c, fn i, k -> Nx.conv(i, k, input_permutation: [0, 3, 1, 2], output_permutation: [0, 3, 1, 2]) end, [nhwc, k2], atol: 1.0e-4)
      end

      test "fft, ifft, triangular_solve, and the LinAlg defaults (cholesky, qr, solve)", %{c: c} do
        z = Nx.tensor([1.0, 2.0, 0.0, -1.0, 3.0])
        assert_same(c, fn z -> {Nx.fft(z), Nx.ifft(z, length: 8), Nx.fft(z, length: 3)} end, [z], atol: 1.0e-4)
        a = Nx.tensor([[2.0, 0.0, 0.0], [1.0, 3.0, 0.0], [4.0, -1.0, 5.0]])
        b = Nx.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        assert_same(c, fn a, b -> {Nx.LinAlg.triangular_solve(a, b), Nx.LinAlg.triangular_solve(a, Nx.tensor([1.0, 2.0, 3.0]))} end, [a, b], atol: 1.0e-4)
        assert_same(c, fn a, b -> Nx.LinAlg.triangular_solve(a, b, transform_a: :transpose) end, [a, b], atol: 1.0e-4)
        spd = Nx.tensor([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
        assert_same(c, fn m -> Nx.LinAlg.cholesky(m) end, [spd], atol: 1.0e-4)
        assert_same(c, fn m -> Nx.LinAlg.qr(m) end, [spd], atol: 1.0e-4)
        assert_same(c, fn m, b -> Nx.LinAlg.solve(m, b) end, [spd, b], atol: 1.0e-3)
      end

      test "LU with partial pivoting (batched), determinant and invert through it; batched solve", %{c: c} do
        # The binary backend pivots on the matrix before elimination, so its P, L and U are not the
        # reference: the properties of an LU with partial pivoting are (P·L·U = A, L unit lower
        # triangular with |l| <= 1, U upper triangular).
        a = Nx.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0]])
        batch = Nx.stack([a, Nx.tensor([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]])])

        lu = fn m -> Nx.Defn.jit_apply(&Nx.LinAlg.lu/1, [m], compiler: Plugboard.Nx, client: c) end

        check = fn m, {p, l, u} ->
          assert Nx.all_close(Nx.dot(p, Nx.dot(l, u)), m, atol: 1.0e-5) |> Nx.to_number() == 1
          assert Nx.to_number(Nx.all(Nx.equal(l, Nx.tril(l)))) == 1 and Nx.to_number(Nx.all(Nx.equal(u, Nx.triu(u)))) == 1
          assert Nx.to_number(Nx.all(Nx.less_equal(Nx.abs(l), 1))) == 1
        end

        check.(a, lu.(a))
        {ps, ls, us} = lu.(batch)
        for i <- 0..1, do: check.(batch[i], {ps[i], ls[i], us[i]})

        assert_same(c, fn a -> {Nx.LinAlg.determinant(a), Nx.LinAlg.invert(a)} end, [a], atol: 1.0e-3)
        assert_same(c, fn m, v -> Nx.LinAlg.solve(m, v) end, [batch, Nx.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])], atol: 1.0e-3)
      end

      test "LU pivots on the column as eliminated: exact answers where the binary backend's pivots fail", %{c: c} do
        # Pivoting on the original matrix leaves U[2][1] = 0.5 under a zero pivot: determinant 0 and
        # an inverse of NaN. The exact determinant is -0.5; P·L·U gives A back.
        a = Nx.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0], [0.0, 0.5, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
        run = fn fun -> Nx.Defn.jit_apply(fun, [a], compiler: Plugboard.Nx, client: c) end
        assert Nx.to_number(run.(&Nx.LinAlg.determinant/1)) == -0.5
        {p, l, u} = run.(&Nx.LinAlg.lu/1)
        assert Nx.to_list(Nx.dot(p, Nx.dot(l, u))) == Nx.to_list(a)
        inverse = run.(&Nx.LinAlg.invert/1)
        assert Nx.all_close(Nx.dot(a, inverse), Nx.eye(4), atol: 1.0e-6) |> Nx.to_number() == 1
      end

      test "determinant of singular matrices is 0, not NaN, in every float type (regression)", %{c: c} do
        # LU divided by a zero pivot: 0/0 filled U with NaN.
        for type <- [bf: 16, f: 16, f: 32, f: 64] do
          a = Nx.tensor([[1.0, 2.0, 3.0, 0], [-1.0, -2.0, -3.0, 0], [4.0, 5.0, 6.0, 0], [4.0, 5.0, 6.0, 0]], type: type)
          assert_same(c, &Nx.LinAlg.determinant/1, [a])
        end
      end

      test "the gradient of a window_min with same padding is 1 at each window's minimum (exact; Nx's own test expects the binary backend's padding artifact)", %{c: c} do
        # Windows 3x3, stride 2, padding 1 on iota 4x4: their minima are x[0][0], x[0][1], x[1][0] and
        # x[1][1] (raise one by e and the sum rises by e). Nx's grad_test expects 1 at (1,1) only.
        grad = fn x -> Nx.Defn.grad(x, &Nx.sum(Nx.window_min(&1, {1, 3, 3, 1}, padding: :same, strides: [1, 2, 2, 1]))) end
        result = Nx.Defn.jit_apply(grad, [Nx.iota({1, 4, 4, 1}, type: :f32)], compiler: Plugboard.Nx, client: c)
        assert Nx.to_flat_list(result) == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0] ++ List.duplicate(0.0, 8)
      end

      test "erf_inv in f64 against the exact answer (Nx's own example is off by 3e-9)", %{c: c} do
        # math.erf(0.08885599049425769) == 0.1 in f64; Nx's doctest expects 0.08885598780483887.
        result = Nx.Defn.jit_apply(&Nx.erf_inv/1, [Nx.tensor(0.1, type: :f64)], compiler: Plugboard.Nx, client: c)
        assert Nx.to_number(result) == 0.08885599049425769
      end

      test "top_k", %{c: c} do
        x = Nx.tensor([1, -2, 3, -4])
        assert_same(c, fn x -> Nx.top_k(Nx.as_type(x, :f32), k: 2) end, [x])
      end
    end
  end
end
