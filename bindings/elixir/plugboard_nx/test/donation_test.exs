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

      test "to_mlir/2 shows the aliases the jit compiles: a donatable argument aliased to its output" do
        fun = fn w, x -> {Nx.add(w, x), Nx.sum(x)} end
        w = Nx.iota({8}, type: :f32)
        assert Plugboard.Nx.to_mlir(fun, [Nx.donatable(w), w]) =~ ~r/%arg0: tensor<8xf32> \{tf.aliasing_output = 0 : i32\}/
        refute Plugboard.Nx.to_mlir(fun, [w, w]) =~ "aliasing_output"
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
        # A result is never donatable, not even a donated argument returned as is: a later call
        # without the mark leaves it alone.
        refute Nx.donatable?(same)
        assert Nx.to_number(Nx.Defn.jit_apply(&Nx.sum/1, [same], compiler: Plugboard.Nx, client: c)) == 120.0
        assert Nx.to_flat_list(same) == Enum.map(0..15, &(1.0 * &1))
      end

      test "eager operations on a marked tensor do not donate it: the mark is for the next jit or compile call", %{c: c} do
        x = Nx.donatable(on(c, Nx.iota({16}, type: :f32)))
        # variance reads its argument twice (mean(x), then x - mean).
        assert Nx.to_number(Nx.variance(x)) == 21.25
        assert Nx.to_number(Nx.sum(x)) == 120.0
        assert Nx.shape(Nx.concatenate([x, Nx.iota({2}, type: :f32)])) == {18}
        assert Nx.to_flat_list(x) == Enum.map(0..15, &(1.0 * &1))
        assert Nx.donatable?(x)
        assert Nx.to_flat_list(Nx.Defn.jit_apply(&Nx.add(&1, 1), [x], compiler: Plugboard.Nx, client: c)) == Enum.map(1..16, &(1.0 * &1))
        assert_donated(x)
      end

      test "outputs written into donated memory are not counted as new memory (BufferPressure)", %{c: c} do
        # 128 KiB outputs: over BufferPressure's threshold for counting.
        jit = Nx.Defn.jit(fn x -> {Nx.add(x, 1), Nx.multiply(x, 2)} end, compiler: Plugboard.Nx, client: c)
        x = on(c, Nx.iota({32_768}, type: :f32))
        Process.put(Plugboard.Nx.BufferPressure, 0)
        {a, _} = jit.(x)
        assert Process.get(Plugboard.Nx.BufferPressure) == 2 * 131_072
        Process.put(Plugboard.Nx.BufferPressure, 0)
        # One output takes the donated memory, the other is new.
        {_, _} = jit.(Nx.donatable(a))
        assert_donated(a)
        assert Process.get(Plugboard.Nx.BufferPressure) == 131_072
      end

      # A 32 MB read takes long enough to overlap the call most times: before, 8 of 20 calls raised
      # "argument 0 is in use".
      @tag timeout: 180_000
      test "an argument another process is reading at the time of the call is passed as is, not refused", %{c: c} do
        opts = [compiler: Plugboard.Nx, client: c]
        jit = Nx.Defn.jit(&Nx.multiply(&1, 2), opts)
        base = on(c, Nx.iota({8_000_000}, type: :f32))

        outcomes =
          for i <- 1..20 do
            x = Nx.Defn.jit_apply(&Nx.add(&1, i), [base], opts)
            me = self()

            spawn_link(fn ->
              send(me, :reading)
              read = try do byte_size(Nx.to_binary(x)) rescue Plugboard.Error -> :donated end
              send(me, {:read, read})
            end)

            assert_receive :reading
            Process.sleep(rem(i, 4))
            y = jit.(Nx.donatable(x))
            assert Nx.to_number(y[7]) == 2.0 * (7 + i)
            assert_receive {:read, read}, 10_000
            assert read in [32_000_000, :donated]
            if Plugboard.valid?(x.data.buffer), do: :passed_as_is, else: :donated
          end

        assert length(outcomes) == 20
      end

      test "an error about an argument names the caller's argument, not the program's parameter", %{c: c} do
        opts = [compiler: Plugboard.Nx, client: c]
        unused = on(c, Nx.iota({4}, type: :f32))
        b = on(c, Nx.iota({8}, type: :f32))
        _ = Nx.Defn.jit_apply(&Nx.add(&1, 1), [Nx.donatable(b)], opts)
        error = assert_raise Plugboard.Error, fn -> Nx.Defn.jit_apply(fn _a, b -> Nx.add(b, 1) end, [unused, b], opts) end
        assert Exception.message(error) =~ "the 2nd argument (buffer f32[8] on device 0) was donated"

        map = %{w: on(c, Nx.iota({8}, type: :f32)), z: b}
        error = assert_raise Plugboard.Error, fn -> Nx.Defn.jit_apply(fn _u, m -> Nx.add(m.w, m.z) end, [unused, map], opts) end
        assert Exception.message(error) =~ "the 2nd argument (at key :z) (buffer f32[8] on device 0) was donated"
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
        assert Exception.message(error) =~ "the 1st argument"
      end
    end
  end

  test "Plugboard.Nx.Arguments.name/2: a flat parameter as the caller's argument and its place in it" do
    t = Nx.template({2}, {:f, 32})
    vars = [t, {t, %{b: t, a: {t, t}}}, t, t, t, t, t, t, t, t, t, t]
    names = for i <- 0..14, do: Plugboard.Nx.Arguments.name(vars, i)

    assert names == [
             "the 1st argument",
             "the 2nd argument (at element 0)",
             "the 2nd argument (at element 1, key :a, element 0)",
             "the 2nd argument (at element 1, key :a, element 1)",
             "the 2nd argument (at element 1, key :b)",
             "the 3rd argument",
             "the 4th argument",
             "the 5th argument",
             "the 6th argument",
             "the 7th argument",
             "the 8th argument",
             "the 9th argument",
             "the 10th argument",
             "the 11th argument",
             "the 12th argument"
           ]

    # The same order as the program's parameters.
    assert length(Nx.Defn.Composite.flatten_list(vars)) == 15
  end
end
