defmodule Plugboard.Nx.BackendTest do
  # Plugboard.Nx.Backend as libraries use it (found by Axon's own suite with it as the default backend).
  use ExUnit.Case, async: true
  import Plugboard.Nx.Case

  for {label, path} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        %{c: client(unquote(path))}
      end

      # Code traced by a defn may compute on tensors it closes over (a transform reading a number
      # from one, say): those operations run eagerly, each a program of the backend's own, while the
      # defn's compilation is under way (Nx refused: "cannot invoke JITed function when there is a
      # JIT compilation happening").
      test "an eager operation while a defn is being traced", %{c: c} do
        weights = Nx.tensor([1.0, 2.0], backend: {Plugboard.Nx.Backend, client: c})
        fun = fn x -> Nx.multiply(x, weights |> Nx.sum() |> Nx.to_number()) end

        for compiler <- [Plugboard.Nx, Nx.Defn.Evaluator] do
          result = Nx.Defn.jit_apply(fun, [Nx.tensor([0.5, 0.25])], compiler: compiler, client: c)
          assert Nx.to_list(result) == [1.5, 0.75], "with #{inspect(compiler)}"
        end
      end
    end
  end
end
