defmodule Plugboard.Nx.HooksTest do
  # Hooks (Nx.Defn.Kernel.hook/2,3 and print_value) as ordered host calls, run in the caller's
  # process in program order.
  use ExUnit.Case, async: true
  import ExUnit.CaptureIO
  import Plugboard.Nx.Case
  alias Plugboard.Nx.{HookFixtures, ScopeFixtures}

  defmodule VectorizedCond do
    @moduledoc false
    import Nx.Defn

    # A hook and a print on a container with a vectorized tensor, inside a cond on a vectorized
    # predicate (Nx turns it into a select over both branches).
    defn hooked(pred, x) do
      cond do
        pred -> hook({Nx.tensor(7), Nx.tensor(8), x}, :inside, fn value -> send(self(), {:inside, value}) end)
        true -> {Nx.tensor(1), Nx.tensor(2), x * 2}
      end
    end

    # Nx's own test of this (vectorize_test.exs, "if with container result").
    defn printed_if(pred, then, other) do
      cond do
        pred -> print_value(then, label: "if")
        true -> print_value(other, label: "else")
      end
    end

    defn printed(pred, x) do
      cond do
        pred -> print_value({Nx.tensor(7), Nx.tensor(8), x}) |> elem(2)
        true -> x * 2
      end
    end
  end

  for {label, path} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        %{c: client(unquote(path))}
      end

      test "hooks run in the calling process, in program order, with the values the program had", %{c: c} do
        out =
          capture_io(fn ->
            result = Nx.Defn.jit_apply(&HookFixtures.hooked/1, [Nx.tensor([1.0, 2.0])], compiler: Plugboard.Nx, client: c)
            send(self(), {:result, result})
          end)

        assert out =~ "times ten"
        assert out =~ "[30.0, 50.0]"
        assert_received {:double, double}
        assert Nx.to_flat_list(double) == [2.0, 4.0]
        assert_received {:pair, a, q}
        assert Nx.to_flat_list(a) == [2.0, 4.0]
        assert Nx.to_flat_list(q) == [30.0, 50.0]
        assert_received {:result, {_, _}}
        # Program order: double before pair.
        {:messages, messages} = Process.info(self(), :messages)
        assert messages == []
      end

      test "a hook bound with hooks: runs even without a callback in the expression; order holds", %{c: c} do
        me = self()
        hooks = %{plus_one: fn t -> send(me, {:plus_one, Nx.to_flat_list(t)}) end}
        capture_io(fn -> Nx.Defn.jit_apply(&HookFixtures.hooked/1, [Nx.tensor([1.0, 2.0])], compiler: Plugboard.Nx, client: c, hooks: hooks) end)
        assert_received {:double, _}
        assert_received {:plus_one, [3.0, 5.0]}
        {:messages, [first | _]} = Process.info(self(), :messages)
        assert match?({:pair, _, _}, first)
      end

      # Hook tokens exist in Nx 0.13 only.
      if Plugboard.Nx.Features.tokens?() do
        test "hooks added to one token run in the order they were added (regression)", %{c: c} do
          Nx.Defn.jit_apply(&HookFixtures.one_token/2, [Nx.tensor(1), Nx.tensor(2)], compiler: Plugboard.Nx, client: c)
          assert {:messages, [{:b, _}, {:a, _}]} = Process.info(self(), :messages)
          assert_received {:b, b}
          assert Nx.to_number(b) == 2
          assert_received {:a, _}
        end
      end

      test "a hook inside a cond branch runs only when the branch is taken", %{c: c} do
        Nx.Defn.jit_apply(&HookFixtures.hooked_in_cond/1, [Nx.tensor([1, 2])], compiler: Plugboard.Nx, client: c)
        assert_received {:positive, t}
        assert Nx.to_flat_list(t) == [1, 2]
        Nx.Defn.jit_apply(&HookFixtures.hooked_in_cond/1, [Nx.tensor([-1, -2])], compiler: Plugboard.Nx, client: c)
        refute_received {:positive, _}
      end

      test "an expression a cond's branch shares with the scope runs once, whichever is reached first (regression)", %{c: c} do
        for {fun, args, expected} <- [
              {&ScopeFixtures.shared_after_cond/3, [0, 1, 2], 0},
              {&ScopeFixtures.shared_after_cond/3, [1, 1, 2], 9},
              {&ScopeFixtures.shared_by_two_conds/3, [0, 4, 5], -81},
              {&ScopeFixtures.shared_by_two_conds/3, [1, 4, 5], 162},
              # two outputs' conds sharing it (regression: each output's scope was computed apart)
              {&ScopeFixtures.shared_by_two_outputs/3, [1, 1, 2], {3, 6}}
            ] do
          result = Nx.Defn.jit_apply(fun, args, compiler: Plugboard.Nx, client: c)
          assert (case result do
                    {a, b} -> {Nx.to_number(a), Nx.to_number(b)}
                    t -> Nx.to_number(t)
                  end) == expected
          assert_received {:shared, _}
          refute_received {:shared, _}
        end
      end

      test "hooks in branches and loops run in program order with the others: the token goes through (regression)", %{c: c} do
        # Independent values: only the token orders these hooks, as under the Evaluator.
        pred = Nx.vectorize(Nx.tensor([0, 1, 0]), :pred)
        for compiler <- [Nx.Defn.Evaluator, Plugboard.Nx] do
          Nx.Defn.jit_apply(&ScopeFixtures.ordered_branches/3, [pred, 1, 2], compiler: compiler, client: c)
          Nx.Defn.jit_apply(&ScopeFixtures.ordered_loop/1, [Nx.tensor(5)], compiler: compiler, client: c)
        end

        {:messages, messages} = Process.info(self(), :messages)
        tags = Enum.map(messages, &elem(&1, 0))
        {evaluator, plugboard} = Enum.split(tags, div(length(tags), 2))
        assert evaluator == [:then_branch, :else_branch, :before, :body, :body, :after]
        assert plugboard == evaluator
      end

      test "a hook or print on {7, 8, vectorized x} inside a vectorized cond gets what the Evaluator's gets", %{c: c} do
        x = Nx.vectorize(Nx.tensor([[1, 2], [3, 4]]), :x)
        # The predicate over x's own axis, over another axis, and not vectorized.
        preds = [Nx.vectorize(Nx.tensor([1, 0]), :x), Nx.vectorize(Nx.tensor([1, 1]), :p), Nx.tensor(1)]
        seen = fn {a, b, t} -> {Nx.to_number(a), Nx.to_number(b), t.vectorized_axes, t.names, t.shape, Nx.to_flat_list(t)} end

        for pred <- preds do
          [evaluator, plugboard] =
            for compiler <- [Nx.Defn.Evaluator, Plugboard.Nx] do
              result = Nx.Defn.jit_apply(&VectorizedCond.hooked/2, [pred, x], compiler: compiler, client: c)
              assert_received {:inside, value}
              printed = capture_io(fn -> Nx.Defn.jit_apply(&VectorizedCond.printed/2, [pred, x], compiler: compiler, client: c) end)
              {seen.(value), printed, result |> elem(2) |> Nx.backend_transfer(Nx.BinaryBackend)}
            end

          {{7, 8, [], [:x, nil], {2, 2}, [1, 2, 3, 4]}, _, _} = evaluator
          assert elem(plugboard, 0) == elem(evaluator, 0)
          assert elem(plugboard, 1) == elem(evaluator, 1)
          assert elem(plugboard, 2) == elem(evaluator, 2)
        end

        # What Nx's own suite expects of {7, 8, vectorized x} printed in a branch: x devectorized,
        # its vectorized axis a named axis (as the Evaluator gives it), once per branch taken.
        pred = Nx.vectorize(Nx.tensor([2, 0, 0]), :pred)
        other = {7, 8, Nx.vectorize(Nx.tensor([9, 10, 11]), :x)}
        io = capture_io(fn -> Nx.Defn.jit_apply(&VectorizedCond.printed_if/3, [pred, {1, 2, 3}, other], compiler: Plugboard.Nx, client: c) end)
        assert String.replace(io, ",\n", ",") ==
                 "if: #{inspect({Nx.tensor(1), Nx.tensor(2), Nx.tensor(3)})}\n" <>
                   "else: #{inspect({Nx.tensor(7), Nx.tensor(8), Nx.tensor([9, 10, 11], names: [:x])})}\n"
      end

      test "a hook sees vectorized tensors devectorized, as under the Evaluator", %{c: c} do
        x = Nx.vectorize(Nx.tensor([1, 2, 3]), :x)
        Nx.Defn.jit_apply(&ScopeFixtures.ordered_loop/1, [x], compiler: Plugboard.Nx, client: c)
        assert_received {:before, before}
        assert before.vectorized_axes == [] and before.names == [:x]
        assert Nx.to_flat_list(before) == [1, 2, 3]
      end
    end
  end
end
