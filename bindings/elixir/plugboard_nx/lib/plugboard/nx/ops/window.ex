defmodule Plugboard.Nx.Ops.Window do
  @moduledoc false
  # Window reductions (stablehlo.reduce_window) and window scatters (stablehlo.select_and_scatter).
  alias Nx.Defn.Expr
  alias Nx.Tensor, as: T
  alias Plugboard.Nx.{Emitter, MLIR, Ops}
  import Emitter, only: [op: 2, type_of: 1]

  @combiners %{window_sum: {"add", 0}, window_product: {"multiply", 1}, window_max: {"maximum", :lowest}, window_min: {"minimum", :highest}}

  def emit(op, %T{type: type, data: %Expr{args: [t, window, opts]}} = out, st) when is_map_key(@combiners, op) do
    {combiner, init} = @combiners[op]
    {x, st} = Ops.operand(t, Ops.tpl(type, t.shape), st)
    {i, st} = Ops.splat(Ops.identity(init, type), type, {}, st)
    {region, st} = Ops.combiner_region(combiner, type, st)

    reduce_window(x, i, region, t.shape, window, opts, out, st)
  end

  def emit(:window_reduce, %T{type: type, data: %Expr{args: [t, acc, window, opts, fun]}} = out, st) do
    {x, st} = Ops.operand(t, Ops.tpl(type, t.shape), st)
    {i, st} = Ops.operand(acc, Ops.tpl(type, {}), st)
    {region, st} = Emitter.fun_region(fun, st)
    reduce_window(x, i, region, t.shape, window, opts, out, st)
  end

  def emit(op, %T{type: type, data: %Expr{args: [t, source, init, window, opts]}} = out, st)
      when op in [:window_scatter_max, :window_scatter_min] do
    {x, st} = Ops.operand(t, Ops.tpl(type, t.shape), st)
    {src, st} = Ops.operand(source, Ops.tpl(type, source.shape), st)
    {i, st} = Ops.operand(init, Ops.tpl(type, {}), st)
    s = MLIR.tensor(type, {})
    # Ties: the first maximum, the last minimum (as Nx.BinaryBackend selects them).
    cmp = if op == :window_scatter_max, do: "GE", else: "LT"
    {a, st} = Emitter.fresh(st)
    {b, st} = Emitter.fresh(st)

    {select, st} =
      Emitter.region(st, [{a, s}, {b, s}], fn st ->
        {r, st} = op(st, "stablehlo.compare #{cmp}, #{a}, #{b}, #{MLIR.comparison(type)} : (#{s}, #{s}) -> tensor<i1>")
        {[r], ["tensor<i1>"], st}
      end)

    {scatter, st} = Ops.combiner_region("add", type, st)

    rank = tuple_size(t.shape)
    padding = padding(opts[:padding], rank)

    op(st, ~s|"stablehlo.select_and_scatter"(#{x}, #{src}, #{i}) <{padding = #{padding}, window_dimensions = #{MLIR.array(Tuple.to_list(window))}, | <>
      ~s|window_strides = #{MLIR.array(opts[:strides])}}> (#{select}, #{scatter}) : (#{MLIR.tensor(type, t.shape)}, #{MLIR.tensor(type, source.shape)}, #{s}) -> #{type_of(out)}|)
  end

  defp reduce_window(x, init, region, shape, window, opts, out, st) do
    rank = tuple_size(shape)
    strides = opts[:strides] || List.duplicate(1, rank)
    dilations = opts[:window_dilations] || List.duplicate(1, rank)
    type = out.type

    op(st, ~s|"stablehlo.reduce_window"(#{x}, #{init}) <{base_dilations = #{MLIR.array(List.duplicate(1, rank))}, padding = #{padding(opts[:padding], rank)}, | <>
      ~s|window_dilations = #{MLIR.array(dilations)}, window_dimensions = #{MLIR.array(Tuple.to_list(window))}, window_strides = #{MLIR.array(strides)}}> (#{region}) : | <>
      "(#{MLIR.tensor(type, shape)}, #{MLIR.tensor(type, {})}) -> #{type_of(out)}")
  end

  defp padding(nil, rank), do: padding(List.duplicate({0, 0}, rank), rank)

  defp padding(config, rank) do
    pairs = Enum.map_join(config, ", ", fn {lo, hi} -> "[#{lo}, #{hi}]" end)
    "dense<[#{pairs}]> : tensor<#{rank}x2xi64>"
  end
end
