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
