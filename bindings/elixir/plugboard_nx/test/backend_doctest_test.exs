defmodule Plugboard.Nx.BackendDoctestTest do
  # Nx's own doctests with Plugboard.Nx.Backend as the default backend: every eager operation in
  # them runs as a compiled program on a CPU plugin. Excluded (with reasons) in @excluded.
  use ExUnit.Case, async: false

  setup_all do
    {_, path} = hd(Plugboard.Nx.Case.cpu_plugins())
    Plugboard.Nx.put_default_client(Plugboard.Nx.Case.client(path))
    previous = Nx.global_default_backend(Plugboard.Nx.Backend)
    on_exit(fn -> Nx.global_default_backend(previous) end)
    :ok
  end

  @excluded [
    # XLA's CPU kernels for these differ from Erlang's :math (what the examples print) in the last
    # bit or two of an f32: 0.8813735842704773 against 0.8813736438751221 for asinh(1), say.
    asinh: 1, atanh: 1, cosh: 1, erf: 1, erfc: 1, expm1: 1, logsumexp: 2, sigmoid: 1, tanh: 1
  ]

  test "the doctests below run on Plugboard.Nx.Backend" do
    assert %Plugboard.Nx.Backend{} = Nx.tensor([1, 2]).data
  end

  doctest Nx, except: @excluded
end
