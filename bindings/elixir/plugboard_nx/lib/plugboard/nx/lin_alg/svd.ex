defmodule Plugboard.Nx.LinAlg.SVD do
  @moduledoc false
  # Singular value decomposition by one-sided Jacobi (Hestenes), in parallel order
  # (Plugboard.Nx.LinAlg.Jacobi): column pairs of W = A·V are rotated until every pair is orthogonal
  # to the type's precision; then V is made orthogonal to working precision (Jacobi.orthonormalize),
  # W = A·V formed again, σ_j = ‖w_j‖ and u_j = w_j / σ_j. A tall matrix is reduced to its
  # square R by a Householder QR first (a wide one is transposed). U is completed to an orthogonal
  # matrix by a QR of its columns (what zero singular values and full_matrices need). Accurate to
  # working precision, as LAPACK's gesdd; Nx's default goes through eigh (eps: 1.0e-4).
  import Nx.Defn
  alias Plugboard.Nx.LinAlg.{Batch, Jacobi, QR}

  # A bound on sweeps for inputs that never meet the stopping test (NaN, Inf).
  @max_sweeps 40

  @doc """
  `{u, s, vt}` of `a` (`{..., m, n}`, k = min(m, n)), `s` descending: u `{..., m, m}` and vt
  `{..., n, n}` with `full_matrices: true`, `{..., m, k}` and `{..., k, n}` without. Computed in `a`'s
  type on `a` scaled to entries of at most 1 (Jacobi.scaled), returned as `opts[:type]`.
  """
  defn svd(a, opts \\ []) do
    opts = keyword!(opts, [:type, full_matrices: true])
    {batch, m, n} = Batch.split(a)
    {a, scale} = a |> Batch.flatten() |> Jacobi.scaled()

    {u, s, vt} =
      case {m, n} do
        {m, n} when m < n ->
          # Aᵀ = V·S·Uᵀ
          {u, s, vt} = tall(Batch.transpose(a), opts[:full_matrices])
          {Batch.transpose(vt), s, Batch.transpose(u)}

        _ ->
          tall(a, opts[:full_matrices])
      end

    finish({u, s * Nx.new_axis(scale, 1), vt}, batch, opts[:type])
  end

  @doc "LAPACK's answer (`{u, s, vt}` from plugboard_lapack_*gesdd, batched) finished as svd/2's."
  defn from_lapack(u, s, vt, opts \\ []) do
    opts = keyword!(opts, [:type])
    {batch, _, _} = Batch.split(u)
    u = Batch.flatten(u)
    finish({u, Nx.reshape(s, {Nx.axis_size(u, 0), :auto}), Batch.flatten(vt)}, batch, opts[:type])
  end

  @doc """
  The last steps of every SVD route: each pair of singular vectors gets the sign that makes v_j's
  largest entry positive (Batch.signs); singular values at the rounding level, at most
  `max(m, n)·eps·σ_max`, become 0, the cut numpy's pinv and lstsq make by default:
  Nx's pinv and least_squares cut at an absolute 1.0e-10, so without it an exactly rank-deficient
  f32 matrix's ~1e-7 would be inverted. It moves σ by less than the 10·n·eps accuracy bar. Then
  the batch axes come back and the results take `type`.
  """
  deftransform finish({u, s, vt}, batch, type) do
    size = max(Nx.axis_size(u, 1), Nx.axis_size(vt, 2))
    eps = Nx.Constants.epsilon(Nx.type(s))
    cut = Nx.multiply(Nx.multiply(eps, size), Nx.reduce_max(s, axes: [1], keep_axes: true))
    s = Nx.select(Nx.less_equal(s, cut), Nx.tensor(0, type: Nx.type(s)), s)
    # Each pair u_j, v_j flipped together so that v_j's largest entry is positive (Batch.signs).
    k = Nx.axis_size(s, 1)
    sign = vt |> Nx.slice_along_axis(0, k, axis: 1) |> Batch.signs(2)
    # (A full U's columns past k have no partner: multiplied by 1.)
    flip = fn t, axis, sign ->
      config = for a <- 0..2, do: if(a == axis, do: {0, Nx.axis_size(t, axis) - k, 0}, else: {0, 0, 0})
      Nx.multiply(t, Nx.pad(sign, Nx.tensor(1, type: Nx.type(t)), config))
    end
    u = flip.(u, 2, Nx.transpose(sign, axes: [0, 2, 1]))
    vt = flip.(vt, 1, sign)
    {Batch.unflatten(Nx.as_type(u, type), batch), Batch.unflatten(Nx.as_type(s, type), batch), Batch.unflatten(Nx.as_type(vt, type), batch)}
  end

  # {u, s, vt} of a {b, m, n} stack with m >= n.
  defnp tall(a, full) do
    {_b, m, n} = Nx.shape(a)

    case {m, n} do
      {m, n} when m > n ->
        {q, r} = QR.decompose(a, qr_mode(full))
        {ur, s, vt} = square(Nx.slice_along_axis(r, 0, n, axis: 1))
        u = Batch.matmul(Nx.slice_along_axis(q, 0, n, axis: 2), ur)
        {complete(u, q, full), s, vt}

      _ ->
        square(a)
    end
  end

  deftransformp square_root(n), do: :math.sqrt(n)

  deftransformp qr_mode(full), do: if(full, do: :complete, else: :reduced)

  # U·R's columns, followed by the complete Q's last m - n columns when full matrices are asked.
  deftransformp complete(u, q, full) do
    {_, m, n} = Nx.shape(u)
    if full, do: Nx.concatenate([u, Nx.slice_along_axis(q, n, m - n, axis: 2)], axis: 2), else: u
  end

  # {u, s, vt} of a square {b, n, n} stack.
  defnp square(a) do
    {b, n, _} = Nx.shape(a)
    n2 = Jacobi.even(n)
    type = Nx.type(a)
    # An odd n gets a zero column: it stays zero (its pairs have no angle) and is left out.
    a = Nx.pad(a, Nx.tensor(0, type: type), [{0, 0, 0}, {0, 0, 0}, {0, n2 - n, 0}])
    idx = Nx.iota({n2}, type: :s32)
    # Pairs count as orthogonal at |w_pᵀw_q| <= tol·‖w_p‖·‖w_q‖: the rounding of a dot product of n
    # terms (LAPACK's gesvj uses sqrt(m)·eps).
    tol = Nx.Constants.epsilon(type) * square_root(n)

    {_w, v, idx, _sweep, _worst, _tol} =
      while {w = a, v = Batch.eye(b, n2, type), idx, sweep = 0, worst = Nx.broadcast(Nx.tensor(1, type: type), {b}), tol},
            sweep < @max_sweeps and Nx.any(worst > tol) do
        {w, v, idx, worst} = sweep(w, v, idx)
        {w, v, idx, sweep + 1, worst, tol}
      end

    # W again from the orthonormalized V: A = W·Vᵀ then holds to the rounding of one product.
    v = Jacobi.orthonormalize(v)
    w = Batch.matmul(a, v)
    s = Nx.sqrt(Nx.sum(w * w, axes: [1]))
    # Descending σ, the padding's zero column last.
    key = Batch.select(idx >= n, -1, s)
    order = Nx.argsort(key, axis: 1, direction: :desc, stable: true)
    s = Nx.take_along_axis(s, order, axis: 1) |> Nx.slice_along_axis(0, n, axis: 1)
    cols = Nx.broadcast(Nx.new_axis(order, 1), {b, n2, n2})
    w = Nx.take_along_axis(w, Nx.slice_along_axis(cols, 0, n, axis: 1), axis: 2) |> Nx.slice_along_axis(0, n, axis: 2)
    v = Nx.take_along_axis(v, cols, axis: 2) |> Nx.slice_along_axis(0, n, axis: 1) |> Nx.slice_along_axis(0, n, axis: 2)
    u = w / Nx.new_axis(Batch.select(s == 0, 1, s), 1)
    {orthogonal(u), s, Batch.transpose(v)}
  end

  # One sweep: 2m - 1 rounds of m column rotations; also the largest |w_pᵀw_q| / (‖w_p‖·‖w_q‖) seen.
  defnp sweep(w, v, idx) do
    n2 = Nx.axis_size(w, 2)
    b = Nx.axis_size(w, 0)
    type = Nx.type(w)

    {w, v, idx, worst} =
      while {w, v, idx, worst = Nx.broadcast(Nx.tensor(0, type: type), {b})}, _round <- 1..(n2 - 1)//1 do
        {top, bottom} = Jacobi.halves(w, 2)
        alpha = Nx.sum(top * top, axes: [1])
        beta = Nx.sum(bottom * bottom, axes: [1])
        gamma = Nx.sum(top * bottom, axes: [1])
        scale = Nx.sqrt(alpha) * Nx.sqrt(beta)
        worst = Nx.max(worst, Nx.reduce_max(Batch.select(scale == 0, 0, Nx.abs(gamma) / Batch.select(scale == 0, 1, scale)), axes: [1]))
        {_t, c, s} = Jacobi.rotation(alpha, beta, gamma)
        c = Nx.new_axis(c, 1)
        s = Nx.new_axis(s, 1)
        w = Jacobi.rotate(w, c, s, 2)
        v = Jacobi.rotate(v, c, s, 2)
        {Jacobi.next_round(w, 2), Jacobi.next_round(v, 2), Jacobi.next_round(idx, 0), worst}
      end

    {w, v, idx, worst}
  end

  # The orthogonal matrix nearest the columns of u where they are orthonormal, completing them where
  # they are zero (zero singular values, sorted last): Q of u's QR, its columns' signs those of R's
  # diagonal (R = diag(±1) for orthonormal columns).
  defnp orthogonal(u) do
    {q, r} = QR.decompose(u, :complete)
    sign = Batch.select(Nx.take_diagonal(r) < 0, -1, 1) |> Nx.as_type(Nx.type(u))
    q * Nx.new_axis(sign, 1)
  end
end
