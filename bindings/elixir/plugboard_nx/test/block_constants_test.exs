defmodule Plugboard.Nx.BlockConstantsTest do
  # Nx.block with constant tensor arguments inside defn (Nx 1.0, nx#1807: the constants become
  # expressions of the block): native blocks and those run through Nx's default expression, alone and
  # beside a parameter, agree with the Evaluator.
  use ExUnit.Case, async: true
  import Plugboard.Nx.Case

  @spd Nx.tensor([[4.0, 1.0], [1.0, 3.0]])

  # Whether this Nx traces a block whose arguments mix a constant and a parameter (nx#1807; Nx 0.13.1
  # raises in Nx.Defn.Expr.parameter/2 for Nx.LinAlg.solve(constant, parameter)): asked of Nx itself.
  @mixed_block_arguments (try do
                            a = Nx.tensor([[4.0, 1.0], [1.0, 3.0]])
                            Nx.Defn.jit_apply(fn b -> Nx.LinAlg.solve(a, b) end, [Nx.tensor([1.0, 2.0])], compiler: Nx.Defn.Evaluator)
                            true
                          rescue
                            FunctionClauseError -> false
                          end)

  for {label, path} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        %{c: client(unquote(path))}
      end

      test "native blocks (cumulative sum, take, fft) of constants", %{c: c} do
        assert_same(c, fn x -> Nx.add(Nx.cumulative_sum(Nx.tensor([1, 2, 3])), x) end, [Nx.tensor(1)])
        assert_same(c, fn i -> Nx.take(Nx.tensor([10, 20, 30]), i) end, [Nx.tensor([2, 0])])
        assert_same(c, fn x -> Nx.add(Nx.fft(Nx.tensor([1.0, 0.0, -1.0, 0.0])), x) end, [Nx.tensor(0.0)], atol: 1.0e-5)
      end

      # (Not determinant: Nx 0.13.1's own Evaluator fails on a constant's determinant inside defn, the
      # bug nx#1807 fixed.)
      test "LinAlg blocks (qr, cholesky) of constants", %{c: c} do
        spd = @spd
        assert_same(c, fn x -> {q, r} = Nx.LinAlg.qr(spd); Nx.add(Nx.dot(q, r), x) end, [Nx.tensor(0.0)], atol: 1.0e-4)
        assert_same(c, fn x -> Nx.multiply(Nx.LinAlg.cholesky(spd), x) end, [Nx.tensor(2.0)], atol: 1.0e-4)
      end

      if @mixed_block_arguments do
        test "a LinAlg block of a constant beside a parameter (solve, determinant)", %{c: c} do
          spd = @spd
          assert_same(c, fn b -> Nx.LinAlg.solve(spd, b) end, [Nx.tensor([1.0, 2.0])], atol: 1.0e-4)
          assert_same(c, fn x -> Nx.add(Nx.LinAlg.determinant(spd), x) end, [Nx.tensor(1.0)], atol: 1.0e-4)
        end
      end
    end
  end
end
