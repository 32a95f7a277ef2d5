defmodule Plugboard.Nx.Ops.Misc do
  @moduledoc false
  # conv (stablehlo.convolution), fft/ifft (stablehlo.fft) and
  # triangular_solve (stablehlo.triangular_solve).
  alias Nx.Defn.Expr
  alias Nx.Tensor, as: T
  alias Plugboard.Nx.{Emitter, MLIR, Ops}
  import Emitter, only: [op: 2, type_of: 1]

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

  def emit(op, %T{type: type, data: %Expr{args: [t, opts]}} = out, st) when op in [:fft, :ifft] do
    {x, st} = Ops.operand(t, Ops.tpl(type, t.shape), st)
    kind = if op == :fft, do: "FFT", else: "IFFT"
    fft(x, type, t.shape, [opts[:axis]], [opts[:length]], kind, out, st)
  end

  def emit(:triangular_solve, %T{type: type, shape: shape, data: %Expr{args: [a, b, opts]}}, st) do
    {x, st} = Ops.operand(a, Ops.tpl(type, a.shape), st)
    {y, st} = Ops.operand(b, Ops.tpl(type, b.shape), st)
    left = Keyword.get(opts, :left_side, true)
    # A (batch of) vector right-hand side(s) becomes one-column (or one-row) matrices for XLA, and back.
    matrix =
      if tuple_size(b.shape) == tuple_size(a.shape) - 1,
        do: if(left, do: Tuple.insert_at(b.shape, tuple_size(b.shape), 1), else: Tuple.insert_at(b.shape, tuple_size(b.shape) - 1, 1)),
        else: b.shape
    {y, st} = Ops.reshape(y, type, b.shape, matrix, st)
    transpose = if opts[:transform_a] == :transpose, do: "TRANSPOSE", else: "NO_TRANSPOSE"
    # Nx's :conjugate is op(a) = conj(a), not transposed (stablehlo's ADJOINT is conj(a)ᵀ): a
    # conjugated, then solved as it stands. On real types it is :none.
    {x, st} = if opts[:transform_a] == :conjugate and match?({:c, _}, type), do: Ops.conjugate(x, type, a.shape, st), else: {x, st}

    {v, st} =
      op(st, ~s|"stablehlo.triangular_solve"(#{x}, #{y}) <{left_side = #{left}, lower = #{Keyword.get(opts, :lower, true)}, | <>
        ~s|transpose_a = #stablehlo<transpose #{transpose}>, unit_diagonal = false}> : (#{MLIR.tensor(type, a.shape)}, #{MLIR.tensor(type, matrix)}) -> #{MLIR.tensor(type, matrix)}|)

    Ops.reshape(v, type, matrix, shape, st)
  end

  @doc """
  A discrete Fourier transform of `x` (of `type`, `shape`) over `axes` (moved last, as
  stablehlo.fft wants them): `kind` one of "FFT", "IFFT", "RFFT", "IRFFT", `lengths` the transform's
  lengths. Each axis is padded with zeros or cut to what the transform reads (its length, or
  length / 2 + 1 for IRFFT's complex input) as Nx does, and moved back. The result is `out`.
  """
  def fft(x, type, shape, axes, lengths, kind, %T{} = out, st) do
    rank = tuple_size(shape)
    identity = Enum.to_list(0..(rank - 1)//1)
    perm = Enum.reject(identity, &(&1 in axes)) ++ axes
    moved = permute(shape, perm)
    {x, st} = if perm == identity, do: {x, st}, else: transpose(x, type, shape, perm, st)
    k = length(axes)
    read = if kind == "IRFFT", do: Enum.map(lengths, &(div(&1, 2) + 1)), else: lengths
    input = put_last(moved, k, read)
    {x, st} = resize(x, type, moved, input, st)
    result = put_last(moved, k, Enum.map(axes, &elem(out.shape, &1)))
    rt = MLIR.tensor(out.type, result)
    {v, st} =
      op(st, ~s|"stablehlo.fft"(#{x}) <{fft_length = #{MLIR.array(lengths)}, fft_type = #stablehlo<fft_type #{kind}>}> : | <>
        "(#{MLIR.tensor(type, input)}) -> #{rt}")
    inverse = perm |> Enum.with_index() |> Enum.sort() |> Enum.map(&elem(&1, 1))
    if inverse == identity, do: {v, st}, else: transpose(v, out.type, result, inverse, st, out)
  end

  defp put_last(shape, k, values) do
    rank = tuple_size(shape)
    Enum.reduce(Enum.with_index(values), shape, fn {l, i}, s -> put_elem(s, rank - k + i, l) end)
  end

  defp permute(shape, perm), do: perm |> Enum.map(&elem(shape, &1)) |> List.to_tuple()

  defp transpose(x, type, shape, perm, st, out \\ nil) do
    result = if out, do: type_of(out), else: MLIR.tensor(type, permute(shape, perm))
    op(st, "stablehlo.transpose #{x}, dims = #{MLIR.list(perm)} : (#{MLIR.tensor(type, shape)}) -> #{result}")
  end

  # Pads (zeros at the end) or slices each dimension of `from` to `to`.
  defp resize(x, _type, same, same, st), do: {x, st}

  defp resize(x, type, from, to, st) do
    dims = Enum.zip(Tuple.to_list(from), Tuple.to_list(to))
    cut = List.to_tuple(for {f, t} <- dims, do: min(f, t))

    {x, st} =
      if cut == from do
        {x, st}
      else
        ranges = Enum.map_join(Tuple.to_list(cut), ", ", &"0:#{&1}:1")
        op(st, "stablehlo.slice #{x} [#{ranges}] : (#{MLIR.tensor(type, from)}) -> #{MLIR.tensor(type, cut)}")
      end

    if cut == to do
      {x, st}
    else
      {zero, st} = Ops.splat(0, type, {}, st)
      zeros = List.duplicate(0, tuple_size(to))
      high = for {c, t} <- Enum.zip(Tuple.to_list(cut), Tuple.to_list(to)), do: t - c
      op(st, "stablehlo.pad #{x}, #{zero}, low = #{MLIR.list(zeros)}, high = #{MLIR.list(high)}, interior = #{MLIR.list(zeros)} : " <>
        "(#{MLIR.tensor(type, cut)}, #{MLIR.tensor(type, {})}) -> #{MLIR.tensor(type, to)}")
    end
  end

end
