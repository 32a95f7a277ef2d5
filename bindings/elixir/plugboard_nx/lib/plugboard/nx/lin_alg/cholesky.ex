defmodule Plugboard.Nx.LinAlg.Cholesky do
  @moduledoc false
  # Cholesky by outer products (right-looking, as LAPACK's potf2): column k of L is the trailing
  # matrix's column k over the square root of its pivot, then the trailing matrix loses that
  # column's outer product. O(n³) in n steps, where Nx's default runs n²/2 steps with a sort each
  # and adds 1.0e-10 to every pivot (f64 results ~1e-11 off).
  import Nx.Defn
  alias Plugboard.Nx.LinAlg.Batch

  @doc """
  L (lower triangular, `a = L·Lᵀ`) of `a` (`{..., n, n}`, symmetric positive definite; only its lower
  triangle is read, as potrf with uplo "L"). A matrix that is not positive definite gives NaN from
  the failing pivot on. Computed in `a`'s type, returned as `opts[:type]`.
  """
  defn cholesky(a, opts \\ []) do
    opts = keyword!(opts, [:type])
    {batch, n, _} = Batch.split(a)
    a = Batch.flatten(a)
    type = Nx.type(a)
    zero = Nx.tensor(0, type: type)
    rows = Nx.iota({1, n})

    {l, _a, _rows} =
      while {l = Nx.broadcast(zero, a), a, rows}, k <- 0..(n - 1)//1 do
        zero = Nx.tensor(0, type: type)
        col = Nx.take(a, k, axis: 2)
        pivot = Nx.sqrt(Nx.take(col, k, axis: 1)) |> Nx.new_axis(1)
        below = Batch.select(rows > k, col / pivot, zero)
        l = Batch.select(Nx.iota({1, 1, n}) == k, Nx.new_axis(Batch.select(rows == k, pivot, below), 2), l)
        a = a - Nx.new_axis(below, 2) * Nx.new_axis(below, 1)
        {l, a, rows}
      end

    l |> Nx.as_type(opts[:type]) |> Batch.unflatten(batch)
  end
end
