defmodule Plugboard.Nx.LinAlg.Eigh do
  @moduledoc false
  # Eigenvalues and eigenvectors of real symmetric matrices by the two-sided (classical) Jacobi
  # method in parallel order (Plugboard.Nx.LinAlg.Jacobi): sweeps of rotations, each zeroing one
  # off-diagonal pair, until the off-diagonal part is below the type's epsilon relative to the
  # matrix. It converges quadratically (5 to 10 sweeps) and to working precision, as LAPACK's
  # syevd does; Nx's default (Nx.LinAlg.BlockEigh) stops at eps: 1.0e-4.
  import Nx.Defn
  alias Plugboard.Nx.LinAlg.{Batch, Jacobi}

  # A bound on sweeps for inputs that never meet the stopping test (NaN, Inf): converging ones
  # take ~10 at n = 256.
  @max_sweeps 40

  @doc """
  `{eigenvalues, eigenvectors}` of `a` (`{..., n, n}`, symmetric; `(a + aᵀ)/2` is what is
  decomposed) in Nx's order: by absolute value, largest first. Computed in `a`'s type (f32 or f64)
  on `a` scaled to entries of at most 1 (Jacobi.scaled), returned as `opts[:type]`.
  """
  defn eigh(a, opts \\ []) do
    opts = keyword!(opts, [:type])
    {batch, _n, _} = Batch.split(a)
    {a, scale} = a |> Batch.flatten() |> Jacobi.scaled()
    {d, v} = a |> symmetrize() |> decompose()
    d = d * Nx.new_axis(scale, 1)
    {Batch.unflatten(Nx.as_type(d, opts[:type]), batch), Batch.unflatten(Nx.as_type(v, opts[:type]), batch)}
  end

  defnp decompose(a) do
    {b, n, _} = Nx.shape(a)
    n2 = Jacobi.even(n)
    type = Nx.type(a)
    # An odd n gets a zero row and column: an eigenvalue 0 with eigenvector e_n, which no rotation
    # touches (its pairs have apq = 0) and which is left out at the end.
    a = Nx.pad(a, Nx.tensor(0, type: type), [{0, 0, 0}, {0, n2 - n, 0}, {0, n2 - n, 0}])
    # idx[i]: the index now at position i (the rounds move them).
    idx = Nx.iota({n2}, type: :s32)
    # Converged when the off-diagonal part's squared norm is at most eps² of the matrix's.
    eps = Nx.Constants.epsilon(type)
    bound = eps * eps * Nx.sum(a * a, axes: [1, 2])

    {_a, v, idx, _sweep, _off2, _bound} =
      while {d = a, v = Batch.eye(b, n2, type), idx, sweep = 0, off2 = off_diagonal2(a), bound},
            sweep < @max_sweeps and Nx.any(off2 > bound) do
        {d, v, idx} = sweep(d, v, idx)
        {d, v, idx, sweep + 1, off_diagonal2(d), bound}
      end

    # V made orthogonal to the rounding of one product (Jacobi.orthonormalize), and the eigenvalues
    # as its Rayleigh quotients vᵀ·A·v, which make each column's residual ‖A·v - λ·v‖ least.
    v = Jacobi.orthonormalize(v)
    d = Nx.sum(v * Batch.matmul(a, v), axes: [1])
    # The padding's 0 sorted last, then cut off.
    {d, v} = nx_order(d, v, Batch.select(idx >= n, -1, Nx.abs(d)))
    {Nx.slice_along_axis(d, 0, n, axis: 1), v |> Nx.slice_along_axis(0, n, axis: 1) |> Nx.slice_along_axis(0, n, axis: 2)}
  end

  @doc "`(a + aᵀ)/2` of `{..., n, n}`: what both routes decompose."
  defn symmetrize(a) do
    rank = Nx.rank(a)
    (a + Nx.transpose(a, axes: swap_last(rank))) / 2
  end

  deftransformp swap_last(rank), do: Enum.to_list(0..(rank - 3)//1) ++ [rank - 1, rank - 2]

  @doc """
  LAPACK's answer (`w {..., n}` ascending, `v {..., n, n}`, from plugboard_lapack_*syevd) in Nx's
  order, as `opts[:type]`.
  """
  defn from_lapack(w, v, opts \\ []) do
    opts = keyword!(opts, [:type])
    {batch, _n, _} = Batch.split(v)
    v = Batch.flatten(v)
    w = Nx.reshape(w, {Nx.axis_size(v, 0), Nx.axis_size(v, 1)})
    {d, v} = nx_order(w, v, Nx.abs(w))
    {Batch.unflatten(Nx.as_type(d, opts[:type]), batch), Batch.unflatten(Nx.as_type(v, opts[:type]), batch)}
  end

  # Nx's order: by `key` (|eigenvalue|) descending, ties in their order; v's columns with them, each
  # with its largest entry positive (Batch.signs).
  defnp nx_order(d, v, key) do
    {b, n, _} = Nx.shape(v)
    order = Nx.argsort(key, axis: 1, direction: :desc, stable: true)
    v = Nx.take_along_axis(v, Nx.broadcast(Nx.new_axis(order, 1), {b, n, n}), axis: 2)
    {Nx.take_along_axis(d, order, axis: 1), v * Batch.signs(v, 1)}
  end

  # One sweep: 2m - 1 rounds of m rotations.
  defnp sweep(a, v, idx) do
    n2 = Nx.axis_size(a, 1)
    m = div(n2, 2)
    type = Nx.type(a)
    diagonal = Nx.iota({1, n2, n2}, axis: 1) == Nx.iota({1, n2, n2}, axis: 2)
    # The pairs' off-diagonal entries (k, m + k) and (m + k, k).
    pair = Nx.abs(Nx.iota({1, n2, n2}, axis: 1) - Nx.iota({1, n2, n2}, axis: 2)) == m

    {a, v, idx, _, _} =
      while {a, v, idx, diagonal, pair}, _round <- 1..(n2 - 1)//1 do
        d = Nx.take_diagonal(a)
        {app, aqq} = Jacobi.halves(d, 1)
        {top_right, _} = Jacobi.halves(a, 1)
        {_, top_right} = Jacobi.halves(top_right, 2)
        apq = Nx.take_diagonal(top_right)
        {t, c, s} = Jacobi.rotation(app, aqq, apq)
        # Jᵀ·A·J: rows, then columns; V·J.
        a = Jacobi.rotate(a, Nx.new_axis(c, 2), Nx.new_axis(s, 2), 1)
        a = Jacobi.rotate(a, Nx.new_axis(c, 1), Nx.new_axis(s, 1), 2)
        v = Jacobi.rotate(v, Nx.new_axis(c, 1), Nx.new_axis(s, 1), 2)
        # Each pair's 2x2 block exactly: its diagonal by Rutishauser's update, its off-diagonal 0,
        # so that rounding only ever touches off-diagonal entries.
        d = Nx.concatenate([app - t * apq, aqq + t * apq], axis: 1)
        a = Batch.select(diagonal, Nx.new_axis(d, 2), Batch.select(pair, Nx.tensor(0, type: type), a))
        a = a |> Jacobi.next_round(1) |> Jacobi.next_round(2)
        {a, Jacobi.next_round(v, 2), Jacobi.next_round(idx, 0), diagonal, pair}
      end

    {a, v, idx}
  end

  defnp off_diagonal2(a) do
    n2 = Nx.axis_size(a, 1)
    diagonal = Nx.iota({1, n2, n2}, axis: 1) == Nx.iota({1, n2, n2}, axis: 2)
    Nx.sum(Batch.select(diagonal, 0, a * a), axes: [1, 2])
  end
end
