defmodule Plugboard.Nx.LinAlg do
  @moduledoc false
  # Nx.LinAlg's blocks lowered to decompositions of our own that converge to working precision, as
  # LAPACK's do (Nx's defaults stop early: eigh at eps: 1.0e-4, so svd, pinv and least_squares were
  # ~1e-3 off), written as defn so that they run on every target:
  #
  #   Eigh      two-sided Jacobi, parallel order                    (LinAlg.Eigh)
  #   SVD       one-sided Jacobi (Hestenes) after a Householder QR  (LinAlg.SVD)
  #   QR        Householder, as geqrf + orgqr                       (LinAlg.QR)
  #   Cholesky  outer-product (right-looking), as potf2             (LinAlg.Cholesky)
  #   LU        partial pivoting, as getrf                          (LinAlg.LU)
  #
  # Solve and Determinant keep Nx's default expressions, which go through the LU block and
  # stablehlo.triangular_solve; invert, pinv and least_squares are built by Nx on these. Real
  # floating types only: complex inputs take Nx's defaults. f16 and bf16 are computed in f32 and
  # rounded once at the end. The blocks' own tolerances (eigh's eps and max_iter, qr's eps) are
  # not used: these run to working precision, as EXLA's lowerings do.
  alias Nx.Defn.Expr
  alias Nx.Tensor, as: T
  alias Plugboard.Nx.{Emitter, Ops}
  alias Plugboard.Nx.LinAlg.{Cholesky, Eigh, LU, QR, SVD}

  @doc "`{:native, value, st}` for a block lowered here, or `:default`."
  def lower(struct, out, args, st)

  def lower(%Nx.Block.LinAlg.LU{}, out, [a], st) do
    {p, l, _u} = outputs(out)
    run(LU, :lu, a, l.type, [p_type: p.type], st)
  end

  def lower(%Nx.Block.LinAlg.Eigh{}, out, [a], st) do
    {w, _v} = outputs(out)
    with {:ok, type} <- compute_type(a.type), do: run(Eigh, :eigh, a, type, [type: w.type], st)
  end

  def lower(%Nx.Block.LinAlg.SVD{full_matrices?: full}, out, [a], st) do
    {_u, s, _vt} = outputs(out)
    with {:ok, type} <- compute_type(a.type), do: run(SVD, :svd, a, type, [type: s.type, full_matrices: full], st)
  end

  def lower(%Nx.Block.LinAlg.QR{mode: mode}, out, [a], st) do
    {q, _r} = outputs(out)
    with {:ok, type} <- compute_type(a.type), do: run(QR, :qr, a, type, [type: q.type, mode: mode], st)
  end

  def lower(%Nx.Block.LinAlg.Cholesky{}, out, [a], st) do
    with {:ok, type} <- compute_type(a.type), do: run(Cholesky, :cholesky, a, type, [type: out.type], st)
  end

  def lower(_struct, _out, _args, _st), do: :default

  # The type a decomposition of `type` is computed in: f64 for f64, f32 for the other real types.
  defp compute_type({:f, 64}), do: {:ok, {:f, 64}}
  defp compute_type({:c, _}), do: :default
  defp compute_type(_), do: {:ok, {:f, 32}}

  # The block's output template (the default expression's results: their types and shapes).
  defp outputs(%T{data: %Expr{args: [_struct, _args, default, _fun]}}), do: default

  # The expression of the defn `module.fun` over a parameter of the operand's shape and `type`
  # (debug_expr_apply builds it as defn does, its inner defn calls inlined rather than jitted),
  # emitted with the operand bound to that parameter.
  defp run(module, fun, a, type, opts, st) do
    template = Ops.tpl(type, a.shape)
    expr = Nx.Defn.debug_expr_apply(&apply(module, fun, [&1, opts]), [template])
    {x, st} = Ops.operand(a, template, st)
    {value, st} = Emitter.emit_bound(expr, [x], st)
    {:native, value, st}
  end
end
