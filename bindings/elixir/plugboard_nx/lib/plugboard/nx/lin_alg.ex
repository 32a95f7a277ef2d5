defmodule Plugboard.Nx.LinAlg do
  @moduledoc false
  # Decompositions that Nx 0.7 leaves to each backend (no defn default), written here as defn and
  # lowered like any other expression (Plugboard.Nx.Ops, :lu).
  import Nx.Defn

  @doc """
  LU of square matrices (batched on leading axes): `{p, l, u}` with `a = p · l · u`, `l` unit lower
  triangular, `u` upper triangular, as Nx's binary backend computes it: rows of `a` are first
  swapped so that, column by column, the largest |a[i, j]| (i >= j, the first of equal ones) lies
  on the diagonal; then the swapped matrix is eliminated without further pivoting.
  """
  defn lu(a, opts \\ []) do
    opts = keyword!(opts, p_type: {:s, 64})
    {batch_shape, n} = split_shape(a)
    b = Nx.size(batch_shape)
    a = Nx.reshape(a, {b, n, n})
    rows = Nx.iota({b, n}, axis: 1, type: :s64)

    # 1. Pivoting on the matrix itself, column by column.
    {_, a, perm} =
      while {j = 0, a, perm = rows}, j < n - 1 do
        col = Nx.take(a, j, axis: 2)
        masked = Nx.select(rows < j, -1, Nx.abs(col))
        p = Nx.argmax(masked, axis: 1, keep_axis: true)
        idx = Nx.select(rows == j, p, Nx.select(rows == p, j, rows))
        a = Nx.take_along_axis(a, Nx.broadcast(Nx.new_axis(idx, 2), {b, n, n}), axis: 1)
        perm = Nx.take_along_axis(perm, idx, axis: 1)
        {j + 1, a, perm}
      end

    # 2. Elimination without pivoting.
    {_, u, l} =
      while {k = 0, u = a, l = Nx.broadcast(Nx.tensor(0, type: a.type), a)}, k < n do
        row_k = Nx.take(u, k, axis: 1)
        pivot = Nx.take(row_k, k, axis: 1) |> Nx.new_axis(1)
        col = Nx.take(u, k, axis: 2)
        # A zero pivot (a singular matrix) leaves its column unscaled, as LAPACK's getrf does,
        # instead of filling the rest with NaN.
        singular = pivot == 0
        f = Nx.select(rows > k and not singular, col / Nx.select(singular, 1, pivot), 0)
        e_k = Nx.as_type(rows == k, a.type)
        l = l + Nx.new_axis(f, 2) * Nx.new_axis(e_k, 1)
        u = u - Nx.new_axis(f, 2) * Nx.new_axis(row_k, 1)
        {k + 1, u, l}
      end

    l = l + Nx.eye(n, type: a.type)
    # perm[i] is the row of `a` now at row i: P has a 1 at (perm[i], i).
    onehot = Nx.new_axis(perm, 2) == Nx.iota({1, 1, n}, type: :s64)
    p = onehot |> Nx.transpose(axes: [0, 2, 1]) |> Nx.as_type(opts[:p_type])
    shape = matrix_shape(batch_shape, n)
    {Nx.reshape(p, shape), Nx.reshape(l, shape), Nx.reshape(u, shape)}
  end

  deftransformp matrix_shape(batch_shape, n), do: batch_shape |> Tuple.append(n) |> Tuple.append(n)

  deftransformp split_shape(a) do
    shape = Nx.shape(a)
    rank = tuple_size(shape)
    n = elem(shape, rank - 1)
    batch = shape |> Tuple.to_list() |> Enum.take(rank - 2) |> List.to_tuple()
    {batch, n}
  end
end
