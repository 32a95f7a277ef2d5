defmodule Plugboard.Nx.Ops.Sorting do
  @moduledoc false
  # sort, argsort (stablehlo.sort, stable), argmax and argmin (a reduction over values and indices).
  #
  # Order and NaN as Nx.BinaryBackend defines them: sort puts NaN after every number ascending and
  # before every number descending (a total order); argmax/argmin keep the first extreme (tie_break:
  # :low) or the last (:high), and a NaN is the extreme of both (Nx 0.13; among several NaNs the
  # tie-break picks, as JAX picks the first, where Nx.BinaryBackend takes the last).
  alias Nx.Defn.Expr
  alias Nx.Tensor, as: T
  alias Plugboard.Nx.{Emitter, MLIR, Ops}
  import Emitter, only: [emit: 2, op: 2]

  @scan_index {:s, 64}

  def emit(:sort, %T{type: type, shape: shape, data: %Expr{args: [t, opts]}} = out, st) do
    {x, st} = Ops.operand(t, out, st)
    {[v], st} = sort([{x, type}], type, shape, opts[:axis], opts[:direction], st)
    {v, st}
  end

  def emit(:argsort, %T{type: itype, shape: shape, data: %Expr{args: [t, opts]}}, st) do
    {x, st} = emit(t, st)
    axis = opts[:axis]
    {i, st} = op(st, "stablehlo.iota dim = #{axis} : #{MLIR.tensor(itype, shape)}")
    {[_, idx], st} = sort([{x, t.type}, {i, itype}], t.type, shape, axis, opts[:direction], st)
    {idx, st}
  end

  def emit(op, %T{type: out_type, shape: out_shape, data: %Expr{args: [t, opts]}}, st) when op in [:argmax, :argmin] do
    # The scan runs on s64 indices, whatever the result type: a sentinel in the result type would be a
    # real index there (u8 over 256 elements: 255), and Nx converts the index to the type at the end.
    itype = @scan_index
    {x, st} = emit(t, st)
    {shape, axis} = if opts[:axis], do: {t.shape, opts[:axis]}, else: {{Nx.size(t.shape)}, 0}
    {x, st} = Ops.reshape(x, t.type, t.shape, shape, st)
    vt = MLIR.tensor(t.type, {})
    it = MLIR.tensor(itype, {})
    {i, st} = op(st, "stablehlo.iota dim = #{axis} : #{MLIR.tensor(itype, shape)}")
    {v0, st} = Ops.splat(0, t.type, {}, st)
    {i0, st} = Ops.splat(sentinel(itype), itype, {}, st)
    names = for _ <- 1..4, do: nil
    {[va, ia, vb, ib], st} = Enum.map_reduce(names, st, fn _, st -> Emitter.fresh(st) end)

    {region, st} =
      Emitter.region(st, [{va, vt}, {ia, it}, {vb, vt}, {ib, it}], fn st ->
        {take_a, st} = prefer_first(op, opts[:tie_break] || :low, {va, ia}, {vb, ib}, t.type, itype, st)
        {v, st} = op(st, "stablehlo.select #{take_a}, #{va}, #{vb} : tensor<i1>, #{vt}")
        {j, st} = op(st, "stablehlo.select #{take_a}, #{ia}, #{ib} : tensor<i1>, #{it}")
        {[v, j], [vt, it], st}
      end)

    reduced = Tuple.delete_at(shape, axis)
    {r, st} = Emitter.fresh(st)

    st =
      Emitter.line(st, ~s|#{r}:2 = "stablehlo.reduce"(#{x}, #{i}, #{v0}, #{i0}) <{dimensions = array<i64: #{axis}>}> (#{region}) : | <>
        "(#{MLIR.tensor(t.type, shape)}, #{MLIR.tensor(itype, shape)}, #{vt}, #{it}) -> (#{MLIR.tensor(t.type, reduced)}, #{MLIR.tensor(itype, reduced)})")

    {idx, st} = Ops.reshape("#{r}#1", itype, reduced, out_shape, st)
    Ops.convert(idx, itype, out_type, out_shape, st)
  end

  # The index that marks the reduction's initial value: s64's largest (no index reaches it).
  defp sentinel(itype), do: Ops.identity(:highest, itype)

  # Whether (va, ia) wins over (vb, ib): a NaN beats every number (Nx 0.13's argmax and argmin both
  # land on a NaN, as JAX's do); between equal numbers, and between NaNs, the earlier index (tie_break
  # :low) or the later (:high). The initial value (index `none`) loses to everything.
  defp prefer_first(op, tie_break, {va, ia}, {vb, ib}, vtype, itype, st) do
    s = fn st, text -> op(st, text) end
    i1 = "tensor<i1>"
    vt = MLIR.tensor(vtype, {})
    it = MLIR.tensor(itype, {})
    cmp = MLIR.comparison(vtype)
    better = if op == :argmax, do: "GT", else: "LT"
    icmp = MLIR.comparison(itype)
    {none, st} = Ops.splat(sentinel(itype), itype, {}, st)
    {b_init, st} = s.(st, "stablehlo.compare EQ, #{ib}, #{none}, #{icmp} : (#{it}, #{it}) -> #{i1}")
    {a_valid, st} = s.(st, "stablehlo.compare NE, #{ia}, #{none}, #{icmp} : (#{it}, #{it}) -> #{i1}")
    {nan_a, st} = s.(st, "stablehlo.compare NE, #{va}, #{va}, #{cmp} : (#{vt}, #{vt}) -> #{i1}")
    {nan_b, st} = s.(st, "stablehlo.compare NE, #{vb}, #{vb}, #{cmp} : (#{vt}, #{vt}) -> #{i1}")
    {gt, st} = s.(st, "stablehlo.compare #{better}, #{va}, #{vb}, #{cmp} : (#{vt}, #{vt}) -> #{i1}")
    {eq, st} = s.(st, "stablehlo.compare EQ, #{va}, #{vb}, #{cmp} : (#{vt}, #{vt}) -> #{i1}")
    order = if tie_break == :low, do: "LT", else: "GT"
    {earlier, st} = s.(st, "stablehlo.compare #{order}, #{ia}, #{ib}, #{icmp} : (#{it}, #{it}) -> #{i1}")
    # Two numbers: the better, or the earlier of equal ones (a comparison with a NaN is false).
    {tie, st} = s.(st, "stablehlo.and #{eq}, #{earlier} : #{i1}")
    {number_wins, st} = s.(st, "stablehlo.or #{gt}, #{tie} : #{i1}")
    # A NaN: over a number always, over a NaN when earlier.
    {not_nan_b, st} = s.(st, "stablehlo.not #{nan_b} : #{i1}")
    {over, st} = s.(st, "stablehlo.or #{not_nan_b}, #{earlier} : #{i1}")
    {nan_wins, st} = s.(st, "stablehlo.and #{nan_a}, #{over} : #{i1}")
    {wins, st} = s.(st, "stablehlo.or #{nan_wins}, #{number_wins} : #{i1}")
    {wins, st} = s.(st, "stablehlo.and #{wins}, #{a_valid} : #{i1}")
    s.(st, "stablehlo.or #{wins}, #{b_init} : #{i1}")
  end

  # What a float is sorted by: the total order with every NaN made the positive quiet NaN and -0.0 made
  # 0.0, as JAX does. A NaN computed at run time may carry the sign bit (the total order would put it
  # before every number), and Nx holds -0.0 and 0.0 equal (a stable sort keeps their order).
  defp sort_key(x, type, st) do
    if Nx.Type.float?(type) do
      t = MLIR.tensor(type, {})
      {nan?, st} = op(st, "stablehlo.compare NE, #{x}, #{x}, FLOAT : (#{t}, #{t}) -> tensor<i1>")
      {zero, st} = Ops.splat(0, type, {}, st)
      {zero?, st} = op(st, "stablehlo.compare EQ, #{x}, #{zero}, FLOAT : (#{t}, #{t}) -> tensor<i1>")
      {nan, st} = Ops.splat(:nan, type, {}, st)
      {x, st} = op(st, "stablehlo.select #{zero?}, #{zero}, #{x} : tensor<i1>, #{t}")
      op(st, "stablehlo.select #{nan?}, #{nan}, #{x} : tensor<i1>, #{t}")
    else
      {x, st}
    end
  end

  # stablehlo.sort of `operands` ({value, type}) along `axis`, ordered by the first one.
  defp sort(operands, key_type, shape, axis, direction, st) do
    {block, st} =
      Enum.map_reduce(operands, st, fn {_, type}, st ->
        {a, st} = Emitter.fresh(st)
        {b, st} = Emitter.fresh(st)
        {[{a, MLIR.tensor(type, {})}, {b, MLIR.tensor(type, {})}], st}
      end)

    [{a, s}, {b, _} | _] = List.flatten(block)
    cmp = if Nx.Type.float?(key_type), do: "TOTALORDER", else: MLIR.comparison(key_type)
    dir = if direction == :desc, do: "GT", else: "LT"

    {region, st} =
      Emitter.region(st, List.flatten(block), fn st ->
        {ka, st} = sort_key(a, key_type, st)
        {kb, st} = sort_key(b, key_type, st)
        {c, st} = op(st, "stablehlo.compare #{dir}, #{ka}, #{kb}, #{cmp} : (#{s}, #{s}) -> tensor<i1>")
        {[c], ["tensor<i1>"], st}
      end)

    n = length(operands)
    types = Enum.map_join(operands, ", ", fn {_, type} -> MLIR.tensor(type, shape) end)
    {r, st} = Emitter.fresh(st)

    st =
      Emitter.line(st, ~s|#{r}:#{n} = "stablehlo.sort"(#{Enum.map_join(operands, ", ", &elem(&1, 0))}) <{dimension = #{axis} : i64, is_stable = true}> (#{region}) : | <>
        "(#{types}) -> (#{types})")

    {for(i <- 0..(n - 1), do: "#{r}##{i}"), st}
  end
end
