defmodule Plugboard.Nx.LinAlg.QR do
  @moduledoc false
  # QR by Householder reflections, as LAPACK's geqrf (the reflectors, R) and orgqr (Q from them):
  # O(m·n·k) where Nx's default multiplies by a dense m x m reflector at each column (O(m³·k)).
  import Nx.Defn
  alias Plugboard.Nx.LinAlg.Batch

  @doc """
  `{q, r}` of `a` (`{..., m, n}`, k = min(m, n)): with `mode: :reduced` q is `{..., m, k}` and r
  `{..., k, n}`, with `:complete` `{..., m, m}` and `{..., m, n}`. R's diagonal has the signs of
  Nx's own QR (each reflector maps its column x to +‖x‖·e_j; a column already zero below the
  diagonal is left as it is), where LAPACK's geqrf maps to -sign(x_j)·‖x‖. Computed in `a`'s type,
  returned as `opts[:type]`.
  """
  defn qr(a, opts \\ []) do
    opts = keyword!(opts, [:type, mode: :reduced])
    {batch, _m, _n} = Batch.split(a)
    {q, r} = a |> Batch.flatten() |> decompose(opts[:mode])
    {Batch.unflatten(Nx.as_type(q, opts[:type]), batch), Batch.unflatten(Nx.as_type(r, opts[:type]), batch)}
  end

  @doc "`{q, r}` of a `{b, m, n}` stack (`mode` as in qr/2), in its type."
  defn decompose(a, mode) do
    {_b, m, n} = Nx.shape(a)
    k = min(m, n)
    {r, reflectors, betas} = triangularize(a)
    {q_cols, r_rows} = mode_sizes(mode, m, k)
    {form_q(reflectors, betas, q_cols), Nx.slice_along_axis(r, 0, r_rows, axis: 1)}
  end

  deftransformp mode_sizes(mode, m, k), do: if(mode == :complete, do: {m, m}, else: {k, k})

  # R and the reflectors H_j = I - beta_j·v_j·v_jᵀ (v_j zero above row j) with H_{k-1}···H_0·A = R.
  defnp triangularize(a) do
    {b, m, n} = Nx.shape(a)
    k = min(m, n)
    type = Nx.type(a)
    rows = Nx.iota({1, m})
    zero = Nx.tensor(0, type: type)

    {r, reflectors, betas, _rows} =
      while {r = a, reflectors = Nx.broadcast(zero, {b, m, k}), betas = Nx.broadcast(zero, {b, k}), rows}, j <- 0..(k - 1)//1 do
        zero = Nx.tensor(0, type: type)
        x = Batch.select(rows < j, zero, Nx.take(r, j, axis: 2))
        xj = Nx.take(x, j, axis: 1) |> Nx.new_axis(1)
        below = Batch.select(rows > j, x, zero)
        sigma2 = Nx.sum(below * below, axes: [1], keep_axes: true)
        norm = Nx.sqrt(xj * xj + sigma2)
        # v = x - ‖x‖·e_j, its j-th entry without cancellation (Parlett: x_j - ‖x‖ =
        # -sigma2 / (x_j + ‖x‖) for x_j > 0); nothing to do when the column is already zero below
        # the diagonal (as LAPACK's larfg: tau = 0).
        vj = Batch.select(xj <= 0, xj - norm, -sigma2 / Batch.select(xj <= 0, 1, xj + norm))
        v = Batch.select(rows == j, vj, below)
        beta = Batch.select(sigma2 == 0, zero, 2 / Batch.select(sigma2 == 0, 1, vj * vj + sigma2))
        r = reflect(r, v, beta)
        onehot = Nx.iota({1, 1, k}) == j
        reflectors = Batch.select(onehot, Nx.new_axis(v, 2), reflectors)
        betas = Batch.select(Nx.iota({1, k}) == j, beta, betas)
        {r, reflectors, betas, rows}
      end

    # Below the diagonal r holds rounding residues of the eliminated columns: zero, as geqrf's R.
    upper = Nx.iota({1, m, n}, axis: 1) <= Nx.iota({1, m, n}, axis: 2)
    {Batch.select(upper, r, zero), reflectors, betas}
  end

  # (I - beta·v·vᵀ)·x for a stack x {b, m, c}, v {b, m}, beta {b, 1}.
  defnp reflect(x, v, beta) do
    w = Nx.dot(v, [1], [0], x, [1], [0])
    x - Nx.new_axis(beta, 2) * Nx.new_axis(v, 2) * Nx.new_axis(w, 1)
  end

  # Q's first `cols` columns: H_0···H_{k-1} applied to I_{m x cols}, last reflector first.
  defnp form_q(reflectors, betas, cols) do
    {b, m, k} = Nx.shape(reflectors)
    q = Nx.broadcast(Nx.eye({m, cols}, type: Nx.type(reflectors)), {b, m, cols})

    {q, _, _} =
      while {q, reflectors, betas}, i <- 1..k//1 do
        j = k - i
        v = Nx.take(reflectors, j, axis: 2)
        beta = Nx.take(betas, j, axis: 1) |> Nx.new_axis(1)
        {reflect(q, v, beta), reflectors, betas}
      end

    q
  end
end
