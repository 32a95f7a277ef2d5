defmodule Plugboard.Nx.Emitter do
  @moduledoc """
  `Nx.Defn.Expr` to StableHLO (and CHLO) text, in pure Elixir: the types are tracked here, the text
  is what the plugins' `"mlir"` format compiles. `to_mlir/2` returns the module, printed for people
  to read (one operation per line, every value's type written out).

  The walk (this module) handles parameters, constants, shared subexpressions (each expression id
  is emitted once per scope), tuples and control flow (`cond`, `while`, region
  functions), blocks (`Plugboard.Nx.Blocks`: native or Nx's default), side effects (`:io_call`, Nx
  0.13's `:hook`) and runtime calls (host calls in program order); `Plugboard.Nx.Ops` lowers each Nx operation family.
  """
  alias Nx.Defn.{Composite, Expr, Tree}
  alias Nx.Tensor, as: T
  alias Plugboard.Nx.{MLIR, Ops}

  defstruct lines: [], next: 0, memo: %{}, params: %{}, depth: 1, used: MapSet.new(),
            token: nil, hooks: [], overridden: MapSet.new(), scope: %{}, any_hooks: false, constants: [],
            lapack: false

  @type value :: String.t() | [String.t()]

  @doc """
  The StableHLO module of a function whose parameters have the types and shapes of `params`
  (tensors, in order) and whose result is `output` (an expression container). Returns
  `{text, outputs, used, hooks, constants}` where `outputs` are the flattened output expressions, in result
  order, `used` the indices of the parameters the program reads (the only ones it takes: an
  argument the function does not use is never computed or transferred), and `hooks` the program's
  host calls, in program order (a token threaded through them): `{:hook, target, name,
  default_callback, template}`, an ordered call (custom-call `target`) that passes the hook's
  tensors to its callback, and `{:runtime_call, target, fun, opts, in_template, out_template}`, a
  blocking call whose answer, `fun.(tensors, opts)`, the program goes on with. A fifth element
  lists the constants over `Plugboard.Nx.Ops`'s inline limit that became parameters after the
  arguments (tensors, in order): the caller passes them at every run. `overridden_hooks` names the hooks
  the caller binds (`hooks:` of jit), which run even when the expression gives no callback.

  `annotations` (for programs split over several devices, `Plugboard.Nx.Shard`): `:module`, the
  module's attribute dictionary (`{mhlo.num_partitions = 2 : i32}`); `:preamble`, text before the
  function (`sdy.mesh` definitions); `:args`, a map from parameter index to that argument's
  attribute dictionary; `:constants`, a function of a constant parameter's tensor giving its
  attribute dictionary. `:lapack` (true for a CPU client with LAPACK declared): `Nx.LinAlg`'s eigh
  and svd call plugboard's LAPACK kernels instead of computing in the program (`Plugboard.Nx.LinAlg`).
  """
  def to_mlir(params, output, overridden_hooks \\ [], annotations \\ %{}) do
    outputs = Composite.flatten_list([output])
    param_names = for {_, i} <- Enum.with_index(params), do: "%arg#{i}"

    st = %__MODULE__{
      params: Map.new(Enum.with_index(param_names), fn {n, i} -> {i, n} end),
      overridden: MapSet.new(overridden_hooks),
      scope: scope_ids(outputs),
      # Walked once: a program without hooks (most) never walks a cond's branches for them again.
      any_hooks: has_hooks?(outputs),
      lapack: Map.get(annotations, :lapack, false)
    }

    {values, st} = Enum.map_reduce(outputs, st, &emit/2)
    result_types = Enum.map(outputs, &type_of/1)
    used = for {_, i} <- Enum.with_index(params), MapSet.member?(st.used, i), do: i

    constants = Enum.reverse(st.constants)

    arg_attributes = Map.get(annotations, :args, %{})
    attributed = fn text, nil -> text; text, dictionary -> "#{text} #{dictionary}" end

    signature =
      Enum.zip_with(param_names, params, fn n, p -> "#{n}: #{MLIR.tensor(p.type, p.shape)}" end)
      |> Enum.with_index()
      |> Enum.filter(fn {_, i} -> i in used end)
      |> Enum.map(fn {text, i} -> attributed.(text, arg_attributes[i]) end)
      |> Kernel.++(for {n, t} <- constants, do: attributed.("#{n}: #{MLIR.tensor(t.type, t.shape)}", if(f = annotations[:constants], do: f.(t))))
      |> Enum.join(", ")

    ret =
      case values do
        [] -> "    return"
        _ -> "    return #{Enum.join(values, ", ")} : #{Enum.join(result_types, ", ")}"
      end

    text =
      IO.iodata_to_binary([
        "module @plugboard_nx #{if a = annotations[:module], do: "attributes #{a} "}{\n",
        Map.get(annotations, :preamble, []),
        "  func.func public @main(#{signature}) -> (#{Enum.join(result_types, ", ")}) {\n",
        st.lines |> Enum.reverse(),
        ret,
        "\n  }\n}\n"
      ])

    {text, outputs, used, Enum.reverse(st.hooks), Enum.map(constants, &elem(&1, 1))}
  end

  @doc false
  # A constant too large for the program's text: a parameter after the arguments, its tensor
  # passed at every run (Plugboard.Nx keeps it on the device with the executable).
  def constant_parameter(tensor, st) do
    name = "%const#{length(st.constants)}"
    {name, %{st | constants: [{name, tensor} | st.constants]}}
  end

  @doc false
  # Vectorized axes (cond and while results keep them) are leading dimensions of the value.
  def type_of(%T{vectorized_axes: [_ | _]} = t), do: type_of(Nx.devectorize(t, keep_names: false))
  def type_of(%T{type: type, shape: shape}), do: MLIR.tensor(type, shape)

  ## The walk

  @doc false
  def emit(%T{data: %Expr{id: id, op: op}} = t, st) do
    case st.memo do
      %{^id => value} ->
        {value, st}

      %{} ->
        {value, st} = emit_op(op, t, st)
        {value, %{st | memo: Map.put(st.memo, id, value)}}
    end
  end

  def emit(%T{data: other}, _st) do
    raise ArgumentError, "Plugboard.Nx cannot compile a tensor of #{inspect(other.__struct__)} inside defn"
  end

  defp emit_op(:parameter, %T{data: %Expr{args: [i]}}, st) do
    case st.params do
      %{^i => "%arg" <> _ = value} -> {value, %{st | used: MapSet.put(st.used, i)}}
      %{^i => value} -> {value, st}
      %{} -> raise "Plugboard.Nx: parameter #{i} is not bound in this scope"
    end
  end

  defp emit_op(:metadata, %T{data: %Expr{args: [expr, _meta]}}, st), do: emit_composite(expr, st)

  defp emit_op(:elem, %T{data: %Expr{args: [tuple, i]}}, st) do
    {values, st} = emit(tuple, st)
    {Enum.at(values, i), st}
  end

  defp emit_op(:block, %T{data: %Expr{args: [struct, in_args, default, _fun]}} = t, st) do
    {args, opts} = Enum.split_while(in_args, &(not is_list(&1)))

    case Plugboard.Nx.Blocks.lower(struct, t, args, opts, st) do
      {:native, value, st} ->
        {value, st}

      :default ->
        # Nx's default expression, over parameters standing for the block's arguments.
        {values, st} = Enum.map_reduce(args, st, &emit/2)
        emit_bound(default, values, st)
    end
  end

  defp emit_op(:cond, %T{data: %Expr{args: [clauses, last]}} = t, st), do: emit_cond(clauses, last, t, st)
  defp emit_op(:while, %T{data: %Expr{args: args}}, st), do: emit_while(args, st)

  # A side effect (`:io_call` in Nx 1.0, `:hook` in Nx 0.13: the same arguments) passes its tensors
  # through and, when a callback is bound (in the expression or by the caller's `hooks:`), calls it
  # with them: an ordered host call, after every side effect and runtime call emitted before it (the
  # token). A token hook (Nx 0.13's deprecated hook_token, attached to a result) calls back with the
  # hooked expression, whose own hooks run whether or not it has a callback.
  defp emit_op(op, %T{data: %Expr{args: [tensor_expr, spec, template, _ref]}}, st) when op in [:hook, :io_call] do
    {values, st} = emit_composite(tensor_expr, st)

    st =
      case spec do
        {:token_hook, hooked, inner} ->
          {hooked_values, st} = emit_composite(hooked, st)
          maybe_call_hook(inner, hooked, List.wrap(hooked_values), st)

        spec ->
          maybe_call_hook(spec, tensor_expr, List.wrap(values), st)
      end

    {if(match?(%T{}, template), do: values, else: List.wrap(values)), st}
  end

  # An Elixir function called from inside the program (Nx.runtime_call/4): a blocking host call that
  # gives the program its results, in program order with the hooks.
  defp emit_op(:runtime_call, %T{data: %Expr{args: [tensor_expr, fun, out_template, opts]}}, st) do
    {values, st} = emit_composite(tensor_expr, st)
    target = "plugboard.nx.runtime_call.#{length(st.hooks)}"
    {token, st} = token(st)
    in_flat = Composite.flatten_list([tensor_expr])
    out_flat = Composite.flatten_list([out_template])
    in_types = ["!stablehlo.token" | Enum.map(in_flat, &type_of/1)]
    out_types = ["!stablehlo.token" | Enum.map(out_flat, &type_of/1)]

    {[next | results], st} =
      results(st, "stablehlo.custom_call @#{target}(#{Enum.join([token | List.wrap(values)], ", ")}) " <>
        "{api_version = 4 : i32, has_side_effect = true} : (#{Enum.join(in_types, ", ")}) -> (#{Enum.join(out_types, ", ")})",
        length(out_types), :tuple)

    in_template = Composite.traverse(tensor_expr, &(&1 |> Nx.devectorize() |> Nx.to_template()))
    call = {:runtime_call, target, fun, opts, in_template, out_template}
    st = %{st | token: next, hooks: [call | st.hooks]}
    {if(match?(%T{}, out_template), do: hd(results), else: results), st}
  end

  defp emit_op(op, t, st), do: Ops.emit(op, t, st)

  @doc false
  # `expr` (built over parameters 0..n-1) emitted with those parameters bound to `values`.
  def emit_bound(expr, values, st) do
    saved = st.params
    st = %{st | params: Map.new(Enum.with_index(values), fn {v, i} -> {i, v} end)}
    {value, st} = emit_composite(expr, st)
    {value, %{st | params: saved}}
  end

  # A container (a tensor, or a tuple, map or other container of them) as one value or a list of
  # values (its tensors in Composite order).
  @doc false
  def emit_composite(%T{} = t, st), do: emit(t, st)

  def emit_composite(container, st) do
    {values, st} = [container] |> Composite.flatten_list() |> Enum.map_reduce(st, &emit/2)
    {values, st}
  end

  defp maybe_call_hook(spec, expr, values, st) do
    {name, callback} =
      case spec do
        {:named, name, callback} -> {name, callback}
        {:fn, callback} -> {nil, callback}
      end

    if callback != nil or (name != nil and MapSet.member?(st.overridden, name)),
      do: call_hook(name, callback, expr, values, st),
      else: st
  end

  # One hook: an ordered host call of the hook's tensors, after the previous one (the token).
  defp call_hook(name, callback, expr, values, st) do
    target = "plugboard.nx.hook.#{length(st.hooks)}"
    {token, st} = token(st)
    flat = Composite.flatten_list([expr])
    types = ["!stablehlo.token" | Enum.map(flat, &type_of/1)]
    {next, st} =
      op(st, "stablehlo.custom_call @#{target}(#{Enum.join([token | values], ", ")}) {api_version = 4 : i32, has_side_effect = true} : " <>
        "(#{Enum.join(types, ", ")}) -> !stablehlo.token")

    # The hook sees its tensors devectorized (vectorized axes as named leading axes), as under
    # Nx.Defn.Evaluator.
    template = Composite.traverse(expr, &(&1 |> Nx.devectorize() |> Nx.to_template()))
    %{st | token: next, hooks: [{:hook, target, name, callback, template} | st.hooks]}
  end

  defp token(%{token: nil} = st), do: op(st, "stablehlo.after_all : !stablehlo.token")
  defp token(st), do: {st.token, st}

  ## Text

  @doc "A fresh value name."
  def fresh(st), do: {"%#{st.next}", %{st | next: st.next + 1}}

  @doc "Appends one line (an operation) at the current depth."
  def line(st, text), do: %{st | lines: [[String.duplicate("  ", st.depth + 1), text, "\n"] | st.lines]}

  @doc "Emits `%v = <text>` and returns `v`."
  def op(st, text) do
    {v, st} = fresh(st)
    {v, line(st, "#{v} = #{text}")}
  end

  @doc """
  A region: `block_args` are `{name, type_text}`; `fun.(st)` emits the body and returns
  `{values, types, st}` for its `stablehlo.return`. Values made inside are not visible after it,
  and the parameters it binds are the outer ones again after it. Options: `roots:` the expressions
  the region computes (a `cond` inside takes what they share from the region), `token:` the token
  its hooks follow (default: a fresh one, unordered with the hooks outside).
  """
  def region(st, block_args, fun, opts \\ []) do
    outer_lines = st.lines
    outer_memo = st.memo
    outer_depth = st.depth
    outer_token = st.token
    outer_params = st.params
    outer_scope = st.scope
    st = %{st | lines: [], depth: st.depth + 1, token: opts[:token], scope: scope_ids(Keyword.get(opts, :roots, []))}
    {values, types, st} = fun.(st)
    st = line(st, "stablehlo.return #{Enum.join(values, ", ")} : #{Enum.join(types, ", ")}")
    args = Enum.map_join(block_args, ", ", fn {n, ty} -> "#{n}: #{ty}" end)
    pad = String.duplicate("  ", outer_depth + 1)
    text = ["{\n", pad, "^bb0(", args, "):\n", Enum.reverse(st.lines), pad, "}"]
    {IO.iodata_to_binary(text),
     %{st | lines: outer_lines, memo: outer_memo, depth: outer_depth, token: outer_token, params: outer_params, scope: outer_scope}}
  end

  ## Control flow

  # A loop whose condition or body has hooks carries the token in its state, so that they run
  # after the hooks before the loop and before those after it.
  defp emit_while([initial, arg, condition, body], st) do
    inits = flat(initial)
    params = flat(arg)
    bodies = flat(body)
    types = Enum.map(params, &type_of/1)
    {init_values, st} = Enum.map_reduce(Enum.zip(inits, params), st, fn {i, p}, st -> Ops.operand(i, p, st) end)
    {block, st} = block_args(params, st)
    names = Enum.map(block, &elem(&1, 0))
    ordered? = st.any_hooks and has_hooks?([condition | bodies])

    {init_values, types, block, token, st} =
      if ordered? do
        {outer, st} = token(st)
        {name, st} = fresh(st)
        {init_values ++ [outer], types ++ ["!stablehlo.token"], block ++ [{name, "!stablehlo.token"}], name, st}
      else
        {init_values, types, block, nil, st}
      end

    {cond_region, st} =
      region(st, block, fn st ->
        st = bind(st, names)
        {pred, st} = Ops.to_pred(condition, st)
        {[pred], ["tensor<i1>"], st}
      end, roots: [condition], token: token)

    {body_region, st} =
      region(st, block, fn st ->
        st = bind(st, names)
        {values, st} = Enum.map_reduce(Enum.zip(bodies, params), st, fn {b, p}, st -> Ops.operand(b, p, st) end)
        {if(ordered?, do: values ++ [st.token], else: values), types, st}
      end, roots: bodies, token: token)

    text = ~s["stablehlo.while"(#{Enum.join(init_values, ", ")}) (#{cond_region}, #{body_region}) : ] <>
      "(#{Enum.join(types, ", ")}) -> (#{Enum.join(types, ", ")})"

    if ordered? do
      {values, st} = results(st, text, length(types), :tuple)
      {values, [token]} = Enum.split(values, -1)
      {if(shape_of(arg) == :single, do: hd(values), else: values), %{st | token: token}}
    else
      results(st, text, length(types), shape_of(arg))
    end
  end

  # What the branches share with the enclosing scope is computed there first, once (as
  # Nx.Defn.Evaluator caches it), whichever is reached first. Branches with hooks take the token
  # and give it back as the last result, so that their hooks run in program order.
  defp emit_cond(clauses, last, t, st) do
    branches = Enum.flat_map(clauses, fn {pred, expr} -> [pred | flat(expr)] end) ++ flat(last)
    st = Enum.reduce(shared_with_scope(branches, st), st, fn e, st -> elem(emit(e, st), 1) end)
    outs = flat(last)
    types = Enum.map(outs, &type_of/1)

    {values, st} =
      if st.any_hooks and has_hooks?(branches) do
        {token, st} = token(st)
        {values, st} = emit_clauses(clauses, last, outs, types ++ ["!stablehlo.token"], %{st | token: token})
        {values, [token]} = Enum.split(values, -1)
        {values, %{st | token: token}}
      else
        emit_clauses(clauses, last, outs, types, st)
      end

    {if(match?(%T{type: {:tuple, _}}, t), do: values, else: hd(values)), st}
  end

  # if pred_1 then expr_1 else (if pred_2 then expr_2 else ... last), as nested stablehlo.if.
  # `types` ends with the token's when the branches thread it (`st.token` is then set).
  defp emit_clauses([], last, outs, types, st) do
    {values, st} = Enum.map_reduce(Enum.zip(flat(last), outs), st, fn {e, o}, st -> Ops.operand(e, o, st) end)
    {with_token(values, types, st), st}
  end

  defp emit_clauses([{pred, expr} | rest], last, outs, types, st) do
    {p, st} = Ops.to_pred(pred, st)

    {then_region, st} =
      region(st, [], fn st ->
        {values, st} = Enum.map_reduce(Enum.zip(flat(expr), outs), st, fn {e, o}, st -> Ops.operand(e, o, st) end)
        {with_token(values, types, st), types, st}
      end, roots: flat(expr), token: st.token)

    {else_region, st} =
      region(st, [], fn st ->
        {values, st} = emit_clauses(rest, last, outs, types, st)
        {values, types, st}
      end, roots: Enum.flat_map(rest, fn {p, e} -> [p | flat(e)] end) ++ flat(last), token: st.token)

    {values, st} =
      results(st, ~s["stablehlo.if"(#{p}) (#{then_region}, #{else_region}) : (tensor<i1>) -> ] <>
        "(#{Enum.join(types, ", ")})", length(types), :tuple)

    {List.wrap(values), st}
  end

  defp with_token(values, types, st) do
    if List.last(types) == "!stablehlo.token", do: values ++ [st.token], else: values
  end

  ## Scopes

  # The expressions a scope computes itself: those outside the branches of its conds, and those
  # several of its conds use (Nx's own rule, which Nx.Defn.Evaluator caches by).
  # One call over all of them (as a tuple): an expression two outputs' conds share counts as shared.
  defp scope_ids(exprs), do: Tree.scope_ids(List.to_tuple(exprs))

  # The expressions of the scope, not computed yet, that `exprs` (a cond's branches) use.
  defp shared_with_scope(exprs, st) do
    {found, _} = Enum.reduce(exprs, {[], MapSet.new()}, &shared_walk(&1, &2, st))
    Enum.reverse(found)
  end

  defp shared_walk(%T{data: %Expr{id: id}} = t, {found, seen} = acc, st) do
    cond do
      MapSet.member?(seen, id) or Map.has_key?(st.memo, id) -> acc
      Map.has_key?(st.scope, id) -> {[t | found], MapSet.put(seen, id)}
      true ->
        {_, acc} = Tree.apply_args(t, :scope, {found, MapSet.put(seen, id)}, &{&1, shared_walk(&1, &2, st)})
        acc
    end
  end

  defp shared_walk(_, acc, _st), do: acc

  # Whether `exprs` (branches, a loop's condition and body) make a host call (io_call, hook, runtime call).
  defp has_hooks?(exprs) do
    {_, found} = Enum.reduce(exprs, {MapSet.new(), false}, &hook_walk/2)
    found
  end

  defp hook_walk(_, {_, true} = acc), do: acc
  defp hook_walk(%T{data: %Expr{op: op}}, {seen, _}) when op in [:hook, :io_call, :runtime_call], do: {seen, true}

  defp hook_walk(%T{data: %Expr{id: id}} = t, {seen, false} = acc) do
    if MapSet.member?(seen, id) do
      acc
    else
      {_, acc} = Tree.apply_args(t, :all, {MapSet.put(seen, id), false}, &{&1, hook_walk(&1, &2)})
      acc
    end
  end

  defp hook_walk(_, acc), do: acc

  @doc false
  # A region function (`reduce`, `window_reduce`, `sort` comparators): block arguments for the
  # function's parameters (scalars), the function's result returned.
  def fun_region(%T{data: %Expr{op: :fun, args: [params, body, _mfa]}}, st, result \\ nil) do
    {block, st} = block_args(params, st)
    names = Enum.map(block, &elem(&1, 0))

    region(st, block, fn st ->
      st = bind(st, names)

      case result do
        nil ->
          {v, st} = emit(body, st)
          {[v], [type_of(body)], st}

        fun ->
          fun.(body, st)
      end
    end)
  end

  defp block_args(params, st) do
    Enum.map_reduce(params, st, fn p, st ->
      {n, st} = fresh(st)
      {{n, type_of(p)}, st}
    end)
  end

  defp bind(st, names), do: %{st | params: Map.new(Enum.with_index(names), fn {n, i} -> {i, n} end)}

  defp flat(%T{} = t), do: [t]
  defp flat(tuple) when is_tuple(tuple), do: Composite.flatten_list([tuple])
  defp flat(list) when is_list(list), do: list

  defp shape_of(%T{}), do: :single
  defp shape_of(_), do: :tuple

  # An operation with `n` results: one value, or `n` of them (`%v#i`).
  defp results(st, text, 1, :single), do: op(st, text)

  defp results(st, text, n, _) do
    {v, st} = fresh(st)
    st = line(st, "#{v}:#{n} = #{text}")
    {for(i <- 0..(n - 1)//1, do: "#{v}##{i}"), st}
  end
end
