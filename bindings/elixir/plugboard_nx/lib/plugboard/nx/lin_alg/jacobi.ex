defmodule Plugboard.Nx.LinAlg.Jacobi do
  @moduledoc false
  # What the Jacobi methods (Plugboard.Nx.LinAlg.Eigh, two-sided; Plugboard.Nx.LinAlg.SVD,
  # one-sided) share: the rotation that zeroes one symmetric 2x2 problem, and the parallel
  # (round-robin) ordering in which they visit every pair of indices.
  #
  # Layout: an even number 2m of indices sits in two halves, top (positions 0..m-1) and bottom
  # (m..2m-1); round r rotates the m disjoint pairs (k, m + k) at once, then moves the indices one
  # step around a circle with position 0 fixed (top: 0, m, 1, ..., m-2; bottom: m+1, ..., 2m-1,
  # m-1). After 2m - 1 rounds (a sweep) every pair of indices has met once.
  import Nx.Defn
  alias Plugboard.Nx.LinAlg.Batch

  @doc """
  The rotation `J = [[c, s], [-s, c]]` with `(Jᵀ [[app, apq], [apq, aqq]] J)[0][1] = 0` (the smaller
  angle, Golub & Van Loan's sym.schur2), elementwise over tensors of pairs: `{t, c, s}` with
  `t = s / c`; the rotated diagonal is `app - t·apq`, `aqq + t·apq`. A zero `apq` gives the identity.
  """
  defn rotation(app, aqq, apq) do
    zero = apq == 0
    tau = (aqq - app) / (2 * Nx.select(zero, 1, apq))
    abs_tau = Nx.abs(tau)
    # sqrt(1 + tau²) without overflowing tau² for large |tau|.
    big = abs_tau > 1
    inv = 1 / Nx.select(big, abs_tau, 1)
    root = Nx.select(big, abs_tau * Nx.sqrt(1 + inv * inv), Nx.sqrt(1 + tau * tau))
    t = Nx.select(zero, 0, Nx.select(tau >= 0, 1, -1) / (abs_tau + root))
    c = 1 / Nx.sqrt(1 + t * t)
    {t, c, t * c}
  end

  @doc "`t` with its positions along `axis` (2m of them) moved one round on (see the moduledoc)."
  deftransform next_round(t, axis) do
    n2 = elem(Nx.shape(t), axis)
    m = div(n2, 2)

    if m < 2 do
      t
    else
      [{0, 1}, {m, 1}, {1, m - 2}, {m + 1, m - 1}, {m - 1, 1}]
      |> Enum.reject(fn {_, len} -> len == 0 end)
      |> Enum.map(fn {start, len} -> Nx.slice_along_axis(t, start, len, axis: axis) end)
      |> Nx.concatenate(axis: axis)
    end
  end

  @doc "`t`'s `axis` split into its top and bottom halves."
  deftransform halves(t, axis) do
    m = div(elem(Nx.shape(t), axis), 2)
    {Nx.slice_along_axis(t, 0, m, axis: axis), Nx.slice_along_axis(t, m, m, axis: axis)}
  end

  @doc "`{c·top - s·bottom, s·top + c·bottom}` joined along `axis`: the pairs of `axis` rotated."
  deftransform rotate(t, c, s, axis) do
    {top, bottom} = halves(t, axis)
    new_top = Nx.subtract(Nx.multiply(c, top), Nx.multiply(s, bottom))
    new_bottom = Nx.add(Nx.multiply(s, top), Nx.multiply(c, bottom))
    Nx.concatenate([new_top, new_bottom], axis: axis)
  end

  @doc """
  `v` (`{b, n, n}`, orthogonal but for rounding) moved to the nearest orthogonal matrix to first
  order: one Newton-Schulz step, `v + v·(I - vᵀv)/2`. The rotations' rounding accumulates in
  the product of thousands of them (‖vᵀv - I‖ was 14·n·eps in f64 and 26·n·eps in f32 at n = 256,
  past 10·n·eps); after the step it is that of one matrix product (0.2·n·eps).
  """
  defn orthonormalize(v) do
    {b, n, _} = Nx.shape(v)
    e = Batch.eye(b, n, Nx.type(v)) - Batch.matmul(Batch.transpose(v), v)
    v + Batch.matmul(v, e) / 2
  end

  @doc """
  `{a / scale, scale}` for a `{b, m, n}` stack: each matrix divided by its largest absolute entry
  (`scale`, `{b}`; 1 for an all-zero matrix), as LAPACK scales before its iterations. The Jacobi
  methods square entries (norms, the stopping tests): unscaled, entries past sqrt(max) (1.8e19 in
  f32) overflow to Inf and those under sqrt(min) (1.1e-19) vanish to 0. The caller multiplies the
  eigen- or singular values by `scale` again; vectors do not change.
  """
  defn scaled(a) do
    scale = Nx.reduce_max(Nx.abs(a), axes: [1, 2])
    scale = Nx.select(scale == 0, 1, scale)
    {a / Nx.reshape(scale, {:auto, 1, 1}), scale}
  end

  @doc "`n` rounded up to even (an odd matrix is padded with a zero row and column)."
  deftransform even(n), do: n + rem(n, 2)
end
