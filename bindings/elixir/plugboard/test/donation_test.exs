defmodule Plugboard.DonationTest do
  # Donation reaches the plugin (issue 35, item 3): a donated argument's memory becomes the output
  # the program aliases to it, on every CPU plugin; an argument not donated keeps its memory even when
  # the program declares the alias; nothing but the donated argument is consumed.
  use ExUnit.Case, async: true
  import Plugboard.TestSupport
  alias Plugboard.Error

  # x + y, the first parameter declared as the output's alias (as jax.jit(donate_argnums=0) lowers it),
  # or as a donor the compiler may give to any output of its shape (jax.buffer_donor).
  defp aliasing_add(attribute) do
    """
    func.func public @main(%a: tensor<1024xf32> {#{attribute}}, %b: tensor<1024xf32>) -> tensor<1024xf32> {
      %0 = stablehlo.add %a, %b : tensor<1024xf32>
      return %0 : tensor<1024xf32>
    }
    """
  end

  defp ones(c), do: Plugboard.buffer!(c, f32s(List.duplicate(1.0, 1024)), :f32, {1024}, copy: true)

  for {label, plugin} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        {:ok, client} = Plugboard.open(unquote(plugin))
        %{client: client}
      end

      for attribute <- ["tf.aliasing_output = 0 : i32", "jax.buffer_donor = true"] do
        test "a donated argument's memory becomes the aliased output (#{attribute})", %{client: c} do
          exe = Plugboard.compile!(c, aliasing_add(unquote(attribute)), compile_cache: false)
          x = ones(c)
          y = ones(c)
          {:ok, x_address} = Plugboard.device_pointer(x)
          {:ok, y_address} = Plugboard.device_pointer(y)

          # Not donated: the program's alias does not take the argument; the output is new memory.
          [kept] = Plugboard.run!(exe, [x, y])
          assert {:ok, kept_address} = Plugboard.device_pointer(kept)
          refute kept_address in [x_address, y_address]
          assert Plugboard.valid?(x) and Plugboard.to_binary!(x) == f32s(List.duplicate(1.0, 1024))

          # Donated: the output is written where x was, and x is gone; y is untouched.
          [z] = Plugboard.run!(exe, [x, y], donate: [0])
          assert {:ok, ^x_address} = Plugboard.device_pointer(z)
          assert Plugboard.to_binary!(z) == f32s(List.duplicate(2.0, 1024))
          refute Plugboard.valid?(x)
          assert Plugboard.valid?(y) and Plugboard.to_binary!(y) == f32s(List.duplicate(1.0, 1024))
          for use <- [fn -> Plugboard.to_binary(x) end, fn -> Plugboard.device_pointer(x) end, fn -> Plugboard.run(exe, [x, y]) end] do
            assert {:error, %Error{code: :failed_precondition, message: m}} = use.()
            assert m =~ "donated"
          end

          # A loop that donates its state each step runs in the same memory.
          state =
            Enum.reduce(1..20, z, fn _, s ->
              [next] = Plugboard.run!(exe, [s, y], donate: [0])
              next
            end)

          assert {:ok, ^x_address} = Plugboard.device_pointer(state)
          assert Plugboard.to_binary!(state) == f32s(List.duplicate(22.0, 1024))
        end
      end

      test "donatable?/1: a buffer owning its memory, until it is donated or freed; never a view", %{client: c} do
        exe = Plugboard.compile!(c, aliasing_add("tf.aliasing_output = 0 : i32"), compile_cache: false)
        x = ones(c)
        y = ones(c)
        assert Plugboard.donatable?(x)
        [z] = Plugboard.run!(exe, [x, y], donate: [0])
        refute Plugboard.donatable?(x)
        assert Plugboard.donatable?(z) and Plugboard.donatable?(y)
        :ok = Plugboard.free(y)
        refute Plugboard.donatable?(y)

        # Views: of an immutable binary (buffer/5 adopts one over 64 bytes), of an address.
        view = Plugboard.buffer!(c, f32s(List.duplicate(1.0, 1024)), :f32, {1024})
        {:ok, address} = Plugboard.device_pointer(z)
        {:ok, at} = Plugboard.buffer_from_pointer(c, address, :f32, {1024})
        for v <- [view, at] do
          refute Plugboard.donatable?(v)
          assert {:error, %Error{code: :failed_precondition, message: m}} = Plugboard.run(exe, [v, z], donate: [0])
          assert m =~ "argument 0" and m =~ "cannot be donated"
          assert Plugboard.valid?(v)
        end

        assert Plugboard.donatable?(Plugboard.buffer!(c, f32s(List.duplicate(1.0, 1024)), :f32, {1024}, copy: true))
      end

      # A read that has answered holds nothing: its job kept the buffer until after it sent the bytes,
      # so a donation right after to_binary!/1 returned was refused now and then as "in use".
      test "a buffer read by to_binary!/1 can be donated as soon as the read returns", %{client: c} do
        exe = Plugboard.compile!(c, aliasing_add("tf.aliasing_output = 0 : i32"), compile_cache: false)
        y = ones(c)

        # Eight callers at once keep the plugin's threads busy, which widens the window the race needs.
        refused =
          1..8
          |> Task.async_stream(
            fn _ ->
              Enum.count(1..250, fn _ ->
                x = ones(c)
                Plugboard.to_binary!(x)
                match?({:error, _}, Plugboard.run(exe, [x, y], donate: [0]))
              end)
            end,
            timeout: 120_000
          )
          |> Enum.reduce(0, fn {:ok, n}, sum -> sum + n end)

        assert refused == 0, "#{refused} of 2000 donations right after a read were refused"
      end
    end
  end
end
