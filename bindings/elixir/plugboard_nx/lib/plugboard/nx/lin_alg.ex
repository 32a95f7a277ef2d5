defmodule Plugboard.Nx.LinAlg do
  @moduledoc false
  # Nx.LinAlg's blocks lowered to decompositions that converge to working precision, as LAPACK's do
  # (Nx's defaults stop early: eigh at eps: 1.0e-4, so svd, pinv and least_squares were ~1e-3 off).
  #
  # In the program (defn of our own, on every target; the only route off the CPU):
  #
  #   Eigh      two-sided Jacobi, parallel order                    (LinAlg.Eigh)
  #   SVD       one-sided Jacobi (Hestenes) after a Householder QR  (LinAlg.SVD)
  #   QR        Householder, as geqrf + orgqr                       (LinAlg.QR)
  #   Cholesky  outer-product (right-looking), as potf2             (LinAlg.Cholesky)
  #   LU        partial pivoting, as getrf                          (LinAlg.LU)
  #
  # On a CPU client whose plugin took plugboard's LAPACK kernels (Plugboard.declare_lapack/1, see
  # lapack?/1), Eigh and SVD call them instead (stablehlo.custom_call to syevd and gesdd): the same
  # accuracy, 5 to 15 times faster at n = 64 to 256 (the table in docs/nx.md, "Linear algebra"). The defn around the call
  # gives both routes the same answers' form (the symmetrized operand, Nx's order, the SVD's cut).
  #
  # Solve and Determinant keep Nx's default expressions, which go through the LU block and
  # stablehlo.triangular_solve; invert, pinv and least_squares are built by Nx on these. Real
  # floating types only: complex inputs take Nx's defaults. f16 and bf16 are computed in f32 and
  # rounded once at the end. The blocks' own tolerances (eigh's eps and max_iter, qr's eps) are
  # not used: these run to working precision, as EXLA's lowerings do.
  alias Nx.Defn.Expr
  alias Nx.Tensor, as: T
  alias Plugboard.Nx.{Emitter, MLIR, Ops}
  alias Plugboard.Nx.LinAlg.{Cholesky, Eigh, LU, QR, SVD}

  @doc """
  Whether `client`'s programs call plugboard's LAPACK kernels for eigh and svd: a CPU client whose
  plugin took them (`Plugboard.declare_lapack/1`: a plugin of another platform, or a machine
  without LAPACK, keeps the in-program route), unless `compute_in_program/1` was called for it.
  """
  def lapack?(client) do
    not :persistent_term.get({__MODULE__, :in_program, Plugboard.client_id(client)}, false) and
      Plugboard.declare_lapack(client) == :ok
  end

  @doc """
  Makes `client`'s programs compute eigh and svd in the program even on a CPU client (the route
  every other target takes): for comparisons and tests. Before its first compile (compiled programs
  are kept per client).
  """
  def compute_in_program(client), do: :persistent_term.put({__MODULE__, :in_program, Plugboard.client_id(client)}, true)

  @doc "`{:native, value, st}` for a block lowered here, or `:default`."
  def lower(struct, out, args, st)

  def lower(%Nx.Block.LinAlg.LU{}, out, [a], st) do
    {p, l, _u} = outputs(out)
    {x, st} = Ops.operand(a, Ops.tpl(l.type, a.shape), st)
    native(defn_value(LU, :lu, [x], [Ops.tpl(l.type, a.shape)], [p_type: p.type], st))
  end

  def lower(%Nx.Block.LinAlg.Eigh{}, out, [a], st) do
    {w, _v} = outputs(out)

    with {:ok, type} <- compute_type(a.type) do
      matrix = Ops.tpl(type, a.shape)
      {x, st} = Ops.operand(a, matrix, st)

      if st.lapack do
        {x, st} = defn_value(Eigh, :symmetrize, [x], [matrix], nil, st)
        {[w_raw, v_raw], st} = custom_call("plugboard_lapack_#{prefix(type)}syevd", [x], [matrix], [Ops.tpl(type, w.shape), matrix], st)
        native(defn_value(Eigh, :from_lapack, [w_raw, v_raw], [Ops.tpl(type, w.shape), matrix], [type: w.type], st))
      else
        native(defn_value(Eigh, :eigh, [x], [matrix], [type: w.type], st))
      end
    end
  end

  def lower(%Nx.Block.LinAlg.SVD{full_matrices?: full}, out, [a], st) do
    {u, s, vt} = outputs(out)

    with {:ok, type} <- compute_type(a.type) do
      matrix = Ops.tpl(type, a.shape)
      {x, st} = Ops.operand(a, matrix, st)

      if st.lapack do
        results = Enum.map([u, s, vt], &Ops.tpl(type, &1.shape))
        {raw, st} = custom_call("plugboard_lapack_#{prefix(type)}gesdd", [x], [matrix], results, st)
        native(defn_value(SVD, :from_lapack, raw, results, [type: s.type], st))
      else
        native(defn_value(SVD, :svd, [x], [matrix], [type: s.type, full_matrices: full], st))
      end
    end
  end

  def lower(%Nx.Block.LinAlg.QR{mode: mode}, out, [a], st) do
    {q, _r} = outputs(out)

    with {:ok, type} <- compute_type(a.type) do
      {x, st} = Ops.operand(a, Ops.tpl(type, a.shape), st)
      native(defn_value(QR, :qr, [x], [Ops.tpl(type, a.shape)], [type: q.type, mode: mode], st))
    end
  end

  def lower(%Nx.Block.LinAlg.Cholesky{}, out, [a], st) do
    with {:ok, type} <- compute_type(a.type) do
      {x, st} = Ops.operand(a, Ops.tpl(type, a.shape), st)
      native(defn_value(Cholesky, :cholesky, [x], [Ops.tpl(type, a.shape)], [type: out.type], st))
    end
  end

  def lower(_struct, _out, _args, _st), do: :default

  # The type a decomposition of `type` is computed in: f64 for f64, f32 for the other real types.
  defp compute_type({:f, 64}), do: {:ok, {:f, 64}}
  defp compute_type({:c, _}), do: :default
  defp compute_type(_), do: {:ok, {:f, 32}}

  defp prefix({:f, 64}), do: "d"
  defp prefix({:f, 32}), do: "s"

  # The block's output template (the default expression's results: their types and shapes).
  defp outputs(%T{data: %Expr{args: [_struct, _args, default, _fun]}}), do: default

  defp native({value, st}), do: {:native, value, st}

  # The defn `module.fun(values..., opts)` (no opts when `opts` is nil) emitted over `values` (of
  # `templates`' types and shapes): its expression over parameters (debug_expr_apply builds it as
  # defn does, its inner defn calls inlined rather than jitted), with those parameters bound to
  # the values.
  defp defn_value(module, fun, values, templates, opts, st) do
    extra = if opts == nil, do: [], else: [opts]
    expr = Nx.Defn.debug_expr_apply(fn args -> apply(module, fun, Tuple.to_list(args) ++ extra) end, [List.to_tuple(templates)])
    Emitter.emit_bound(expr, values, st)
  end

  # One of plugboard's LAPACK kernels (Plugboard.declare_lapack/1): its results' values.
  defp custom_call(target, values, operands, results, st) do
    {v, st} = Emitter.fresh(st)
    types = fn templates -> Enum.map_join(templates, ", ", &MLIR.tensor(&1.type, &1.shape)) end
    n = length(results)

    st =
      Emitter.line(st, "#{v}:#{n} = stablehlo.custom_call @#{target}(#{Enum.join(values, ", ")}) {api_version = 4 : i32} " <>
        ": (#{types.(operands)}) -> (#{types.(results)})")

    {for(i <- 0..(n - 1)//1, do: "#{v}##{i}"), st}
  end
end
