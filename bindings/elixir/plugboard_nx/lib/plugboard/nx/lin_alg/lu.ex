defmodule Plugboard.Nx.LinAlg.LU do
  @moduledoc false
  # LU with partial pivoting (the Nx.Block.LinAlg.LU block, Plugboard.Nx.LinAlg).
  import Nx.Defn
  alias Plugboard.Nx.LinAlg.Batch

  @doc """
  LU of square matrices (batched on leading axes): `{p, l, u}` with `a = p · l · u`, `l` unit lower
  triangular, `u` upper triangular, by partial pivoting as LAPACK's getrf does: at each column, the
  row with the largest |u[i, k]| (i >= k, the first of equal ones) of the matrix as eliminated so far
  is swapped onto the diagonal. (Nx's binary backend picks its pivots from the matrix before
  elimination, which can leave a zero pivot on a nonsingular matrix: determinant 0 and an inverse of
  NaN for [[1,1,0,0],[1,1,1,0],[0,0.5,1,0],[0,0,0,1]].)
  """
  defn lu(a, opts \\ []) do
    opts = keyword!(opts, p_type: {:s, 64})
    {batch_shape, n, _} = Batch.split(a)
    a = Batch.flatten(a)
    b = Nx.axis_size(a, 0)
    rows = Nx.iota({b, n}, axis: 1, type: :s64)

    {_, u, l, perm} =
      while {k = 0, u = a, l = Nx.broadcast(Nx.tensor(0, type: a.type), a), perm = rows}, k < n do
        # The pivot: the largest |u[i, k]| for i >= k, swapped into row k (with l's rows so far).
        col = Nx.take(u, k, axis: 2)
        masked = Nx.select(rows < k, -1, Nx.abs(col))
        p = Nx.argmax(masked, axis: 1, keep_axis: true)
        idx = Nx.select(rows == k, p, Nx.select(rows == p, k, rows))
        swap = Nx.broadcast(Nx.new_axis(idx, 2), {b, n, n})
        u = Nx.take_along_axis(u, swap, axis: 1)
        l = Nx.take_along_axis(l, swap, axis: 1)
        perm = Nx.take_along_axis(perm, idx, axis: 1)

        row_k = Nx.take(u, k, axis: 1)
        pivot = Nx.take(row_k, k, axis: 1) |> Nx.new_axis(1)
        col = Nx.take(u, k, axis: 2)
        # A zero pivot (the column is zero from row k down: a singular matrix) leaves its column
        # unscaled, as LAPACK's getrf does, instead of filling the rest with NaN.
        singular = pivot == 0
        f = Nx.select(rows > k and not singular, col / Nx.select(singular, 1, pivot), 0)
        e_k = Nx.as_type(rows == k, a.type)
        l = l + Nx.new_axis(f, 2) * Nx.new_axis(e_k, 1)
        u = u - Nx.new_axis(f, 2) * Nx.new_axis(row_k, 1)
        {k + 1, u, l, perm}
      end

    # Below the diagonal u holds what the elimination left of each pivot's column: rounding residues
    # (4 - (4/7)·7), zero in exact arithmetic and stored as zero, as getrf does.
    upper = Nx.iota({1, n, n}, axis: 1) <= Nx.iota({1, n, n}, axis: 2)
    u = Nx.select(Nx.broadcast(upper, u), u, Nx.tensor(0, type: a.type))
    l = l + Nx.eye(n, type: a.type)
    # perm[i] is the row of `a` now at row i: P has a 1 at (perm[i], i).
    onehot = Nx.new_axis(perm, 2) == Nx.iota({1, 1, n}, type: :s64)
    p = onehot |> Nx.transpose(axes: [0, 2, 1]) |> Nx.as_type(opts[:p_type])
    {Batch.unflatten(p, batch_shape), Batch.unflatten(l, batch_shape), Batch.unflatten(u, batch_shape)}
  end
end
