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

  defn one_token(a, b) do
    token = create_token()
    {token, _} = hook_token(token, b, :b, fn t -> send(self(), {:b, t}) end)
    {token, _} = hook_token(token, a, :a, fn t -> send(self(), {:a, t}) end)
    attach_token(token, {a, b})
  end

  defn hooked_in_cond(x) do
    if Nx.sum(x) > 0 do
      hook(x, :positive, fn t -> send(self(), {:positive, t}) end)
    else
      x
    end
  end
end

defmodule Plugboard.Nx.StreamFixtures do
  @moduledoc false
  import Nx.Defn

  defn running_sum(x, acc), do: {acc, acc + Nx.sum(x)}
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
