defmodule Plugboard.Nx.Fixtures do
  @moduledoc false
  import Nx.Defn

  defn clamp_sum(x) do
    s = Nx.sum(x)

    cond do
      s > 100 -> s * 0
      s > 5 -> s * 2
      true -> s
    end
  end

  defn count_to(n) do
    {i, acc, _n} = while {i = 0, acc = 0.0, n}, i < n do
      {i + 1, acc + i * 0.5, n}
    end

    acc + i
  end

  defn tuple_loop(n, x) do
    {_, x, y} = while {i = n, x, y = x * 0}, i > 0 do
      {i - 1, x * 2, y + x}
    end

    {x, y}
  end

  defn mlp_loss(w1, w2, x) do
    h = Nx.tanh(Nx.dot(x, w1))
    y = Nx.dot(h, w2)
    Nx.mean(y * y)
  end

  defn mlp_grad(w1, w2, x) do
    {mlp_loss(w1, w2, x), grad({w1, w2}, fn {w1, w2} -> mlp_loss(w1, w2, x) end)}
  end
end

defmodule Plugboard.Nx.HookFixtures do
  @moduledoc false
  import Nx.Defn

  defn hooked(x) do
    a = hook(x * 2, :double, fn t -> send(self(), {:double, t}) end)
    b = hook(a + 1, :plus_one)
    c = print_value(b * 10, label: "times ten")
    hook({a, c}, :pair, fn {p, q} -> send(self(), {:pair, p, q}) end)
  end

  # Hook tokens exist in Nx 0.13 only (Nx 1.0 removed Nx.Defn.Token).
  if Plugboard.Nx.Features.tokens?() do
    defn one_token(a, b) do
      token = create_token()
      {token, _} = hook_token(token, b, :b, fn t -> send(self(), {:b, t}) end)
      {token, _} = hook_token(token, a, :a, fn t -> send(self(), {:a, t}) end)
      attach_token(token, {a, b})
    end
  end

  defn hooked_in_cond(x) do
    if Nx.sum(x) > 0 do
      hook(x, :positive, fn t -> send(self(), {:positive, t}) end)
    else
      x
    end
  end
end

defmodule Plugboard.Nx.VectorizedFixtures do
  @moduledoc false
  import Nx.Defn

  defn vectorized_if(pred, then, other) do
    cond do
      pred -> then
      true -> other
    end
  end
end

defmodule Plugboard.Nx.ScopeFixtures do
  @moduledoc false
  # Expressions shared by a cond's branches and the enclosing scope, and hooks whose order only the
  # token keeps (no data dependency between them).
  import Nx.Defn

  defn shared_after_cond(bool, a, b) do
    res = hook(a + b, :shared, fn t -> send(self(), {:shared, t}) end)
    picked = if bool, do: res, else: 0
    picked * res
  end

  defn shared_by_two_conds(bool, a, b) do
    res = hook(a + b, :shared, fn t -> send(self(), {:shared, t}) end)
    left = if bool, do: res, else: -res
    right = if bool, do: res * 2, else: res
    left * right
  end

  defn shared_by_two_outputs(p, q, a) do
    h = hook(a + 1, :shared, fn t -> send(self(), {:shared, t}) end)
    {if(p, do: h, else: 0), if(q, do: h * 2, else: 1)}
  end

  defn next_iteration(state) do
    state = if state.iteration < 4, do: state, else: state
    %{state | iteration: state.iteration + 1}
  end

  defn ordered_branches(pred, then, other) do
    cond do
      pred -> hook(then, :then_branch, fn t -> send(self(), {:then_branch, t}) end)
      true -> hook(other, :else_branch, fn t -> send(self(), {:else_branch, t}) end)
    end
  end

  defn ordered_loop(x) do
    a = hook(x, :before, fn t -> send(self(), {:before, t}) end)

    {_, n} =
      while {i = 0, n = x}, i < 2 do
        {i + 1, hook(n + 1, :body, fn t -> send(self(), {:body, t}) end)}
      end

    b = hook(x * 10, :after, fn t -> send(self(), {:after, t}) end)
    {a, n, b}
  end
end

defmodule Plugboard.Nx.RuntimeCallFixtures do
  @moduledoc false
  import Nx.Defn

  # y = f(2x) + 1, where f (an Elixir function) multiplies by opts[:k].
  defn scaled(x) do
    y = Nx.runtime_call(x, x * 2, [k: 3], &__MODULE__.times_k/2)
    y + 1
  end

  def times_k(t, opts), do: Nx.multiply(t, opts[:k])

  # A runtime call between two hooks, on values that do not depend on each other.
  defn ordered(x) do
    a = hook(x + 1, :first, fn t -> send(self(), {:first, Nx.to_number(t)}) end)
    b = Nx.runtime_call(x, x + 2, [], &__MODULE__.report/2)
    c = hook(x + 3, :last, fn t -> send(self(), {:last, Nx.to_number(t)}) end)
    {a, b, c}
  end

  def report(t, _opts) do
    send(self(), {:runtime_call, Nx.to_number(t)})
    t
  end

  # Two results in a container.
  defn split(x) do
    out = {Nx.template({2}, :f32), Nx.template({}, :s64)}
    {a, n} = Nx.runtime_call(out, x, [], &__MODULE__.halves_and_count/2)
    a * n
  end

  def halves_and_count(t, _opts), do: {Nx.divide(t, 2) |> Nx.as_type(:f32), Nx.tensor(Nx.size(t), type: :s64)}

  defn via(x, fun_opts), do: Nx.runtime_call(x, x, fun_opts, &__MODULE__.apply_fun/2)
  def apply_fun(t, opts), do: opts[:fun].(t)

  defn cast(x) do
    y = Plugboard.Nx.runtime_cast(x * 2, [tag: :cast], &__MODULE__.record/2)
    y + 1
  end

  def record(t, opts), do: send(self(), {opts[:tag], self(), Nx.to_flat_list(t)})

  # A hook on a map of tensors.
  defn hooked_map(x) do
    hook(%{"kernel" => x, "bias" => x + 1}, fn m -> send(self(), {:map, Nx.to_number(m["bias"])}) end)
  end
end
