defmodule Plugboard.Nx.Ops.Misc do
  @moduledoc false
  # map (stablehlo.map), conv (stablehlo.convolution), fft/ifft (stablehlo.fft) and
  # triangular_solve (stablehlo.triangular_solve).
  alias Nx.Defn.Expr
  alias Nx.Tensor, as: T
  alias Plugboard.Nx.{Emitter, MLIR, Ops}
  import Emitter, only: [op: 2, type_of: 1]

  def emit(:map, %T{type: type, shape: shape, data: %Expr{args: [t, _opts, fun]}} = out, st) do
    {x, st} = Ops.operand(t, Ops.tpl(type, t.shape), st)
    {region, st} = Emitter.fun_region(fun, st)
    dims = Enum.to_list(0..(tuple_size(shape) - 1)//1)
    op(st, ~s|"stablehlo.map"(#{x}) <{dimensions = #{MLIR.array(dims)}}> (#{region}) : (#{MLIR.tensor(type, t.shape)}) -> #{type_of(out)}|)
  end

  def emit(:conv, %T{type: type, data: %Expr{args: [input, kernel, opts]}} = out, st) do
    {x, st} = Ops.operand(input, Ops.tpl(type, input.shape), st)
    {k, st} = Ops.operand(kernel, Ops.tpl(type, kernel.shape), st)
    rank = tuple_size(input.shape)
    spatial = rank - 2
    ip = opts[:input_permutation] || Enum.to_list(0..(rank - 1))
    kp = opts[:kernel_permutation] || Enum.to_list(0..(rank - 1))
    op_ = opts[:output_permutation] || Enum.to_list(0..(rank - 1))
    # Logical dim l of the output is the output tensor's dim output_permutation[l].
    [ib, if_ | is] = ip
    [ko, ki | ks] = kp
    [ob, of | os] = op_

    numbers =
      "#stablehlo.conv<raw input_batch_dimension = #{ib}, input_feature_dimension = #{if_}, input_spatial_dimensions = #{MLIR.list(is)}, " <>
        "kernel_input_feature_dimension = #{ki}, kernel_output_feature_dimension = #{ko}, kernel_spatial_dimensions = #{MLIR.list(ks)}, " <>
        "output_batch_dimension = #{ob}, output_feature_dimension = #{of}, output_spatial_dimensions = #{MLIR.list(os)}>"

    padding = Enum.map_join(opts[:padding], ", ", fn {lo, hi} -> "[#{lo}, #{hi}]" end)

    op(st, ~s|"stablehlo.convolution"(#{x}, #{k}) <{batch_group_count = #{opts[:batch_group_size]} : i64, dimension_numbers = #{numbers}, | <>
      ~s|feature_group_count = #{opts[:feature_group_size]} : i64, lhs_dilation = #{MLIR.array(opts[:input_dilation])}, | <>
      ~s|padding = dense<[#{padding}]> : tensor<#{spatial}x2xi64>, rhs_dilation = #{MLIR.array(opts[:kernel_dilation])}, | <>
      ~s|window_strides = #{MLIR.array(opts[:strides])}}> : (#{MLIR.tensor(type, input.shape)}, #{MLIR.tensor(type, kernel.shape)}) -> #{type_of(out)}|)
  end

  def emit(op, %T{type: type, shape: shape, data: %Expr{args: [t, opts]}} = out, st) when op in [:fft, :ifft] do
    # The last axis padded with zeros or cut to the length, as Nx does, then the transform.
    {x, st} = Ops.operand(t, Ops.tpl(type, t.shape), st)
    n = opts[:length]
    last = tuple_size(shape) - 1
    have = elem(t.shape, last)

    {x, st} =
      cond do
        have == n ->
          {x, st}

        have < n ->
          {zero, st} = Ops.splat(0, type, {}, st)
          lo = List.duplicate(0, last + 1)
          hi = List.replace_at(lo, last, n - have)
          op(st, "stablehlo.pad #{x}, #{zero}, low = #{MLIR.list(lo)}, high = #{MLIR.list(hi)}, interior = #{MLIR.list(lo)} : " <>
            "(#{MLIR.tensor(type, t.shape)}, #{MLIR.tensor(type, {})}) -> #{type_of(out)}")

        true ->
          ranges = for {d, i} <- Enum.with_index(Tuple.to_list(t.shape)), do: if(i == last, do: "0:#{n}:1", else: "0:#{d}:1")
          op(st, "stablehlo.slice #{x} [#{Enum.join(ranges, ", ")}] : (#{MLIR.tensor(type, t.shape)}) -> #{type_of(out)}")
      end

    kind = if op == :fft, do: "FFT", else: "IFFT"
    op(st, ~s|"stablehlo.fft"(#{x}) <{fft_length = array<i64: #{n}>, fft_type = #stablehlo<fft_type #{kind}>}> : (#{type_of(out)}) -> #{type_of(out)}|)
  end

  def emit(:triangular_solve, %T{type: type, shape: shape, data: %Expr{args: [a, b, opts]}}, st) do
    {x, st} = Ops.operand(a, Ops.tpl(type, a.shape), st)
    {y, st} = Ops.operand(b, Ops.tpl(type, b.shape), st)
    left = Keyword.get(opts, :left_side, true)
    # A vector right-hand side becomes a one-column (or one-row) matrix for XLA, and back.
    matrix = if tuple_size(b.shape) == 1, do: if(left, do: {elem(b.shape, 0), 1}, else: {1, elem(b.shape, 0)}), else: b.shape
    {y, st} = Ops.reshape(y, type, b.shape, matrix, st)
    transpose = if opts[:transform_a] == :transpose, do: "TRANSPOSE", else: "NO_TRANSPOSE"

    {v, st} =
      op(st, ~s|"stablehlo.triangular_solve"(#{x}, #{y}) <{left_side = #{left}, lower = #{Keyword.get(opts, :lower, true)}, | <>
        ~s|transpose_a = #stablehlo<transpose #{transpose}>, unit_diagonal = false}> : (#{MLIR.tensor(type, a.shape)}, #{MLIR.tensor(type, matrix)}) -> #{MLIR.tensor(type, matrix)}|)

    Ops.reshape(v, type, matrix, shape, st)
  end
end
