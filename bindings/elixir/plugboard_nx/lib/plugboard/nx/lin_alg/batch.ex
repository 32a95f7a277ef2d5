defmodule Plugboard.Nx.LinAlg.Batch do
  @moduledoc false
  # The leading (batch) axes of a stack of matrices `{..., m, n}`: the decompositions work on
  # `{b, m, n}` and give their results back with the leading axes restored.
  import Nx.Defn

  @doc "`{batch_shape, m, n}` of a `{..., m, n}` tensor."
  deftransform split(t) do
    shape = Nx.shape(t)
    rank = tuple_size(shape)
    batch = shape |> Tuple.to_list() |> Enum.take(rank - 2) |> List.to_tuple()
    {batch, elem(shape, rank - 2), elem(shape, rank - 1)}
  end

  @doc "`t` as `{b, m, n}` (one leading axis for all the batch axes)."
  deftransform flatten(t) do
    {batch, m, n} = split(t)
    Nx.reshape(t, {Tuple.product(batch), m, n})
  end

  @doc "`t` (`{b, ...}`) with its leading axis back as `batch_shape`."
  deftransform unflatten(t, batch_shape) do
    [_ | rest] = Tuple.to_list(Nx.shape(t))
    Nx.reshape(t, List.to_tuple(Tuple.to_list(batch_shape) ++ rest))
  end

  @doc "Nx.select with the predicate broadcast to the shape of all three (Nx.select takes its shape)."
  deftransform select(pred, on_true, on_false) do
    shapes = Enum.map([pred, on_true, on_false], &Tuple.to_list(Nx.shape(&1)))
    rank = shapes |> Enum.map(&length/1) |> Enum.max()

    shape =
      shapes
      |> Enum.map(&(List.duplicate(1, rank - length(&1)) ++ &1))
      |> Enum.zip_with(&Enum.max/1)
      |> List.to_tuple()

    Nx.select(Nx.broadcast(pred, shape), on_true, on_false)
  end

  @doc """
  The signs (±1, of the type) that make the largest-magnitude entry of each vector along `axis` of
  `{b, r, c}` (columns for axis 1, rows for axis 2) positive, shaped to multiply them: the sign
  convention of both routes' eigenvectors and singular vectors (Nx's own Jacobi gives it in
  practice, and Nx's tests and gradients expect it; sklearn's svd_flip makes the same choice).
  """
  deftransform signs(t, axis) do
    at = Nx.argmax(Nx.abs(t), axis: axis, keep_axis: true)
    largest = Nx.take_along_axis(t, at, axis: axis)
    Nx.select(Nx.less(largest, 0), Nx.tensor(-1, type: Nx.type(t)), Nx.tensor(1, type: Nx.type(t)))
  end

  @doc "The identity `{b, n, n}` of `type`."
  deftransform eye(b, n, type), do: Nx.broadcast(Nx.eye(n, type: type), {b, n, n})

  @doc "`{b, m, n}` transposed to `{b, n, m}`."
  deftransform transpose(t), do: Nx.transpose(t, axes: [0, 2, 1])

  @doc "The matrix product of two stacks: `{b, m, k} · {b, k, n}`."
  deftransform matmul(x, y), do: Nx.dot(x, [2], [0], y, [1], [0])
end
