defmodule Plugboard.Nx.Ops.Indexing do
  @moduledoc false
  # gather, take, take_along_axis, indexed_add, indexed_put: stablehlo.gather and stablehlo.scatter.
  # Out-of-range indices are clamped, as XLA (and EXLA) do.
  alias Nx.Defn.Expr
  alias Nx.Tensor, as: T
  alias Plugboard.Nx.{Emitter, MLIR, Ops}
  import Emitter, only: [emit: 2, op: 2, type_of: 1]

  def emit(:gather, %T{data: %Expr{args: [t, indices, opts]}} = out, st) do
    axes = opts[:axes]
    ir = tuple_size(indices.shape)
    inner = for i <- 0..(tuple_size(t.shape) - 1)//1, i not in axes, do: i
    offset_dims = Enum.to_list((ir - 1)..(ir - 2 + length(inner))//1)
    sizes = for {d, i} <- Enum.with_index(Tuple.to_list(t.shape)), do: if(i in axes, do: 1, else: d)
    {i, st} = emit(indices, st)
    gather_values(t, i, indices, out, offset_dims, axes, axes, ir - 1, sizes, st)
  end

  def emit(:take, %T{data: %Expr{args: [t, indices, axis]}} = out, st) do
    ir = tuple_size(indices.shape)
    r = tuple_size(t.shape)
    offset_dims = Enum.to_list(0..(axis - 1)//1) ++ Enum.to_list((axis + ir)..(r - 2 + ir)//1)
    sizes = t.shape |> put_elem(axis, 1) |> Tuple.to_list()
    {i, st} = emit(indices, st)
    {i, st} = Ops.reshape(i, indices.type, indices.shape, Tuple.insert_at(indices.shape, tuple_size(indices.shape), 1), st)
    index = %{indices | shape: Tuple.insert_at(indices.shape, tuple_size(indices.shape), 1)}
    gather_values(t, i, index, out, offset_dims, [axis], [axis], ir, sizes, st)
  end

  def emit(:take_along_axis, %T{shape: shape, data: %Expr{args: [t, indices, axis]}} = out, st) do
    {full, full_shape, st} = full_indices(indices, shape, axis, st)
    r = tuple_size(shape)
    all = Enum.to_list(0..(r - 1)//1)
    index = %{indices | shape: full_shape, type: {:s, 64}}
    gather_values(t, full, index, out, [], all, all, r, List.duplicate(1, r), st)
  end

  def emit(op, %T{type: type, data: %Expr{args: [t, indices, updates, opts]}} = out, st) when op in [:indexed_add, :indexed_put] do
    axes = opts[:axes]
    ir = tuple_size(indices.shape)
    {x, st} = Ops.operand(t, out, st)
    {i, st} = emit(indices, st)
    {u, st} = Ops.operand(updates, Ops.tpl(type, updates.shape), st)
    window = Enum.to_list((ir - 1)..(tuple_size(updates.shape) - 1)//1)
    dims = attr("scatter", update_window_dims: window, inserted_window_dims: axes, scatter_dims_to_operand_dims: axes, index_vector_dim: ir - 1)
    {region, st} =
      if op == :indexed_add do
        Ops.combiner_region("add", type, st)
      else
        # indexed_put: the update replaces the value.
        s = MLIR.tensor(type, {})
        {a, st} = Emitter.fresh(st)
        {b, st} = Emitter.fresh(st)
        Emitter.region(st, [{a, s}, {b, s}], fn st -> {[b], [s], st} end)
      end

    op(st, ~s|"stablehlo.scatter"(#{x}, #{i}, #{u}) <{indices_are_sorted = false, scatter_dimension_numbers = #{dims}, unique_indices = false}> (#{region}) : | <>
      "(#{type_of(out)}, #{type_of(indices)}, #{MLIR.tensor(type, updates.shape)}) -> #{type_of(out)}")
  end

  defp gather_values(t, i, indices, out, offset_dims, collapsed, start_map, index_dim, sizes, st) do
    {x, st} = emit(t, st)
    dims = attr("gather", offset_dims: offset_dims, collapsed_slice_dims: collapsed, start_index_map: start_map, index_vector_dim: index_dim)
    op(st, ~s|"stablehlo.gather"(#{x}, #{i}) <{dimension_numbers = #{dims}, indices_are_sorted = false, slice_sizes = #{MLIR.array(sizes)}}> : | <>
      "(#{type_of(t)}, #{type_of(indices)}) -> #{type_of(out)}")
  end

  # For take_along_axis: an index per output element for every axis (iotas, and `indices` on `axis`),
  # stacked on a new last axis.
  defp full_indices(indices, shape, axis, st) do
    r = tuple_size(shape)
    one = Tuple.insert_at(shape, tuple_size(shape), 1)
    {i, st} = Ops.operand(indices, Ops.tpl({:s, 64}, shape), st)

    {parts, st} =
      Enum.map_reduce(0..(r - 1)//1, st, fn d, st ->
        {v, st} = if d == axis, do: {i, st}, else: op(st, "stablehlo.iota dim = #{d} : #{MLIR.tensor({:s, 64}, shape)}")
        Ops.reshape(v, {:s, 64}, shape, one, st)
      end)

    full_shape = Tuple.insert_at(shape, tuple_size(shape), r)
    types = Enum.map_join(parts, ", ", fn _ -> MLIR.tensor({:s, 64}, one) end)
    {v, st} = op(st, "stablehlo.concatenate #{Enum.join(parts, ", ")}, dim = #{r} : (#{types}) -> #{MLIR.tensor({:s, 64}, full_shape)}")
    {v, full_shape, st}
  end

  defp attr(kind, fields) do
    body =
      fields
      |> Enum.reject(fn {_, v} -> v == [] end)
      |> Enum.map_join(", ", fn
        {k, v} when is_list(v) -> "#{k} = #{MLIR.list(v)}"
        {k, v} -> "#{k} = #{v}"
      end)

    "#stablehlo.#{kind}<#{body}>"
  end
end
