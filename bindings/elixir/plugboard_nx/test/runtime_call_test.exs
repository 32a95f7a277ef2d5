defmodule Plugboard.Nx.RuntimeCallTest do
  # Nx.runtime_call/4 as a blocking host call run in the calling process, its answer flowing back
  # into the program; Plugboard.Nx.runtime_cast/3 as its non-blocking form; both in program order
  # with hooks.
  use ExUnit.Case, async: true
  import Plugboard.Nx.Case
  alias Plugboard.Nx.RuntimeCallFixtures, as: F

  defp jit(c, fun, args), do: Nx.Defn.jit_apply(fun, args, compiler: Plugboard.Nx, client: c)

  for {label, path} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        %{c: client(unquote(path))}
      end

      test "the function's result flows back into the program", %{c: c} do
        assert Nx.to_flat_list(jit(c, &F.scaled/1, [Nx.tensor([1.0, 2.0])])) == [7.0, 13.0]
        assert_same(c, &F.scaled/1, [Nx.tensor([1.0, -2.5])])
      end

      test "results in a container, of several types", %{c: c} do
        assert Nx.to_flat_list(jit(c, &F.split/1, [Nx.tensor([2.0, 4.0])])) == [2.0, 4.0]
      end

      test "runtime calls and hooks run in program order, in the calling process", %{c: c} do
        jit(c, &F.ordered/1, [Nx.tensor(10)])
        assert {:messages, [{:first, 11}, {:runtime_call, 12}, {:last, 13}]} = Process.info(self(), :messages)
        flush()
      end

      test "100 concurrent callers each get their own calls", %{c: c} do
        results =
          1..100
          |> Task.async_stream(
            fn i ->
              me = self()
              fun = fn t -> send(me, {:called_in, self()}); Nx.add(t, i) end
              result = jit(c, &F.via/2, [Nx.tensor(i * 1.0), [fun: fun]])
              assert_received {:called_in, ^me}
              {i, Nx.to_number(result)}
            end,
            max_concurrency: 100,
            timeout: 60_000
          )
          |> Enum.map(fn {:ok, r} -> r end)

        assert results == for(i <- 1..100, do: {i, 2.0 * i})
      end

      test "a function that raises fails that call with its message; the next call works", %{c: c} do
        boom = fn _ -> raise "boom from runtime_call" end
        error = assert_raise Plugboard.Error, fn -> jit(c, &F.via/2, [Nx.tensor(1.0), [fun: boom]]) end
        assert Exception.message(error) =~ "boom from runtime_call"
        assert Nx.to_number(jit(c, &F.via/2, [Nx.tensor(1.0), [fun: &Nx.negate/1]])) == -1.0
      end

      test "an answer that does not match the template fails the call, naming the template", %{c: c} do
        wrong = fn _ -> Nx.tensor([1, 2, 3]) end
        error = assert_raise Plugboard.Error, fn -> jit(c, &F.via/2, [Nx.tensor(1.0), [fun: wrong]]) end
        assert Exception.message(error) =~ "output template"
      end

      test "a caller killed inside its call hangs nothing", %{c: c} do
        me = self()
        stuck = fn t -> send(me, {:inside, self()}); Process.sleep(:infinity); t end
        caller = spawn(fn -> jit(c, &F.via/2, [Nx.tensor(1.0), [fun: stuck]]) end)
        assert_receive {:inside, ^caller}, 30_000
        ref = Process.monitor(caller)
        Process.exit(caller, :kill)
        assert_receive {:DOWN, ^ref, :process, ^caller, :killed}
        # The same program (same key) runs again at once for someone else.
        assert Nx.to_number(jit(c, &F.via/2, [Nx.tensor(2.0), [fun: &Nx.negate/1]])) == -2.0
      end

      test "runtime_cast runs its function for its side effects without the program waiting", %{c: c} do
        me = self()
        assert Nx.to_flat_list(jit(c, &F.cast/1, [Nx.tensor([1.0, 2.0])])) == [3.0, 5.0]
        assert_received {:cast, ^me, [2.0, 4.0]}
        # Outside defn it runs at once.
        assert Plugboard.Nx.runtime_cast(Nx.tensor(1), [tag: :now], &F.record/2) == Nx.tensor(1)
        assert_received {:now, ^me, [1]}
      end

      test "a hook on a map of tensors", %{c: c} do
        out = jit(c, &F.hooked_map/1, [Nx.tensor(1.0)])
        assert Nx.to_number(out["bias"]) == 2.0
        assert_received {:map, 2.0}
      end
    end
  end

  defp flush do
    receive do
      _ -> flush()
    after
      0 -> :ok
    end
  end
end
