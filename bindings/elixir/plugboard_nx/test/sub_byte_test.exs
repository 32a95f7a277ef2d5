defmodule Plugboard.Nx.SubByteTest do
  # Nx's sub-byte integers (s2, s4, u2, u4; Nx 1.0 reads them from bitstrings of any length, nx#1817):
  # plugboard's buffers have no such dtype, so the backend and the compiler refuse them with an error
  # naming the type, never a crash or a wrong value.
  use ExUnit.Case, async: true
  import Plugboard.Nx.Case

  for {label, path} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        %{c: client(unquote(path))}
      end

      test "the backend refuses a sub-byte tensor, naming its type", %{c: c} do
        for {type, bits} <- [{{:s, 4}, <<-8::4-signed, 7::4-signed>>}, {{:u, 2}, <<1::2, 2::2, 3::2, 0::2>>}] do
          error = assert_raise ArgumentError, fn -> Nx.from_binary(bits, type, backend: {Plugboard.Nx.Backend, client: c}) end
          assert error.message =~ "has no buffers of type #{Nx.Type.to_string(type)}"
        end
      end

      test "a jit with a sub-byte argument or result refuses it before compiling, naming which and its type", %{c: c} do
        arg = Nx.tensor([1, 2, 3], type: {:u, 4})
        error = assert_raise ArgumentError, fn -> Nx.Defn.jit_apply(&Nx.add(&1, 1), [arg], compiler: Plugboard.Nx, client: c) end
        assert error.message =~ "the 1st argument has type u4"

        error =
          assert_raise ArgumentError, fn ->
            Nx.Defn.jit_apply(&{&1, Nx.as_type(&1, {:s, 2})}, [Nx.tensor([1, 0])], compiler: Plugboard.Nx, client: c)
          end

        assert error.message =~ "result 1 has type s2"
      end

      test "a sub-byte argument the program does not read is no buffer, so the jit runs (as under the Evaluator)", %{c: c} do
        mask = Nx.tensor([1, 0, 1], type: {:u, 4})
        x = Nx.tensor([1.0, 2.0, 3.0])
        fun = fn _mask, x -> Nx.add(x, 1) end
        want = Nx.Defn.jit_apply(fun, [mask, x], compiler: Nx.Defn.Evaluator)
        got = Nx.Defn.jit_apply(fun, [mask, x], compiler: Plugboard.Nx, client: c)
        assert Nx.to_flat_list(got) == Nx.to_flat_list(want)
      end
    end
  end
end
