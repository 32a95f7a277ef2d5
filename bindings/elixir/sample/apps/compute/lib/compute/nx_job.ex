# Compiled only when the release is built with Nx (see apps/compute/mix.exs).
if Code.ensure_loaded?(Nx) and Code.ensure_loaded?(Plugboard.Nx) do
  defmodule Compute.NxJob do
    @moduledoc """
    Nx code on the target the release booted: a small MLP (4 → 16 → 2, tanh) trained for a few
    gradient steps on a fixed regression task, each step one `Nx.Defn.jit` through `Plugboard.Nx`,
    the parameters staying on the device between steps (`Plugboard.Nx.Backend`).
    """
    import Nx.Defn

    defn predict({w1, b1, w2, b2}, x) do
      x |> Nx.dot(w1) |> Nx.add(b1) |> Nx.tanh() |> Nx.dot(w2) |> Nx.add(b2)
    end

    defn loss(params, x, y) do
      d = predict(params, x) - y
      Nx.mean(d * d)
    end

    defn step(params, x, y) do
      {l, g} = value_and_grad(params, &loss(&1, x, y))
      {w1, b1, w2, b2} = params
      {gw1, gb1, gw2, gb2} = g
      lr = 0.1
      {{w1 - lr * gw1, b1 - lr * gb1, w2 - lr * gw2, b2 - lr * gb2}, l}
    end

    @doc "Trains for 20 steps on `client`, printing the loss before and after."
    def run(client) do
      {first, last} = train(client)

      IO.puts("nx: MLP on #{inspect(Plugboard.Nx.Backend)}: loss #{Float.round(Nx.to_number(first), 4)} -> " <>
                "#{Float.round(Nx.to_number(last), 4)} after 20 steps")
      :ok
    end

    @doc "20 steps on a fixed task (`Random` key 7), each one jit through `Plugboard.Nx` on `client`: `{first_loss, last_loss}`."
    def train(client) do
      key = Nx.Random.key(7)
      {x, key} = Nx.Random.uniform(key, shape: {128, 4})
      y = Nx.stack([Nx.sum(x, axes: [1]), Nx.product(x, axes: [1])], axis: 1)
      {w1, key} = Nx.Random.normal(key, 0.0, 0.5, shape: {4, 16})
      {w2, _} = Nx.Random.normal(key, 0.0, 0.5, shape: {16, 2})
      params = {w1, Nx.broadcast(0.0, {16}), w2, Nx.broadcast(0.0, {2})}
      step = Nx.Defn.jit(&step/3, compiler: Plugboard.Nx, client: client)

      {params, first} = step.(params, x, y)
      {_params, last} = Enum.reduce(2..20, {params, first}, fn _, {p, _} -> step.(p, x, y) end)
      {first, last}
    end
  end
end
