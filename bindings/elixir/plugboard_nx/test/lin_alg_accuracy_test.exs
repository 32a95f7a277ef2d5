defmodule Plugboard.Nx.LinAlgAccuracyTest do
  # Nx.LinAlg compiled by Plugboard.Nx against LAPACK's answers (test/fixtures/lapack/cases.txt, made
  # by generate.py through numpy and scipy), f32 and f64, batched: residuals and orthogonality within
  # 10·n·eps of the type, values agreeing with LAPACK's to that tolerance (times the condition number
  # where the quantity depends on it), vectors up to sign. Both routes (Plugboard.Nx.LinAlg): the CPU
  # client's (eigh and svd through plugboard's LAPACK kernels) and the in-program one every other
  # target takes (forced on a second client). Every case of one operation and type runs in one
  # program; the checks run in f64 on the binary backend.
  use ExUnit.Case, async: true
  import Plugboard.Nx.Case

  @fixtures Path.join(__DIR__, "fixtures/lapack/cases.txt")
  @external_resource @fixtures

  # The groups whose programs differ by route (eigh, svd and what Nx builds on svd), and the rest.
  @by_route [eigh: [:eigh], svd: [:svd], solvers: [:triangular_solve, :solve, :determinant, :invert, :pinv, :least_squares]]
  @in_program_only [qr: [:qr], cholesky_lu: [:cholesky, :lu]]

  for {label, path} <- cpu_plugins(), type <- [:f32, :f64], route <- [:lapack, :in_program] do
    describe "on #{label}, #{type}, #{route}" do
      setup do
        %{c: route_client(unquote(path), unquote(route))}
      end

      groups = if route == :lapack, do: @by_route, else: @by_route ++ @in_program_only

      for {group, ops} <- groups do
        test "#{group} as accurate as LAPACK", %{c: c} do
          cases = Enum.filter(read_cases(), &(&1.type == unquote(type) and &1.op in unquote(ops)))
          assert cases != []
          results = run(c, cases)
          for {kase, result} <- Enum.zip(cases, results), do: check(kase.op, kase, result)
        end
      end
    end
  end

  for {label, path} <- cpu_plugins() do
    test "on #{label}, eigh and svd call LAPACK; on the in-program client they do not" do
      lapack = route_client(unquote(path), :lapack)
      in_program = route_client(unquote(path), :in_program)
      assert Plugboard.Nx.LinAlg.lapack?(lapack)
      refute Plugboard.Nx.LinAlg.lapack?(in_program)
      fun = fn a -> {Nx.LinAlg.eigh(a), Nx.LinAlg.svd(a, full_matrices?: false)} end
      a = Nx.tensor([[2.0, 1.0], [1.0, 3.0]], type: :f64)
      text = ExUnit.CaptureIO.capture_io(fn -> Nx.Defn.jit_apply(fun, [a], compiler: Plugboard.Nx, client: lapack, debug: true) end)
      assert text =~ "stablehlo.custom_call @plugboard_lapack_dsyevd"
      assert text =~ "stablehlo.custom_call @plugboard_lapack_dgesdd"
      text = ExUnit.CaptureIO.capture_io(fn -> Nx.Defn.jit_apply(fun, [a], compiler: Plugboard.Nx, client: in_program, debug: true) end)
      refute text =~ "plugboard_lapack"
    end
  end

  test "the issue's PCA example: vt's first row is LAPACK's to 1e-5 on every plugin and route" do
    # sklearn's PCA example, centred; numpy/LAPACK: [0.83849224, 0.54491354]. Nx's default gave
    # [0.83795, 0.54575] (eigh stopping at eps 1e-4).
    x = Nx.tensor([[-1, -1], [-2, -1], [-3, -2], [1, 1], [2, 1], [3, 2]], type: :f32)

    for {_, path} <- cpu_plugins(), route <- [:lapack, :in_program] do
      {_u, s, vt} =
        Nx.Defn.jit_apply(&Nx.LinAlg.svd(Nx.subtract(&1, Nx.mean(&1, axes: [0])), full_matrices?: false), [x],
          compiler: Plugboard.Nx,
          client: route_client(path, route)
        )

      [first | _] = Nx.to_list(vt)
      sign = if hd(first) < 0, do: -1, else: 1
      assert_in_delta sign * Enum.at(first, 0), 0.83849224, 1.0e-5
      assert_in_delta sign * Enum.at(first, 1), 0.54491354, 1.0e-5
      assert_in_delta Enum.at(Nx.to_list(s), 0), 6.30061232, 1.0e-5
    end
  end

  test "an exactly rank-deficient f32 matrix: the zero singular value comes out 0 and pinv inverts the rest (both routes)" do
    # σ = 4, 1, 0 (Nx's own pinv test): computed σ₃ is ~1e-7 (rounding); numpy's pinv cuts at
    # max(m, n)·eps·σ_max, Nx's at an absolute 1.0e-10, so svd returns rounding-level σ as 0.
    u = Nx.tensor([[0.6, -0.8, 0.0], [0.8, 0.6, 0.0], [0.0, 0.0, 1.0]])
    vt = Nx.tensor([[0.0, 0.0, 1.0], [0.28, 0.96, 0.0], [0.96, -0.28, 0.0]])
    t = u |> Nx.multiply(Nx.tensor([4.0, 1.0, 0.0])) |> Nx.dot(vt)
    expected = vt |> Nx.transpose() |> Nx.multiply(Nx.tensor([0.25, 1.0, 0.0])) |> Nx.dot(Nx.transpose(u))

    for {_, path} <- cpu_plugins(), route <- [:lapack, :in_program] do
      {s, pinv} = Nx.Defn.jit_apply(fn t -> {elem(Nx.LinAlg.svd(t), 1), Nx.LinAlg.pinv(t)} end, [t], compiler: Plugboard.Nx, client: route_client(path, route))
      assert Nx.to_list(s) |> List.last() == 0.0
      assert Nx.all_close(pinv, expected, atol: 1.0e-5) |> Nx.to_number() == 1, "#{route}: #{inspect(pinv)}"
    end
  end

  test "the gradient through svd's vectors is Nx's (one sign convention on both routes)" do
    # Nx's own grad_test: d/dA sum(diag(s) + u + vt) at [[3, 0], [1, 2]]. u and vt enter the sum,
    # so their signs decide it; LAPACK's gesdd gave other signs for other matrices before the
    # routes shared the convention.
    grad = fn t -> Nx.Defn.grad(t, fn t -> {u, s, vt} = Nx.LinAlg.svd(t); s |> Nx.make_diagonal() |> Nx.add(u) |> Nx.add(vt) |> Nx.sum() end) end
    expected = Nx.tensor([[1.368404507637024, -0.5419228672981262], [-0.2197188436985016, 0.6067624092102051]])
    tall = fn t -> Nx.Defn.grad(t, fn t -> {u, s, vt} = Nx.LinAlg.svd(t); s |> Nx.make_diagonal() |> Nx.exp() |> Nx.sum() |> Nx.add(Nx.sum(Nx.cos(u))) |> Nx.add(Nx.sum(Nx.sin(vt))) end) end
    # A tall matrix's: Nx's own gradient, as the Evaluator computes it. Nx 1.0 changed svd's gradient
    # for non-square matrices (Nx 0.13.1 gives [[25.911, 6.110], [12.697, 10.845], [10.668, 6.427]],
    # Nx main [[25.912, 6.112], [12.699, 10.851], [10.664, 6.415]]).
    tall_arg = Nx.tensor([[3.0, 0.0], [1.0, 2.0], [1.0, 1.0]])
    tall_expected = Nx.Defn.jit_apply(tall, [tall_arg], compiler: Nx.Defn.Evaluator)

    for {_, path} <- cpu_plugins(), route <- [:lapack, :in_program] do
      opts = [compiler: Plugboard.Nx, client: route_client(path, route)]
      assert Nx.all_close(Nx.Defn.jit_apply(grad, [Nx.tensor([[3.0, 0.0], [1.0, 2.0]])], opts), expected, atol: 1.0e-4) |> Nx.to_number() == 1
      assert Nx.all_close(Nx.Defn.jit_apply(tall, [tall_arg], opts), tall_expected, atol: 1.0e-3) |> Nx.to_number() == 1
    end
  end

  for {label, path} <- cpu_plugins(), route <- [:lapack, :in_program] do
    test "on #{label}, #{route}: eigh and svd of entries whose squares overflow or vanish in f32 (scaled first, as LAPACK)" do
      c = route_client(unquote(path), unquote(route))
      opts = [compiler: Plugboard.Nx, client: c]
      eigh = fn a -> Nx.Defn.jit_apply(&Nx.LinAlg.eigh/1, [Nx.tensor(a, type: :f32)], opts) end
      svd = fn a -> Nx.Defn.jit_apply(&Nx.LinAlg.svd/1, [Nx.tensor(a, type: :f32)], opts) end

      for big <- [1.0e20, 1.0e-25] do
        # [[x, x], [x, x]] has eigenvalues 2x and 0, eigenvectors (1, 1)/√2 and (1, -1)/√2.
        {w, v} = eigh.([[big, big], [big, big]])
        assert_values(w, [2 * big, 0.0], big)
        assert_values(Nx.abs(v), [[0.70710678, 0.70710678], [0.70710678, 0.70710678]], 1.0)

        # diag(3x, 4x): singular values 4x, 3x; U and V the (swapped) identity.
        {u, s, vt} = svd.([[3 * big, 0.0], [0.0, 4 * big]])
        assert_values(s, [4 * big, 3 * big], big)
        assert_values(Nx.abs(u), [[0.0, 1.0], [1.0, 0.0]], 1.0)
        assert_values(Nx.abs(vt), [[0.0, 1.0], [1.0, 0.0]], 1.0)

        # A tall one (the route through QR) and a general symmetric one, by their reconstruction.
        a = Nx.tensor([[1.0, 2.0], [3.0, -1.0], [0.5, 2.5]], type: :f64) |> Nx.multiply(big)
        {u, s, vt} = Nx.Defn.jit_apply(&Nx.LinAlg.svd(&1, full_matrices?: false), [Nx.as_type(a, :f32)], opts)
        back = Nx.dot(Nx.multiply(Nx.as_type(u, :f64), Nx.as_type(s, :f64)), Nx.as_type(vt, :f64))
        assert rel(back, a) < 1.0e-5, "svd of #{big}·A: ‖USVᵀ - A‖/‖A‖ = #{rel(back, a)}"
        sym = Nx.tensor([[2.0, 1.0, 0.5], [1.0, -3.0, 0.25], [0.5, 0.25, 1.0]], type: :f64) |> Nx.multiply(big)
        {w, v} = eigh.(Nx.to_list(sym))
        {w, v} = {Nx.as_type(w, :f64), Nx.as_type(v, :f64)}
        back = Nx.dot(Nx.multiply(v, w), Nx.transpose(v))
        assert rel(back, sym) < 1.0e-5, "eigh of #{big}·S: ‖VWVᵀ - S‖/‖S‖ = #{rel(back, sym)}"
      end

      # All zeros: zeros, no NaN.
      {w, _} = eigh.([[0.0, 0.0], [0.0, 0.0]])
      assert Nx.to_flat_list(w) == [0.0, 0.0]
      {_, s, _} = svd.([[0.0, 0.0], [0.0, 0.0]])
      assert Nx.to_flat_list(s) == [0.0, 0.0]
    end
  end

  # Nx's transform_a: :conjugate is op(a) = conj(a) (Nx.BinaryBackend's, not transposed), :transpose
  # is aᵀ. Exact answers: b made as op(a)·x (x·op(a) on the right) from a known x, with small complex
  # integers, for every side, triangle and transform.
  for {label, path} <- cpu_plugins() do
    test "on #{label}: complex triangular_solve, every left_side/lower/transform_a, against known answers; its gradients as the Evaluator's" do
      c = client(unquote(path))
      i = fn re, im -> Complex.new(re, im) end
      l = Nx.tensor([[1, 0, 0], [i.(1, 1), 2, 0], [3, i.(0, -1), i.(1, 1)]], type: :c64)

      # The issue's example: x = [1, 2+1i, 3] from b = conj(L)·x.
      x = Nx.tensor([1, i.(2, 1), 3], type: :c64)
      b = Nx.dot(Nx.conjugate(l), x)
      got = Nx.Defn.jit_apply(&Nx.LinAlg.triangular_solve(&1, &2, transform_a: :conjugate), [l, b], compiler: Plugboard.Nx, client: c)
      assert_values(got, x, 1.0)

      for lower <- [true, false], left_side <- [true, false], transform <- [:none, :transpose, :conjugate] do
        a = if lower, do: l, else: Nx.transpose(l)
        op_a = case transform do
          :none -> a
          :transpose -> Nx.transpose(a)
          :conjugate -> Nx.conjugate(a)
        end
        x = Nx.tensor([[1, i.(2, 1)], [i.(0, -1), 3], [i.(2, 2), -1]], type: :c64)
        {x, b} = if left_side, do: {x, Nx.dot(op_a, x)}, else: {Nx.transpose(x), Nx.dot(Nx.transpose(x), op_a)}
        opts = [lower: lower, left_side: left_side, transform_a: transform]
        got = Nx.Defn.jit_apply(&Nx.LinAlg.triangular_solve(&1, &2, opts), [a, b], compiler: Plugboard.Nx, client: c)
        assert Nx.to_number(Nx.all_close(got, x, atol: 1.0e-5)) == 1, "#{inspect(opts)}: got #{inspect(Nx.to_flat_list(got))}, want #{inspect(Nx.to_flat_list(x))}"

        # Gradients with respect to a and b of a real loss, as the Evaluator (Nx.BinaryBackend) gives them.
        loss = fn a, b -> a |> Nx.LinAlg.triangular_solve(b, opts) |> Nx.abs() |> Nx.pow(2) |> Nx.sum() end
        grads = fn a, b -> Nx.Defn.grad({a, b}, fn {a, b} -> loss.(a, b) end) end
        {ga, gb} = Nx.Defn.jit_apply(grads, [a, b], compiler: Plugboard.Nx, client: c)
        {wa, wb} = Nx.Defn.jit_apply(grads, [a, b], compiler: Nx.Defn.Evaluator)
        assert Nx.to_number(Nx.all_close(ga, wa, atol: 1.0e-4, rtol: 1.0e-4)) == 1, "#{inspect(opts)}: ∂a #{inspect(Nx.to_flat_list(ga))}, Evaluator #{inspect(Nx.to_flat_list(wa))}"
        assert Nx.to_number(Nx.all_close(gb, wb, atol: 1.0e-4, rtol: 1.0e-4)) == 1, "#{inspect(opts)}: ∂b #{inspect(Nx.to_flat_list(gb))}, Evaluator #{inspect(Nx.to_flat_list(wb))}"
      end
    end
  end

  # `got`'s entries equal `want`'s to f32 rounding relative to `scale`.
  defp assert_values(got, want, scale) do
    got = got |> Nx.backend_transfer(Nx.BinaryBackend) |> Nx.as_type(:c128)
    want = want |> Nx.tensor() |> Nx.as_type(:c128)
    assert Nx.to_number(Nx.all_close(Nx.divide(got, scale), Nx.divide(want, scale), atol: 1.0e-5, rtol: 0)) == 1,
           "got #{inspect(Nx.to_flat_list(got))}, want #{inspect(Nx.to_flat_list(want))}"
  end

  # The test helper's client of the plugin (LAPACK on the CPU), or one that computes in the program.
  defp route_client(path, :lapack), do: client(path)

  defp route_client(path, :in_program) do
    case :persistent_term.get({__MODULE__, path}, nil) do
      nil ->
        {:ok, c} = Plugboard.open(path)
        Plugboard.Nx.LinAlg.compute_in_program(c)
        :persistent_term.put({__MODULE__, path}, c)
        c

      c ->
        c
    end
  end

  ## Running the cases

  defp run(client, cases) do
    inputs = List.to_tuple(Enum.map(cases, &List.to_tuple(inputs(&1))))
    fun = fn tuple -> cases |> Enum.zip(Tuple.to_list(tuple)) |> Enum.map(fn {k, args} -> compute(k, Tuple.to_list(args)) end) |> List.to_tuple() end
    Nx.Defn.jit_apply(fun, [inputs], compiler: Plugboard.Nx, client: client)
    |> Tuple.to_list()
    |> Enum.map(fn result -> Nx.Defn.Composite.traverse(result, &Nx.backend_transfer(&1, Nx.BinaryBackend)) end)
  end

  defp inputs(%{t: t}), do: Enum.filter([t["a"], t["b"]], & &1)

  defp compute(%{op: :eigh}, [a]), do: Nx.LinAlg.eigh(a)
  defp compute(%{op: :svd, opts: o}, [a]), do: Nx.LinAlg.svd(a, full_matrices?: o.full == 1)
  defp compute(%{op: :qr, opts: o}, [a]), do: Nx.LinAlg.qr(a, mode: o.mode)
  defp compute(%{op: :cholesky}, [a]), do: Nx.LinAlg.cholesky(a)
  defp compute(%{op: :lu}, [a]), do: Nx.LinAlg.lu(a)

  defp compute(%{op: :triangular_solve, opts: o}, [a, b]),
    do: Nx.LinAlg.triangular_solve(a, b, lower: o.lower == 1, left_side: o.left_side == 1, transform_a: o.transform_a)

  defp compute(%{op: :solve}, [a, b]), do: Nx.LinAlg.solve(a, b)
  defp compute(%{op: :determinant}, [a]), do: Nx.LinAlg.determinant(a)
  defp compute(%{op: :invert}, [a]), do: Nx.LinAlg.invert(a)
  defp compute(%{op: :pinv}, [a]), do: Nx.LinAlg.pinv(a)
  defp compute(%{op: :least_squares}, [a, b]), do: Nx.LinAlg.least_squares(a, b)

  ## Checks (f64 on the binary backend; each batch entry on its own)

  defp check(:eigh, k, {w, v}) do
    each(k, [k.t["a"], w, v, k.t["w"], k.t["v"]], fn [a, w, v, w_ref, v_ref] ->
      n = Nx.axis_size(a, 0)
      tol = tol(k, n)
      norm = max_abs(w_ref)
      within(k, "residual ‖A·V - V·Λ‖/‖A‖", fro(Nx.subtract(Nx.dot(a, v), Nx.multiply(v, w))) / fro(a), tol)
      within(k, "orthogonality ‖VᵀV - I‖", fro(Nx.subtract(Nx.dot(Nx.transpose(v), v), Nx.eye(n, type: :f64))), tol)
      # Nx's order: |λ| descending. LAPACK's: ascending. Each vector's largest entry positive.
      assert Nx.to_list(Nx.abs(w)) == Enum.sort(Nx.to_list(Nx.abs(w)), :desc), "#{k.name}: eigenvalues not in Nx's order"
      for j <- 0..(n - 1), do: assert(largest_positive?(v[[.., j]]), "#{k.name}: eigenvector #{j}'s largest entry is negative")
      within(k, "eigenvalues vs LAPACK (/‖A‖)", max_abs(Nx.subtract(Nx.sort(w), w_ref)) / norm, tol)

      if v_ref do
        # Each eigenvector against LAPACK's for the same eigenvalue, up to sign; its error scales
        # with ‖A‖ / (the gap to the nearest other eigenvalue).
        ref = Nx.to_list(w_ref)
        gap = ref |> Enum.sort() |> Enum.chunk_every(2, 1, :discard) |> Enum.map(fn [x, y] -> y - x end) |> Enum.min(fn -> norm end)

        for {lambda, j} <- Enum.with_index(Nx.to_list(w)) do
          i = ref |> Enum.with_index() |> Enum.min_by(fn {r, _} -> abs(r - lambda) end) |> elem(1)
          within(k, "eigenvector #{j} vs LAPACK's (·gap/‖A‖)", sign_distance(v[[.., j]], v_ref[[.., i]]) * gap / norm, tol)
        end
      end
    end)
  end

  defp check(:svd, k, {u, s, vt}) do
    each(k, [k.t["a"], u, s, vt, k.t["s"], k.t["u"], k.t["vt"]], fn [a, u, s, vt, s_ref, u_ref, vt_ref] ->
      {m, n} = Nx.shape(a)
      p = min(m, n)
      tol = tol(k, max(m, n))
      norm = max_abs(s_ref)
      assert Nx.shape(u) == if(k.opts.full == 1, do: {m, m}, else: {m, p})
      assert Nx.shape(vt) == if(k.opts.full == 1, do: {n, n}, else: {p, n})
      us = Nx.multiply(u[[.., 0..(p - 1)]], s)
      within(k, "residual ‖U·Σ·Vᵀ - A‖/‖A‖", fro(Nx.subtract(Nx.dot(us, vt[0..(p - 1)]), a)) / fro(a), tol)
      within(k, "orthogonality ‖UᵀU - I‖", fro(Nx.subtract(Nx.dot(Nx.transpose(u), u), Nx.eye(elem(Nx.shape(u), 1), type: :f64))), tol)
      within(k, "orthogonality ‖VᵀV - I‖", fro(Nx.subtract(Nx.dot(vt, Nx.transpose(vt)), Nx.eye(elem(Nx.shape(vt), 0), type: :f64))), tol)
      assert Nx.to_list(s) == Enum.sort(Nx.to_list(s), :desc), "#{k.name}: singular values not descending"
      for j <- 0..(p - 1), do: assert(largest_positive?(vt[j]), "#{k.name}: right singular vector #{j}'s largest entry is negative")
      within(k, "singular values vs LAPACK (/‖A‖)", max_abs(Nx.subtract(s, s_ref)) / norm, tol)

      if u_ref do
        ref = Nx.to_list(s_ref)
        gap = ref |> Enum.chunk_every(2, 1, :discard) |> Enum.map(fn [x, y] -> x - y end) |> Enum.min(fn -> norm end)
        gap = min(gap, List.last(ref))

        for j <- 0..(p - 1) do
          within(k, "left vector #{j} vs LAPACK's (·gap/‖A‖)", sign_distance(u[[.., j]], u_ref[[.., j]]) * gap / norm, tol)
          within(k, "right vector #{j} vs LAPACK's (·gap/‖A‖)", sign_distance(vt[j], vt_ref[j]) * gap / norm, tol)
        end
      end
    end)
  end

  defp check(:qr, k, {q, r}) do
    each(k, [k.t["a"], q, r, k.t["q"], k.t["r"]], fn [a, q, r, q_ref, r_ref] ->
      {m, n} = Nx.shape(a)
      p = min(m, n)
      tol = tol(k, max(m, n))
      assert Nx.shape(q) == Nx.shape(q_ref) and Nx.shape(r) == Nx.shape(r_ref)
      within(k, "residual ‖Q·R - A‖/‖A‖", fro(Nx.subtract(Nx.dot(q, r), a)) / fro(a), tol)
      within(k, "orthogonality ‖QᵀQ - I‖", fro(Nx.subtract(Nx.dot(Nx.transpose(q), q), Nx.eye(elem(Nx.shape(q), 1), type: :f64))), tol)
      assert Nx.to_number(Nx.all(Nx.equal(r, Nx.triu(r)))) == 1, "#{k.name}: R is not upper triangular"
      # Unique up to the signs of R's rows (LAPACK's diagonal is -sign(x)·‖x‖, Nx's +‖x‖): D·R, Q·D.
      d = Nx.select(Nx.equal(Nx.sign(Nx.take_diagonal(r[0..(p - 1)])), Nx.sign(Nx.take_diagonal(r_ref[0..(p - 1)]))), 1.0, -1.0)
      within(k, "R vs LAPACK's (/cond)", rel(r[0..(p - 1)], Nx.multiply(Nx.new_axis(d, 1), r_ref[0..(p - 1)])) / k.opts.cond, tol)
      within(k, "Q vs LAPACK's (/cond)", rel(q[[.., 0..(p - 1)]], Nx.multiply(q_ref[[.., 0..(p - 1)]], d)) / k.opts.cond, tol)
    end)
  end

  defp check(:cholesky, k, l) do
    each(k, [k.t["a"], l, k.t["l"]], fn [a, l, l_ref] ->
      tol = tol(k, Nx.axis_size(a, 0))
      within(k, "residual ‖L·Lᵀ - A‖/‖A‖", fro(Nx.subtract(Nx.dot(l, Nx.transpose(l)), a)) / fro(a), tol)
      assert Nx.to_number(Nx.all(Nx.equal(l, Nx.tril(l)))) == 1, "#{k.name}: L is not lower triangular"
      within(k, "L vs LAPACK's (/cond)", rel(l, l_ref) / k.opts.cond, tol)
    end)
  end

  defp check(:lu, k, {p, l, u}) do
    each(k, [k.t["a"], p, l, u, k.t["p"], k.t["l"], k.t["u"]], fn [a, p, l, u, p_ref, l_ref, u_ref] ->
      tol = tol(k, Nx.axis_size(a, 0))
      within(k, "residual ‖P·L·U - A‖/‖A‖", fro(Nx.subtract(Nx.dot(p, Nx.dot(l, u)), a)) / fro(a), tol)
      assert Nx.to_list(p) == Nx.to_list(p_ref), "#{k.name}: P is not getrf's"
      within(k, "L vs LAPACK's (/cond)", rel(l, l_ref) / k.opts.cond, tol)
      within(k, "U vs LAPACK's (/cond)", rel(u, u_ref) / k.opts.cond, tol)
    end)
  end

  defp check(op, k, x) when op in [:triangular_solve, :solve, :least_squares] do
    each(k, [k.t["a"], k.t["b"], x, k.t["x"]], fn [a, b, x, x_ref] ->
      {m, n} = Nx.shape(a)
      tol = tol(k, max(m, n))
      # Least squares' solution moves with cond² times the residual; these are near-square systems.
      cond = if op == :least_squares, do: k.opts.cond ** 2, else: k.opts.cond
      within(k, "x vs LAPACK's (/cond)", rel(x, x_ref) / cond, tol)

      if op != :least_squares do
        ax = if k.opts[:left_side] == 0, do: Nx.dot(x, a), else: Nx.dot(op_a(a, k.opts), x)
        within(k, "residual ‖A·x - b‖/(‖A‖·‖x‖)", fro(Nx.subtract(ax, b)) / (fro(a) * fro(x)), tol)
      end
    end)
  end

  defp check(:determinant, k, det) do
    each(k, [k.t["a"], det, k.t["det"]], fn [a, det, det_ref] ->
      within(k, "determinant vs LAPACK's (/cond)", rel(det, det_ref) / k.opts.cond, tol(k, Nx.axis_size(a, 0)))
    end)
  end

  defp check(op, k, x) when op in [:invert, :pinv] do
    ref = k.t[if(op == :invert, do: "inv", else: "pinv")]

    each(k, [k.t["a"], x, ref], fn [a, x, ref] ->
      {m, n} = Nx.shape(a)
      within(k, "#{op} vs LAPACK's (/cond)", rel(x, ref) / k.opts.cond, tol(k, max(m, n)))
    end)
  end

  defp op_a(a, %{transform_a: :transpose}), do: Nx.transpose(a)
  defp op_a(a, _), do: a

  # `fun` on each batch entry of the f64 tensors (nil stays nil).
  defp each(k, tensors, fun) do
    tensors = Enum.map(tensors, &(&1 && Nx.as_type(Nx.backend_transfer(&1, Nx.BinaryBackend), :f64)))
    batch = k.t["a"].shape |> Tuple.to_list() |> Enum.drop(-2)

    case batch do
      [] -> fun.(tensors)
      _ -> for i <- 0..(Enum.product(batch) - 1), do: fun.(Enum.map(tensors, &(&1 && entry(&1, batch, i))))
    end
  end

  defp entry(t, batch, i) do
    rest = t.shape |> Tuple.to_list() |> Enum.drop(length(batch))
    t |> Nx.reshape(List.to_tuple([Enum.product(batch) | rest])) |> Nx.take(i, axis: 0)
  end

  defp tol(k, n), do: 10 * n * eps(k.type)
  defp eps(:f32), do: :math.pow(2, -23)
  defp eps(:f64), do: :math.pow(2, -52)

  defp within(k, what, value, tol) do
    assert value <= tol, "#{k.name}: #{what} = #{value}, above 10·n·eps = #{tol} (#{Float.round(value / eps(k.type), 1)} eps)"
  end

  defp fro(t), do: t |> Nx.pow(2) |> Nx.sum() |> Nx.sqrt() |> Nx.to_number()
  defp max_abs(t), do: t |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
  defp rel(x, ref), do: fro(Nx.subtract(x, ref)) / max(fro(ref), 1.0e-300)

  # The sign convention of both routes: the first entry of largest magnitude is positive.
  defp largest_positive?(x), do: Nx.to_number(x[Nx.argmax(Nx.abs(x))]) >= 0

  defp sign_distance(x, ref) do
    s = if Nx.to_number(Nx.dot(x, ref)) < 0, do: -1.0, else: 1.0
    max_abs(Nx.subtract(Nx.multiply(x, s), ref))
  end

  ## The fixture file (generate.py describes it)

  defp read_cases do
    @fixtures
    |> File.read!()
    |> String.split("\n", trim: true)
    |> Enum.reject(&String.starts_with?(&1, "#"))
    |> parse(nil, [])
  end

  defp parse([], nil, acc), do: Enum.reverse(acc)
  defp parse(["end" | rest], kase, acc), do: parse(rest, nil, [kase | acc])

  defp parse(["case " <> header | rest], nil, acc) do
    [name, op | opts] = String.split(header)
    opts = Map.new(opts, fn kv -> [key, value] = String.split(kv, "="); {String.to_atom(key), option(value)} end)
    type = name |> String.split("_") |> List.last() |> String.to_atom()
    parse(rest, %{name: name, op: String.to_atom(op), type: type, opts: opts, t: %{}}, acc)
  end

  defp parse([line | rest], kase, acc) do
    [name, type, dims, data] = String.split(line)
    shape = if dims == "-", do: {}, else: dims |> String.split(",") |> Enum.map(&String.to_integer/1) |> List.to_tuple()
    tensor = data |> Base.decode64!() |> Nx.from_binary(String.to_atom(type)) |> Nx.reshape(shape)
    parse(rest, put_in(kase.t[name], tensor), acc)
  end

  defp option(value) do
    case {Integer.parse(value), Float.parse(value)} do
      {{i, ""}, _} -> i
      {_, {f, ""}} -> f
      _ -> String.to_atom(value)
    end
  end
end
