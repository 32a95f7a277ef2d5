defmodule Plugboard.Nx.DonationTest do
  # Buffer donation from Nx (issue 35, item 3), on an Nx that has it (Nx.donatable/1, Nx main / 1.0):
  # a donatable argument's buffer becomes the output of its type and shape (the same device memory),
  # the old tensor then fails saying it was donated, nothing else is consumed, the program cache keys
  # on donation, and what cannot be donated is either left alone (a copy made for the call, a buffer
  # passed twice) or refused by name (a view of memory it does not own, a program split over devices).
  use ExUnit.Case, async: true

  @donation Code.ensure_loaded?(Nx) and function_exported?(Nx, :donatable, 1)

  if not @donation do
    @tag :skip
    test "Nx.donatable/1: not in this Nx (0.13); nothing is ever donated" do
    end
  else
    import Plugboard.Nx.Case
    alias Plugboard.Nx.Cache

    defp address(%Nx.Tensor{data: %Plugboard.Nx.Backend{buffer: b}}) do
      {:ok, address} = Plugboard.device_pointer(b)
      address
    end

    # A tensor on the device that owns its memory (a program's output): a tensor made from a binary
    # on the device is a view of the binary, never donated (the last test).
    defp on(c, t), do: Nx.Defn.jit_apply(&Nx.add(&1, 0), [t], compiler: Plugboard.Nx, client: c)

    defp assert_donated(t) do
      error = assert_raise Plugboard.Error, fn -> Nx.to_binary(t) end
      assert error.code == :failed_precondition
      assert Exception.message(error) =~ "donated"
    end

    for {label, plugin} <- cpu_plugins() do
      describe "on #{label}" do
        setup do
          %{c: client(unquote(plugin))}
        end

        test "a donated argument's memory becomes the output of its type and shape; the rest stays", %{c: c} do
          step = fn p, g -> {Nx.subtract(p, Nx.multiply(g, 0.5)), Nx.sum(g)} end
          jit = Nx.Defn.jit(step, compiler: Plugboard.Nx, client: c)
          p = on(c, Nx.iota({256}, type: :f32))
          g = on(c, Nx.broadcast(Nx.tensor(2.0), {256}))
          before = address(p)

          {p2, s} = jit.(Nx.donatable(p), g)
          assert address(p2) == before
          assert Nx.to_flat_list(p2) == Enum.map(0..255, &(&1 - 1.0))
          assert Nx.to_number(s) == 512.0
          assert_donated(p)
          # Nothing else is consumed: g, and the result itself (never donatable).
          assert Nx.to_flat_list(g) == List.duplicate(2.0, 256)
          refute Nx.donatable?(p2)

          # The same call without the mark compiles its own program and leaves its argument alone.
          {p3, _} = jit.(p2, g)
          assert address(p3) != address(p2)
          assert Nx.to_flat_list(p2) == Enum.map(0..255, &(&1 - 1.0))
          assert Nx.to_flat_list(p3) == Enum.map(0..255, &(&1 - 2.0))
        end
      end
    end

    describe "on the first CPU plugin" do
      setup do
        %{c: client(cpu_plugins() |> hd() |> elem(1))}
      end

      test "the program cache keys on donation", %{c: c} do
        fun = fn x -> Nx.add(x, 1) end
        x = on(c, Nx.iota({8}, type: :f32))
        Nx.Defn.jit_apply(fun, [x], compiler: Plugboard.Nx, client: c)
        Nx.Defn.jit_apply(fun, [Nx.donatable(on(c, x))], compiler: Plugboard.Nx, client: c)
        marks = for {{:program, _, ^fun, [{_, {8}, _, _, mark}], _}, {:ready, _}, _} <- :ets.tab2list(Cache), do: mark
        assert Enum.sort(marks) == [false, true]
      end

      test "a loop donating its state each step runs in the same memory", %{c: c} do
        jit = Nx.Defn.jit(fn w, x -> Nx.add(w, Nx.multiply(x, 0.5)) end, compiler: Plugboard.Nx, client: c)
        x = on(c, Nx.broadcast(Nx.tensor(1.0), {64, 64}))
        w = on(c, Nx.broadcast(Nx.tensor(0.0), {64, 64}))
        start = address(w)
        w = Enum.reduce(1..50, w, fn _, w -> jit.(Nx.donatable(w), x) end)
        assert address(w) == start
        assert Nx.to_flat_list(w) |> Enum.uniq() == [25.0]
      end

      test "a donated argument returned as is, beside another output of its shape", %{c: c} do
        x = on(c, Nx.iota({16}, type: :f32))
        y = on(c, Nx.iota({16}, type: :f32))
        {same, sum} = Nx.Defn.jit_apply(fn x, y -> {x, Nx.add(x, y)} end, [Nx.donatable(x), y], compiler: Plugboard.Nx, client: c)
        assert Nx.to_flat_list(same) == Enum.map(0..15, &(1.0 * &1))
        assert Nx.to_flat_list(sum) == Enum.map(0..15, &(2.0 * &1))
        assert_donated(x)
        assert Nx.to_flat_list(y) == Enum.map(0..15, &(1.0 * &1))
      end

      test "a donated argument with no output of its shape is still given up", %{c: c} do
        x = on(c, Nx.iota({16}, type: :f32))
        assert Nx.to_number(Nx.Defn.jit_apply(&Nx.sum/1, [Nx.donatable(x)], compiler: Plugboard.Nx, client: c)) == 120.0
        assert_donated(x)
      end

      test "what is not a buffer of the call's device is copied, not donated; a buffer passed twice is not donated", %{c: c} do
        add = fn a, b -> Nx.add(a, b) end
        host = Nx.donatable(Nx.iota({16}, type: :f32, backend: Nx.BinaryBackend))
        assert Nx.to_flat_list(Nx.Defn.jit_apply(add, [host, host], compiler: Plugboard.Nx, client: c)) == Enum.map(0..15, &(2.0 * &1))
        assert Nx.to_flat_list(host) == Enum.map(0..15, &(1.0 * &1))

        twice = Nx.donatable(on(c, Nx.iota({16}, type: :f32)))
        assert Nx.to_flat_list(Nx.Defn.jit_apply(add, [twice, twice], compiler: Plugboard.Nx, client: c)) == Enum.map(0..15, &(2.0 * &1))
        assert Nx.to_flat_list(twice) == Enum.map(0..15, &(1.0 * &1))
      end

      test "Nx.Defn.compile with a donatable template donates each call's argument", %{c: c} do
        template = Nx.donatable(Nx.template({4}, {:f, 32}))
        compiled = Nx.Defn.compile(&Nx.multiply(&1, 3), [template], compiler: Plugboard.Nx, client: c)
        x = on(c, Nx.tensor([1.0, 2.0, 3.0, 4.0]))
        before = address(x)
        y = compiled.(Nx.donatable(x))
        assert Nx.to_flat_list(y) == [3.0, 6.0, 9.0, 12.0]
        assert address(y) == before
        assert_donated(x)
      end

      test "a view (of the binary a tensor was made from, of an address) is passed as is, not donated", %{c: c} do
        made = Nx.backend_transfer(Nx.iota({64}, type: :f32), {Plugboard.Nx.Backend, client: c})
        owned = Nx.Defn.jit_apply(&Nx.add(&1, 0), [made], compiler: Plugboard.Nx, client: c)
        at = Nx.from_pointer({Plugboard.Nx.Backend, client: c}, Nx.to_pointer(owned, mode: :local), {:f, 32}, {64})

        for view <- [made, at] do
          out = Nx.Defn.jit_apply(&Nx.add(&1, 1), [Nx.donatable(view)], compiler: Plugboard.Nx, client: c)
          assert address(out) != address(view)
          assert Nx.to_flat_list(view) == Enum.map(0..63, &(1.0 * &1))
        end

        # The same values as a program's output own their memory: donated.
        out = Nx.Defn.jit_apply(&Nx.add(&1, 1), [Nx.donatable(owned)], compiler: Plugboard.Nx, client: c)
        assert Nx.to_flat_list(out) == Enum.map(0..63, &(1.0 + &1))
        assert_donated(owned)
      end

      test "a program split over devices refuses donatable arguments" do
        {:ok, c4} = Plugboard.open(cpu_plugins() |> hd() |> elem(1), [{"cpu_device_count", 2}])
        mesh = %Nx.Mesh{name: "rows", shape: {2}}
        args = for k <- 0..1, do: [Nx.donatable(Nx.iota({2, 2}, type: :f32) |> Nx.add(k))]
        jit = Nx.Defn.shard_jit(&Nx.add(&1, 1), mesh, compiler: Plugboard.Nx, client: c4, input_shardings: [%{0 => [0]}])
        error = assert_raise ArgumentError, fn -> jit.(args) end
        assert Exception.message(error) =~ "donatable"
      end
    end
  end
end
