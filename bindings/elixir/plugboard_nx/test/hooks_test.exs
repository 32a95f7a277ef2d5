defmodule Plugboard.Nx.HooksTest do
  # Hooks (Nx.Defn.Kernel.hook/2,3 and print_value) as ordered host calls, run in the caller's
  # process in program order.
  use ExUnit.Case, async: true
  import ExUnit.CaptureIO
  import Plugboard.Nx.Case
  alias Plugboard.Nx.HookFixtures

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

      test "hooks added to one token run in the order they were added (regression)", %{c: c} do
        Nx.Defn.jit_apply(&HookFixtures.one_token/2, [Nx.tensor(1), Nx.tensor(2)], compiler: Plugboard.Nx, client: c)
        assert {:messages, [{:b, _}, {:a, _}]} = Process.info(self(), :messages)
        assert_received {:b, b}
        assert Nx.to_number(b) == 2
        assert_received {:a, _}
      end

      test "a hook inside a cond branch runs only when the branch is taken", %{c: c} do
        Nx.Defn.jit_apply(&HookFixtures.hooked_in_cond/1, [Nx.tensor([1, 2])], compiler: Plugboard.Nx, client: c)
        assert_received {:positive, t}
        assert Nx.to_flat_list(t) == [1, 2]
        Nx.Defn.jit_apply(&HookFixtures.hooked_in_cond/1, [Nx.tensor([-1, -2])], compiler: Plugboard.Nx, client: c)
        refute_received {:positive, _}
      end
    end
  end
end
