defmodule Plugboard.Nx.Ops do
  @moduledoc false
  # One function per Nx operation family, each lowering an expression node to StableHLO/CHLO text
  # through Plugboard.Nx.Emitter. Operands are converted to the operation's type and broadcast to its
  # shape here (Nx.Defn.Expr keeps them as written), as EXLA does.
  alias Nx.Defn.Expr
  alias Nx.Tensor, as: T
  alias Plugboard.Nx.{Emitter, MLIR}
  import Emitter, only: [emit: 2, op: 2, type_of: 1]

  ## Operands: conversion and broadcasting

  @doc "A template tensor of `type` and `shape` (what `operand/3` converts to)."
  def tpl(type, shape), do: %T{type: type, shape: shape, names: List.duplicate(nil, tuple_size(shape))}

  @doc "`expr` as a value of `template`'s type and shape."
  def operand(%T{vectorized_axes: [_ | _]} = expr, template, st),
    do: operand(Nx.devectorize(expr, keep_names: false), template, st)

  def operand(expr, %T{vectorized_axes: [_ | _]} = template, st),
    do: operand(expr, Nx.devectorize(template, keep_names: false), st)

  def operand(expr, %T{type: type, shape: shape}, st) do
    {v, st} = emit(expr, st)
    {v, st} = convert(v, expr.type, type, expr.shape, st)
    broadcast(v, type, expr.shape, shape, st)
  end

  @doc "`expr` (any type) as an i1 tensor of its shape: expr != 0."
  def to_pred(expr, st) do
    {v, st} = emit(expr, st)
    nonzero(v, expr.type, expr.shape, st)
  end

  def nonzero(v, type, shape, st) do
    {zero, st} = splat(0, type, shape, st)
    t = MLIR.tensor(type, shape)
    op(st, "stablehlo.compare NE, #{v}, #{zero}, #{MLIR.comparison(type)} : (#{t}, #{t}) -> #{MLIR.tensor(:pred, shape)}")
  end

  def convert(v, same, same, _shape, st), do: {v, st}

  def convert(v, {:c, _} = from, to, shape, st) when elem(to, 0) != :c do
    # Complex to real: the real part (as Nx's as_type), then the real type.
    real = real_of(from)
    {r, st} = op(st, "stablehlo.real #{v} : (#{MLIR.tensor(from, shape)}) -> #{MLIR.tensor(real, shape)}")
    convert(r, real, to, shape, st)
  end

  def convert(v, from, to, shape, st) do
    op(st, "stablehlo.convert #{v} : (#{MLIR.tensor(from, shape)}) -> #{MLIR.tensor(to, shape)}")
  end

  def broadcast(v, _type, same, same, st), do: {v, st}

  def broadcast(v, type, from, to, st) do
    offset = tuple_size(to) - tuple_size(from)
    dims = for i <- 0..(tuple_size(from) - 1)//1, do: i + offset
    op(st, "stablehlo.broadcast_in_dim #{v}, dims = #{MLIR.list(dims)} : (#{MLIR.tensor(type, from)}) -> #{MLIR.tensor(type, to)}")
  end

  @doc "A constant of `type` and `shape` holding `value` everywhere."
  def splat(value, type, shape, st) do
    {c, st} = op(st, "stablehlo.constant #{MLIR.scalar_attribute(value, type)} : #{MLIR.tensor(type, {})}")
    broadcast(c, type, {}, shape, st)
  end

  defp real_of({:c, 64}), do: {:f, 32}
  defp real_of({:c, 128}), do: {:f, 64}
  defp real_of(t), do: t

  ## Creation

  def emit(:constant, %T{type: type, shape: shape, data: %Expr{args: [value]}}, st), do: splat(value, type, shape, st)

  # Constants up to this many bytes are written into the program; larger ones are passed as
  # parameters (a 10^6-element f64 constant was 16 MB of hex text, parsed at every compile).
  @inline_constant_bytes 65_536

  def emit(:tensor, %T{type: type, shape: shape, data: %Expr{args: [t]}}, st) do
    if Nx.byte_size(t) > @inline_constant_bytes do
      Emitter.constant_parameter(t, st)
    else
      op(st, "stablehlo.constant #{MLIR.hex_attribute(Nx.to_binary(t))} : #{MLIR.tensor(type, shape)}")
    end
  end

  def emit(:iota, %T{type: type, shape: shape, data: %Expr{args: [nil]}}, st) do
    size = Nx.size(shape)
    {v, st} = op(st, "stablehlo.iota dim = 0 : #{MLIR.tensor(type, {size})}")
    reshape(v, type, {size}, shape, st)
  end

  def emit(:iota, %T{type: type, shape: shape, data: %Expr{args: [axis]}}, st),
    do: op(st, "stablehlo.iota dim = #{axis} : #{MLIR.tensor(type, shape)}")

  def emit(:eye, %T{type: type, shape: shape}, st) do
    r = tuple_size(shape)
    it = MLIR.tensor({:s, 64}, shape)
    {i, st} = op(st, "stablehlo.iota dim = #{r - 2} : #{it}")
    {j, st} = op(st, "stablehlo.iota dim = #{r - 1} : #{it}")
    {eq, st} = op(st, "stablehlo.compare EQ, #{i}, #{j}, SIGNED : (#{it}, #{it}) -> #{MLIR.tensor(:pred, shape)}")
    convert(eq, :pred, type, shape, st)
  end

  ## Elementwise

  @binary %{
    add: "add", subtract: "subtract", multiply: "multiply", divide: "divide", pow: "power",
    remainder: "remainder", atan2: "atan2", min: "minimum", max: "maximum", quotient: "divide",
    bitwise_and: "and", bitwise_or: "or", bitwise_xor: "xor", left_shift: "shift_left"
  }
  @compare %{equal: "EQ", not_equal: "NE", greater: "GT", less: "LT", greater_equal: "GE", less_equal: "LE"}
  @logical %{logical_and: "and", logical_or: "or", logical_xor: "xor"}

  def emit(op, %T{data: %Expr{args: [a, b]}} = out, st) when is_map_key(@binary, op) do
    {x, st} = operand(a, out, st)
    {y, st} = operand(b, out, st)
    op(st, "stablehlo.#{@binary[op]} #{x}, #{y} : #{type_of(out)}")
  end

  def emit(:right_shift, %T{type: type, data: %Expr{args: [a, b]}} = out, st) do
    {x, st} = operand(a, out, st)
    {y, st} = operand(b, out, st)
    kind = if match?({:u, _}, type), do: "logical", else: "arithmetic"
    op(st, "stablehlo.shift_right_#{kind} #{x}, #{y} : #{type_of(out)}")
  end

  def emit(op, %T{shape: shape, type: out_type, data: %Expr{args: [a, b]}}, st) when is_map_key(@compare, op) do
    type = Nx.Type.merge(a.type, b.type)
    template = tpl(type, shape)
    {x, st} = operand(a, template, st)
    {y, st} = operand(b, template, st)
    t = MLIR.tensor(type, shape)
    {c, st} = op(st, "stablehlo.compare #{@compare[op]}, #{x}, #{y}, #{MLIR.comparison(type)} : (#{t}, #{t}) -> #{MLIR.tensor(:pred, shape)}")
    convert(c, :pred, out_type, shape, st)
  end

  def emit(op, %T{shape: shape, type: out_type, data: %Expr{args: [a, b]}}, st) when is_map_key(@logical, op) do
    {x, st} = to_pred(a, st)
    {x, st} = broadcast(x, :pred, a.shape, shape, st)
    {y, st} = to_pred(b, st)
    {y, st} = broadcast(y, :pred, b.shape, shape, st)
    {v, st} = op(st, "stablehlo.#{@logical[op]} #{x}, #{y} : #{MLIR.tensor(:pred, shape)}")
    convert(v, :pred, out_type, shape, st)
  end

  @unary %{
    exp: "stablehlo.exponential", expm1: "stablehlo.exponential_minus_one", log: "stablehlo.log",
    log1p: "stablehlo.log_plus_one", sigmoid: "stablehlo.logistic", cos: "stablehlo.cosine",
    sin: "stablehlo.sine", tanh: "stablehlo.tanh", sqrt: "stablehlo.sqrt", rsqrt: "stablehlo.rsqrt",
    cbrt: "stablehlo.cbrt", negate: "stablehlo.negate", floor: "stablehlo.floor", ceil: "stablehlo.ceil",
    round: "stablehlo.round_nearest_afz", bitwise_not: "stablehlo.not", population_count: "stablehlo.popcnt",
    count_leading_zeros: "stablehlo.count_leading_zeros",
    tan: "chlo.tan", cosh: "chlo.cosh", sinh: "chlo.sinh", acos: "chlo.acos", asin: "chlo.asin",
    atan: "chlo.atan", acosh: "chlo.acosh", asinh: "chlo.asinh", atanh: "chlo.atanh", erf: "chlo.erf",
    erfc: "chlo.erfc", erf_inv: "chlo.erf_inv"
  }

  # stablehlo.cbrt takes real floats only; the principal root of a complex z, as Nx's binary
  # backend computes it: |z|^(1/3) at the angle arg(z)/3.
  def emit(:cbrt, %T{type: {:c, _} = type, shape: shape, data: %Expr{args: [a]}} = out, st) do
    {z, st} = operand(a, out, st)
    ct = type_of(out)
    rt = MLIR.tensor(real_of(type), shape)
    {re, st} = op(st, "stablehlo.real #{z} : (#{ct}) -> #{rt}")
    {im, st} = op(st, "stablehlo.imag #{z} : (#{ct}) -> #{rt}")
    {r, st} = op(st, "stablehlo.abs #{z} : (#{ct}) -> #{rt}")
    {root, st} = op(st, ~s["stablehlo.cbrt"(#{r}) : (#{rt}) -> #{rt}])
    {angle, st} = op(st, "stablehlo.atan2 #{im}, #{re} : #{rt}")
    {three, st} = splat(3, real_of(type), shape, st)
    {third, st} = op(st, "stablehlo.divide #{angle}, #{three} : #{rt}")
    {c, st} = op(st, ~s["stablehlo.cosine"(#{third}) : (#{rt}) -> #{rt}])
    {s, st} = op(st, ~s["stablehlo.sine"(#{third}) : (#{rt}) -> #{rt}])
    {x, st} = op(st, "stablehlo.multiply #{root}, #{c} : #{rt}")
    {y, st} = op(st, "stablehlo.multiply #{root}, #{s} : #{rt}")
    op(st, "stablehlo.complex #{x}, #{y} : #{ct}")
  end

  def emit(op, %T{data: %Expr{args: [a]}} = out, st) when is_map_key(@unary, op) do
    {x, st} = operand(a, out, st)
    t = type_of(out)
    op(st, ~s["#{@unary[op]}"(#{x}) : (#{t}) -> #{t}])
  end

  def emit(:abs, %T{type: {:u, _}, data: %Expr{args: [a]}} = out, st), do: operand(a, out, st)

  def emit(:abs, %T{data: %Expr{args: [%T{type: {:c, _}} = a]}} = out, st) do
    {x, st} = emit(a, st)
    op(st, "stablehlo.abs #{x} : (#{type_of(a)}) -> #{type_of(out)}")
  end

  def emit(:abs, %T{data: %Expr{args: [a]}} = out, st) do
    {x, st} = operand(a, out, st)
    op(st, "stablehlo.abs #{x} : #{type_of(out)}")
  end

  def emit(:sign, %T{type: {:u, _} = type, shape: shape, data: %Expr{args: [a]}} = out, st) do
    {x, st} = operand(a, out, st)
    {p, st} = nonzero(x, type, shape, st)
    convert(p, :pred, type, shape, st)
  end

  def emit(:sign, %T{data: %Expr{args: [a]}} = out, st) do
    {x, st} = operand(a, out, st)
    op(st, "stablehlo.sign #{x} : #{type_of(out)}")
  end

  def emit(:is_nan, %T{type: type, shape: shape, data: %Expr{args: [a]}}, st) do
    case a.type do
      {k, _} when k in [:s, :u] ->
        splat(0, type, shape, st)

      at ->
        {x, st} = emit(a, st)
        t = MLIR.tensor(at, shape)
        {c, st} = op(st, "stablehlo.compare NE, #{x}, #{x}, FLOAT : (#{t}, #{t}) -> #{MLIR.tensor(:pred, shape)}")
        convert(c, :pred, type, shape, st)
    end
  end

  def emit(:is_infinity, %T{type: type, shape: shape, data: %Expr{args: [a]}}, st) do
    case a.type do
      {k, _} when k in [:s, :u] ->
        splat(0, type, shape, st)

      at ->
        {x, st} = emit(a, st)
        rt = real_of(at)
        t = MLIR.tensor(rt, shape)
        {abs, st} = op(st, "stablehlo.abs #{x} : (#{MLIR.tensor(at, shape)}) -> #{t}")
        {inf, st} = splat(:infinity, rt, shape, st)
        {c, st} = op(st, "stablehlo.compare EQ, #{abs}, #{inf}, FLOAT : (#{t}, #{t}) -> #{MLIR.tensor(:pred, shape)}")
        convert(c, :pred, type, shape, st)
    end
  end

  def emit(:logical_not, %T{type: type, shape: shape, data: %Expr{args: [a]}}, st) do
    {x, st} = emit(a, st)
    {zero, st} = splat(0, a.type, shape, st)
    t = MLIR.tensor(a.type, shape)
    {c, st} = op(st, "stablehlo.compare EQ, #{x}, #{zero}, #{MLIR.comparison(a.type)} : (#{t}, #{t}) -> #{MLIR.tensor(:pred, shape)}")
    convert(c, :pred, type, shape, st)
  end

  def emit(:real, %T{type: type, shape: shape, data: %Expr{args: [%T{type: {:c, _}} = a]}}, st) do
    {x, st} = emit(a, st)
    op(st, "stablehlo.real #{x} : (#{type_of(a)}) -> #{MLIR.tensor(type, shape)}")
  end

  def emit(:imag, %T{type: type, shape: shape, data: %Expr{args: [%T{type: {:c, _}} = a]}}, st) do
    {x, st} = emit(a, st)
    op(st, "stablehlo.imag #{x} : (#{type_of(a)}) -> #{MLIR.tensor(type, shape)}")
  end

  def emit(:real, %T{data: %Expr{args: [a]}} = out, st), do: operand(a, out, st)
  def emit(:imag, %T{type: type, shape: shape}, st), do: splat(0, type, shape, st)

  def emit(:conjugate, %T{type: {:c, _} = type, shape: shape, data: %Expr{args: [a]}} = out, st) do
    {x, st} = operand(a, out, st)
    conjugate(x, type, shape, st)
  end

  def emit(:conjugate, %T{data: %Expr{args: [a]}} = out, st), do: operand(a, out, st)

  def emit(:as_type, %T{data: %Expr{args: [a]}} = out, st), do: operand(a, out, st)

  def emit(:bitcast, %T{data: %Expr{args: [a]}} = out, st) do
    {x, st} = emit(a, st)
    op(st, "stablehlo.bitcast_convert #{x} : (#{type_of(a)}) -> #{type_of(out)}")
  end

  def emit(:select, %T{type: type, shape: shape, data: %Expr{args: [pred, on_true, on_false]}} = out, st) do
    {p, st} = to_pred(pred, st)
    {p, st} = broadcast(p, :pred, pred.shape, shape, st)
    {x, st} = operand(on_true, out, st)
    {y, st} = operand(on_false, out, st)
    op(st, "stablehlo.select #{p}, #{x}, #{y} : #{MLIR.tensor(:pred, shape)}, #{MLIR.tensor(type, shape)}")
  end

  def emit(:clip, %T{type: type, data: %Expr{args: [a, min, max]}} = out, st) do
    {x, st} = operand(a, out, st)
    {lo, st} = operand(min, tpl(type, {}), st)
    {hi, st} = operand(max, tpl(type, {}), st)
    s = MLIR.tensor(type, {})
    op(st, "stablehlo.clamp #{lo}, #{x}, #{hi} : (#{s}, #{type_of(out)}, #{s}) -> #{type_of(out)}")
  end

  ## Shape

  def emit(op, %T{type: type, shape: shape, data: %Expr{args: [a | _]}}, st) when op in [:reshape, :squeeze] do
    {x, st} = emit(a, st)
    reshape(x, type, a.shape, shape, st)
  end

  def emit(:broadcast, %T{type: type, shape: shape, data: %Expr{args: [a, _shape, axes]}}, st) do
    {x, st} = emit(a, st)
    op(st, "stablehlo.broadcast_in_dim #{x}, dims = #{MLIR.list(axes)} : (#{MLIR.tensor(type, a.shape)}) -> #{MLIR.tensor(type, shape)}")
  end

  def emit(:transpose, %T{data: %Expr{args: [a, axes]}} = out, st) do
    {x, st} = emit(a, st)
    op(st, "stablehlo.transpose #{x}, dims = #{MLIR.list(axes)} : (#{type_of(a)}) -> #{type_of(out)}")
  end

  def emit(:reverse, %T{data: %Expr{args: [a, axes]}} = out, st) do
    {x, st} = emit(a, st)
    op(st, "stablehlo.reverse #{x}, dims = #{MLIR.list(axes)} : #{type_of(out)}")
  end

  def emit(:pad, %T{type: type, data: %Expr{args: [a, value, config]}} = out, st) do
    {x, st} = operand(a, tpl(type, a.shape), st)
    {v, st} = operand(value, tpl(type, {}), st)
    {lo, hi, interior} = Enum.reduce(Enum.reverse(config), {[], [], []}, fn {l, h, i}, {ls, hs, is} -> {[l | ls], [h | hs], [i | is]} end)
    op(st, "stablehlo.pad #{x}, #{v}, low = #{MLIR.list(lo)}, high = #{MLIR.list(hi)}, interior = #{MLIR.list(interior)} : " <>
      "(#{MLIR.tensor(type, a.shape)}, #{MLIR.tensor(type, {})}) -> #{type_of(out)}")
  end

  def emit(:concatenate, %T{type: type, data: %Expr{args: [tensors, axis]}} = out, st) do
    {values, st} = Enum.map_reduce(tensors, st, fn t, st -> operand(t, tpl(type, t.shape), st) end)
    types = Enum.map_join(tensors, ", ", &MLIR.tensor(type, &1.shape))
    op(st, "stablehlo.concatenate #{Enum.join(values, ", ")}, dim = #{axis} : (#{types}) -> #{type_of(out)}")
  end

  def emit(:stack, %T{type: type, data: %Expr{args: [tensors, axis]}} = out, st) do
    # Each tensor with a new axis of 1 at `axis`, concatenated along it.
    {values, st} =
      Enum.map_reduce(tensors, st, fn t, st ->
        {v, st} = operand(t, tpl(type, t.shape), st)
        reshape(v, type, t.shape, Tuple.insert_at(t.shape, axis, 1), st)
      end)

    types = Enum.map_join(tensors, ", ", &MLIR.tensor(type, Tuple.insert_at(&1.shape, axis, 1)))
    op(st, "stablehlo.concatenate #{Enum.join(values, ", ")}, dim = #{axis} : (#{types}) -> #{type_of(out)}")
  end

  def emit(:slice, %T{type: type, shape: shape, data: %Expr{args: [a, starts, lengths, strides]}} = out, st) do
    {x, st} = emit(a, st)

    if Enum.all?(starts, &is_integer/1) do
      dims = Tuple.to_list(a.shape)
      starts = Enum.zip_with([starts, lengths, dims], fn [s, l, d] -> s |> max(0) |> min(d - l) end)
      ranges = Enum.zip_with([starts, lengths, strides], fn [s, l, k] -> "#{s}:#{s + l}:#{k}" end)
      op(st, "stablehlo.slice #{x} [#{Enum.join(ranges, ", ")}] : (#{type_of(a)}) -> #{type_of(out)}")
    else
      {indices, st} = indices(starts, st)
      window = List.to_tuple(lengths)
      it = MLIR.tensor({:s, 64}, {})
      {d, st} =
        op(st, "stablehlo.dynamic_slice #{x}, #{Enum.join(indices, ", ")}, sizes = #{MLIR.list(lengths)} : " <>
          "(#{type_of(a)}, #{Enum.map_join(indices, ", ", fn _ -> it end)}) -> #{MLIR.tensor(type, window)}")

      if Enum.all?(strides, &(&1 == 1)) do
        {d, st}
      else
        ranges = Enum.zip_with(lengths, strides, fn l, k -> "0:#{l}:#{k}" end)
        op(st, "stablehlo.slice #{d} [#{Enum.join(ranges, ", ")}] : (#{MLIR.tensor(type, window)}) -> #{MLIR.tensor(type, shape)}")
      end
    end
  end

  def emit(:put_slice, %T{type: type, data: %Expr{args: [a, starts, slice]}} = out, st) do
    {x, st} = operand(a, out, st)
    {u, st} = operand(slice, tpl(type, slice.shape), st)
    {indices, st} = indices(starts, st)
    it = MLIR.tensor({:s, 64}, {})
    op(st, "stablehlo.dynamic_update_slice #{x}, #{u}, #{Enum.join(indices, ", ")} : " <>
      "(#{type_of(out)}, #{MLIR.tensor(type, slice.shape)}, #{Enum.map_join(indices, ", ", fn _ -> it end)}) -> #{type_of(out)}")
  end

  ## Linear algebra

  def emit(:dot, %T{type: type, data: %Expr{args: [a, ca, ba, b, cb, bb]}} = out, st) do
    {x, st} = operand(a, tpl(type, a.shape), st)
    {y, st} = operand(b, tpl(type, b.shape), st)
    batching = if ba == [], do: "", else: "batching_dims = #{MLIR.list(ba)} x #{MLIR.list(bb)}, "
    op(st, "stablehlo.dot_general #{x}, #{y}, #{batching}contracting_dims = #{MLIR.list(ca)} x #{MLIR.list(cb)} : " <>
      "(#{MLIR.tensor(type, a.shape)}, #{MLIR.tensor(type, b.shape)}) -> #{type_of(out)}")
  end

  ## Reductions

  @reductions %{sum: {"add", 0}, product: {"multiply", 1}, reduce_max: {"maximum", :lowest}, reduce_min: {"minimum", :highest}}

  def emit(op, %T{type: type, shape: shape, data: %Expr{args: [a, opts]}}, st) when is_map_key(@reductions, op) do
    {combiner, init} = @reductions[op]
    {x, st} = operand(a, tpl(type, a.shape), st)
    # Sums and products of 16-bit floats accumulate in f32 and round once at the end (in f16 the sum
    # of 10,000 x 0.1 was 996.5; correctly rounded it is 1000.0).
    acc = if op in [:sum, :product] and type in [{:f, 16}, {:bf, 16}], do: {:f, 32}, else: type
    {x, st} = convert(x, type, acc, a.shape, st)
    {v, st} = reduce_with(x, acc, a.shape, opts[:axes], shape, combiner, identity(init, acc), st)
    convert(v, acc, type, shape, st)
  end

  def emit(op, %T{type: type, shape: shape, data: %Expr{args: [a, opts]}}, st) when op in [:all, :any] do
    {x, st} = to_pred(a, st)
    {combiner, init} = if op == :all, do: {"and", true}, else: {"or", false}
    {v, st} = reduce_with(x, :pred, a.shape, opts[:axes], shape, combiner, init, st)
    convert(v, :pred, type, shape, st)
  end

  def emit(:reduce, %T{type: type, shape: shape, data: %Expr{args: [a, acc, opts, fun]}}, st) do
    {x, st} = operand(a, tpl(type, a.shape), st)
    {init, st} = operand(acc, tpl(type, {}), st)
    axes = reduce_axes(opts[:axes], a.shape)
    {region, st} = Emitter.fun_region(fun, st)
    {v, st} =
      op(st, ~s["stablehlo.reduce"(#{x}, #{init}) <{dimensions = #{MLIR.array(axes)}}> (#{region}) : ] <>
        "(#{MLIR.tensor(type, a.shape)}, #{MLIR.tensor(type, {})}) -> #{MLIR.tensor(type, reduced(a.shape, axes))}")
    reshape(v, type, reduced(a.shape, axes), shape, st)
  end

  @indexing [:gather, :take, :take_along_axis, :indexed_add, :indexed_put]
  @sorting [:sort, :argsort, :argmax, :argmin]
  @window [:window_sum, :window_product, :window_max, :window_min, :window_reduce, :window_scatter_max, :window_scatter_min]
  @misc [:conv, :fft, :ifft, :triangular_solve]

  def emit(op, t, st) when op in @indexing, do: Plugboard.Nx.Ops.Indexing.emit(op, t, st)
  def emit(op, t, st) when op in @sorting, do: Plugboard.Nx.Ops.Sorting.emit(op, t, st)
  def emit(op, t, st) when op in @window, do: Plugboard.Nx.Ops.Window.emit(op, t, st)
  def emit(op, t, st) when op in @misc, do: Plugboard.Nx.Ops.Misc.emit(op, t, st)

  def emit(op, %T{} = out, _st) do
    raise ArgumentError, "Plugboard.Nx cannot compile Nx.#{op}/#{length(out.data.args)} (#{inspect(out.type)} #{inspect(out.shape)})"
  end

  ## Helpers

  @doc "The complex conjugate of the value `x` (of complex `type`, `shape`)."
  def conjugate(x, {:c, _} = type, shape, st) do
    ct = MLIR.tensor(type, shape)
    rt = MLIR.tensor(real_of(type), shape)
    {re, st} = op(st, "stablehlo.real #{x} : (#{ct}) -> #{rt}")
    {im, st} = op(st, "stablehlo.imag #{x} : (#{ct}) -> #{rt}")
    {neg, st} = op(st, "stablehlo.negate #{im} : #{rt}")
    op(st, "stablehlo.complex #{re}, #{neg} : #{ct}")
  end

  def reshape(v, _type, same, same, st), do: {v, st}

  def reshape(v, type, from, to, st),
    do: op(st, "stablehlo.reshape #{v} : (#{MLIR.tensor(type, from)}) -> #{MLIR.tensor(type, to)}")

  # Start indices (integers or scalar tensors) as i64 scalar values.
  defp indices(starts, st) do
    Enum.map_reduce(starts, st, fn
      i, st when is_integer(i) -> splat(i, {:s, 64}, {}, st)
      %T{} = t, st -> operand(t, tpl({:s, 64}, {}), st)
    end)
  end

  defp reduce_axes(nil, shape), do: Enum.to_list(0..(tuple_size(shape) - 1)//1)
  defp reduce_axes(axes, _shape), do: axes

  defp reduced(shape, axes) do
    shape |> Tuple.to_list() |> Enum.with_index() |> Enum.reject(fn {_, i} -> i in axes end) |> Enum.map(&elem(&1, 0)) |> List.to_tuple()
  end

  @doc "A region of two scalars of `type` combined by one operation (`add`, `maximum`, ...)."
  def combiner_region(combiner, type, st) do
    s = MLIR.tensor(type, {})
    {a, st} = Emitter.fresh(st)
    {b, st} = Emitter.fresh(st)

    Emitter.region(st, [{a, s}, {b, s}], fn st ->
      {r, st} = op(st, "stablehlo.#{combiner} #{a}, #{b} : #{s}")
      {[r], [s], st}
    end)
  end

  # stablehlo.reduce with a one-operation region (`combiner` on two scalars), then the output's
  # shape (keep_axes keeps reduced axes as 1s).
  defp reduce_with(x, type, in_shape, axes, out_shape, combiner, init, st) do
    axes = reduce_axes(axes, in_shape)
    {i, st} = splat(init, type, {}, st)
    s = MLIR.tensor(type, {})
    {region, st} = combiner_region(combiner, type, st)

    {v, st} =
      op(st, ~s["stablehlo.reduce"(#{x}, #{i}) <{dimensions = #{MLIR.array(axes)}}> (#{region}) : ] <>
        "(#{MLIR.tensor(type, in_shape)}, #{s}) -> #{MLIR.tensor(type, reduced(in_shape, axes))}")

    reshape(v, type, reduced(in_shape, axes), out_shape, st)
  end

  @doc "A reduction's initial value: a number, or :lowest (max's identity) and :highest (min's) of `type`."
  # f8 E4M3FN has no infinities: its largest finite magnitude is 448.
  def identity(:lowest, {:f8_e4m3fn, _}), do: -448.0
  def identity(:highest, {:f8_e4m3fn, _}), do: 448.0
  def identity(:lowest, {k, _}) when k in [:f, :bf], do: :neg_infinity
  def identity(:highest, {k, _}) when k in [:f, :bf], do: :infinity
  def identity(:lowest, {:s, n}), do: -Bitwise.bsl(1, n - 1)
  def identity(:highest, {:s, n}), do: Bitwise.bsl(1, n - 1) - 1
  def identity(:lowest, {:u, _}), do: 0
  def identity(:highest, {:u, n}), do: Bitwise.bsl(1, n) - 1
  def identity(value, _type), do: value
end
