defmodule Plugboard.Nx.Blocks do
  @moduledoc false
  # Nx.block/4 nodes (Nx 0.12+): the blocks StableHLO has an operation for are lowered to it here;
  # every other block runs Nx's default expression (the emitter's :block clause).
  #
  #   native: LogicalNot, Phase (complex), Take, TakeAlongAxis (stablehlo.gather), CumulativeSum,
  #           CumulativeProduct, CumulativeMin, CumulativeMax (stablehlo.reduce_window over a
  #           window as long as the axis, as EXLA does), FFT2, IFFT2, RFFT, IRFFT (stablehlo.fft),
  #           LinAlg.LU (partial pivoting as LAPACK's getrf: Plugboard.Nx.LinAlg).
  #   default: TopK (a stable argsort and a slice: what a native top_k lowers to on CPU, with Nx's
  #           order of ties and NaN), AllClose (elementwise compares and an all), LinAlg.Cholesky,
  #           Solve, QR, Eigh, SVD, Determinant (through the LU block).
  alias Nx.Defn.Expr
  alias Nx.Tensor, as: T
  alias Plugboard.Nx.{Emitter, Ops}
  alias Plugboard.Nx.Ops.{Indexing, Misc, Window}

  @lin_alg [Nx.Block.LinAlg.LU, Nx.Block.LinAlg.Eigh, Nx.Block.LinAlg.SVD, Nx.Block.LinAlg.QR, Nx.Block.LinAlg.Cholesky]

  @doc "`{:native, value, st}`, or `:default` when Nx's default expression is the lowering."
  def lower(struct, out, args, opts, st)

  def lower(%Nx.Block.LogicalNot{}, out, [a], _opts, st), do: native(Ops.emit(:logical_not, node(out, :logical_not, [a]), st))

  def lower(%Nx.Block.Phase{}, out, [%T{type: {:c, _}} = a], _opts, st) do
    {z, st} = Emitter.emit(a, st)
    ct = Emitter.type_of(a)
    rt = Emitter.type_of(out)
    {re, st} = Emitter.op(st, "stablehlo.real #{z} : (#{ct}) -> #{rt}")
    {im, st} = Emitter.op(st, "stablehlo.imag #{z} : (#{ct}) -> #{rt}")
    native(Emitter.op(st, "stablehlo.atan2 #{im}, #{re} : #{rt}"))
  end

  def lower(%Nx.Block.Take{axis: axis}, out, [t, indices], _opts, st),
    do: native(Indexing.emit(:take, node(out, :take, [t, indices, axis]), st))

  def lower(%Nx.Block.TakeAlongAxis{axis: axis}, out, [t, indices], _opts, st),
    do: native(Indexing.emit(:take_along_axis, node(out, :take_along_axis, [t, indices, axis]), st))

  @cumulative %{
    Nx.Block.CumulativeSum => :window_sum,
    Nx.Block.CumulativeProduct => :window_product,
    Nx.Block.CumulativeMin => :window_min,
    Nx.Block.CumulativeMax => :window_max
  }

  def lower(%kind{axis: axis, reverse: reverse}, %T{shape: shape} = out, [t], _opts, st) when is_map_key(@cumulative, kind) do
    # Element i of the result reduces elements 0..i (i..n-1 reversed): a window of n elements
    # ending (starting) at i, the n - 1 positions before (after) the axis padded with the identity.
    n = elem(shape, axis)
    rank = tuple_size(shape)
    window = 1 |> List.duplicate(rank) |> List.replace_at(axis, n) |> List.to_tuple()
    edge = if reverse, do: {0, n - 1}, else: {n - 1, 0}
    padding = {0, 0} |> List.duplicate(rank) |> List.replace_at(axis, edge)
    op = @cumulative[kind]
    native(Window.emit(op, node(out, op, [t, window, [padding: padding, strides: List.duplicate(1, rank)]]), st))
  end

  def lower(%kind{lengths: lengths, axes: axes}, %T{type: type} = out, [t], _opts, st) when kind in [Nx.Block.FFT2, Nx.Block.IFFT2] do
    {x, st} = Ops.operand(t, Ops.tpl(type, t.shape), st)
    native(Misc.fft(x, type, t.shape, axes, lengths, if(kind == Nx.Block.FFT2, do: "FFT", else: "IFFT"), out, st))
  end

  def lower(%Nx.Block.RFFT{length: length, axis: axis}, %T{type: {:c, bits}} = out, [t], _opts, st) do
    real = {:f, div(bits, 2)}
    {x, st} = Ops.operand(t, Ops.tpl(real, t.shape), st)
    native(Misc.fft(x, real, t.shape, [axis], [length], "RFFT", out, st))
  end

  def lower(%Nx.Block.IRFFT{length: length, axis: axis}, %T{type: {:f, bits}} = out, [t], _opts, st) when bits in [32, 64] do
    complex = {:c, bits * 2}
    {x, st} = Ops.operand(t, Ops.tpl(complex, t.shape), st)
    native(Misc.fft(x, complex, t.shape, [axis], [length], "IRFFT", out, st))
  end

  def lower(%kind{} = struct, out, args, _opts, st) when kind in @lin_alg, do: Plugboard.Nx.LinAlg.lower(struct, out, args, st)

  def lower(_struct, _out, _args, _opts, _st), do: :default

  defp native({value, st}), do: {:native, value, st}

  # The block's output as an expression node of `op` over `args`, for the emitters of that op.
  defp node(%T{data: %Expr{} = data} = out, op, args), do: %{out | data: %{data | op: op, args: args}}
end
