defmodule Plugboard.Nx.IoCallTest do
  # Side effects (Nx 1.0's io_call, Nx 0.13's hook: test/support/io_call_fixtures.ex writes them with
  # whichever the Nx in use has) as ordered host calls: in program order, in the calling process, with
  # the values the Evaluator gives them; named ones overridden by `hooks:`, optional ones dropped; a
  # raising callback's error reaches the caller.
  use ExUnit.Case, async: true
  import ExUnit.CaptureIO
  import Plugboard.Nx.Case
  alias Plugboard.Nx.IoCallFixtures, as: F

  # The messages the side effects sent, as {tag, values...} with the tensors as flat lists.
  defp messages do
    {:messages, messages} = Process.info(self(), :messages)
    for _ <- messages, do: receive(do: (m -> m))

    Enum.map(messages, fn m ->
      m |> Tuple.to_list() |> Enum.map(&if(match?(%Nx.Tensor{}, &1), do: Nx.to_flat_list(&1), else: &1)) |> List.to_tuple()
    end)
  end

  # The side effects' messages and result of `fun` under the Evaluator and under Plugboard.Nx.
  defp both(c, fun, args, opts \\ []) do
    for compiler <- [Nx.Defn.Evaluator, Plugboard.Nx] do
      result = Nx.Defn.jit_apply(fun, args, [compiler: compiler, client: c] ++ opts)
      {messages(), [result] |> Nx.Defn.Composite.flatten_list() |> Enum.map(&Nx.to_flat_list/1)}
    end
  end

  if Plugboard.Nx.Features.io_call?() do
    test "on this Nx the fixtures build io_call nodes (Nx 1.0)" do
      assert inspect(Nx.Defn.debug_expr(&F.several/1).(Nx.tensor(1.0))) =~ "io_call"
    end
  end

  for {label, path} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        %{c: client(unquote(path))}
      end

      test "several, in program order, in the calling process, with the Evaluator's values", %{c: c} do
        [evaluator, plugboard] = both(c, &F.several/1, [Nx.tensor([1.0, 2.0])])
        assert evaluator == {[{:first, [2.0, 4.0]}, {:second, [3.0, 5.0]}], [[2.0, 4.0], [30.0, 50.0]]}
        assert plugboard == evaluator
      end

      test "an optional io_call (named, no callback) is dropped from the program unless hooks: binds it", %{c: c} do
        text = Plugboard.Nx.to_mlir(&F.several/1, [Nx.template({2}, :f32)])
        assert length(Regex.scan(~r/stablehlo\.custom_call/, text)) == 2

        me = self()
        hooks = %{optional: &send(me, {:optional, &1})}
        [evaluator, plugboard] = both(c, &F.several/1, [Nx.tensor([1.0, 2.0])], hooks: hooks)
        assert [{:first, _}, {:second, _}, {:optional, [30.0, 50.0]}] = elem(evaluator, 0)
        assert plugboard == evaluator
      end

      test "hooks: overrides a named io_call's own callback; a run without it calls the own one again (cache key)", %{c: c} do
        me = self()
        hooks = %{second: &send(me, {:bound_second, &1})}
        [evaluator, plugboard] = both(c, &F.several/1, [Nx.tensor([1.0])], hooks: hooks)
        assert elem(evaluator, 0) == [{:first, [2.0]}, {:bound_second, [3.0]}]
        assert plugboard == evaluator

        # The same function and argument template without hooks:, with an empty map (Nx 1.0 always
        # passes one), and with the name bound to nil (the expression's own callback).
        for opts <- [[], [hooks: %{}], [hooks: %{second: nil}]] do
          [evaluator, plugboard] = both(c, &F.several/1, [Nx.tensor([1.0])], opts)
          assert elem(evaluator, 0) == [{:first, [2.0]}, {:second, [3.0]}]
          assert plugboard == evaluator
        end
      end

      test "inside a while's condition and body, ordered with those around the loop", %{c: c} do
        [evaluator, plugboard] = both(c, &F.looped/1, [Nx.tensor(1)])
        tags = evaluator |> elem(0) |> Enum.map(&elem(&1, 0))
        assert tags == [:before, :test, :body, :test, :body, :test, :body, :test, :after]
        assert plugboard == evaluator
      end

      test "inside a cond: only the taken branch's is called", %{c: c} do
        for x <- [Nx.tensor([1, 2]), Nx.tensor([-1, -2])] do
          [evaluator, plugboard] = both(c, &F.branched/1, [x])
          assert length(elem(evaluator, 0)) == 1
          assert plugboard == evaluator
        end
      end

      test "on containers (a tuple, a map): the callback gets the container, the tensors go on", %{c: c} do
        [evaluator, plugboard] = both(c, &F.containers/1, [Nx.tensor([1, 2])])
        assert evaluator == {[{:tuple, [1, 2], [2, 3]}, {:map, [2, 4], [2, 3]}], [[4, 7]]}
        assert plugboard == evaluator
      end

      test "a raising callback's exception reaches the caller; the side effects after it are not called", %{c: c} do
        for compiler <- [Nx.Defn.Evaluator, Plugboard.Nx] do
          assert_raise ArgumentError, "io_call failed on purpose", fn ->
            Nx.Defn.jit_apply(&F.raising/1, [Nx.tensor(1)], compiler: compiler, client: c)
          end

          assert messages() == [{:first, [2]}]
        end

        # The process and the program are fine afterwards.
        assert Nx.Defn.jit_apply(&F.several/1, [Nx.tensor(1.0)], compiler: Plugboard.Nx, client: c) |> elem(0) |> Nx.to_number() == 2.0
        assert [{:first, _}, {:second, _}] = messages()
      end

      test "a callback's throw in a program that waits for a runtime call reaches the caller", %{c: c} do
        for compiler <- [Nx.Defn.Evaluator, Plugboard.Nx] do
          assert catch_throw(Nx.Defn.jit_apply(&F.raising_with_runtime_call/1, [Nx.tensor(1)], compiler: compiler, client: c)) ==
                   :io_call_thrown
        end
      end

      test "print_value prints the value at run time and print_expr the expression at trace time", %{c: c} do
        [evaluator, plugboard] =
          for compiler <- [Nx.Defn.Evaluator, Plugboard.Nx] do
            capture_io(fn ->
              result = Nx.Defn.jit_apply(&F.printed/1, [Nx.tensor([1, 2])], compiler: compiler, client: c)
              send(self(), {:result, Nx.to_flat_list(result)})
            end)
          end

        assert evaluator =~ "doubled: #Nx.Tensor<\n  s32[2]\n  [2, 4]\n>"
        assert evaluator =~ "traced: #Nx.Tensor<"
        assert plugboard == evaluator
        assert messages() == [{:result, [3, 5]}, {:result, [3, 5]}]
      end

      test "Nx.Serving streams named io_calls as events", %{c: c} do
        serving = Nx.Serving.jit(&F.served/1, compiler: Plugboard.Nx, client: c) |> Nx.Serving.streaming(hooks: [:double, :plus_ten])
        batch = Nx.Batch.stack([Nx.tensor([1, 2]), Nx.tensor([3, 4])])

        events =
          for event <- Enum.to_list(Nx.Serving.run(serving, batch)) do
            case event do
              {tag, value} -> {tag, Nx.to_flat_list(value)}
              {:batch, value, _metadata} -> {:batch, Nx.to_flat_list(value)}
            end
          end

        assert events == [{:double, [2, 4, 6, 8]}, {:plus_ten, [12, 14, 16, 18]}, {:batch, [12, 14, 16, 18]}]
      end

      test "hooks: that binds a name to something other than a function of one argument is refused, naming it", %{c: c} do
        error =
          assert_raise ArgumentError, fn ->
            Nx.Defn.jit_apply(&F.several/1, [Nx.tensor(1.0)], compiler: Plugboard.Nx, client: c, hooks: %{second: :not_a_function})
          end

        assert error.message =~ "hooks:"
        assert error.message =~ ":second"
        assert error.message =~ ":not_a_function"
      end
    end
  end
end
