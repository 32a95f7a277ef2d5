defmodule Plugboard.RunTest do
  use ExUnit.Case, async: true
  import Plugboard.TestSupport
  alias Plugboard.Error

  for {label, plugin} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        {:ok, client} = Plugboard.open(unquote(plugin))
        %{client: client}
      end

      test "every dtype goes to a device and back, and through a program, unchanged", %{client: c} do
        for dtype <- dtypes() do
          size = element_size(dtype)
          rows = 3
          cols = 5
          # Deterministic bytes; bool elements must be 0 or 1.
          data =
            for i <- 0..(rows * cols * size - 1), into: <<>>,
              do: if(dtype == :bool, do: <<rem(i, 2)>>, else: <<rem(i * 37 + 11, 251)>>)

          # Valid bit patterns for floats: keep them small numbers rather than NaN payloads.
          data = if dtype in [:f16, :bf16, :f32, :f64, :c64, :c128], do: floats(dtype, rows * cols), else: data

          buffer = Plugboard.buffer!(c, data, dtype, {rows, cols})
          assert {buffer.dtype, buffer.shape} == {dtype, {rows, cols}}
          assert Plugboard.to_binary!(buffer) == data, "round trip of #{dtype}"

          exe = Plugboard.compile!(c, reverse_program(dtype, rows, cols), name: "reverse_#{dtype}")
          assert exe.parameters in [nil, [{dtype, {rows, cols}}]]
          assert exe.results == [{dtype, {rows, cols}}]
          [out] = Plugboard.run!(exe, [buffer])
          row = cols * size
          expected = for(<<r::binary-size(row) <- data>>, do: r) |> Enum.reverse() |> IO.iodata_to_binary()
          assert Plugboard.to_binary!(out) == expected, "reverse of #{dtype}"
        end
      end

      test "the persistent compile cache: compiled, then a hit; compile_cache: false compiles", %{client: c} do
        # A program never compiled before, by any run: the persistent cache folder outlives this VM
        # (the suite runs again under ASan), and unique_integer starts over in each VM, so the text
        # also carries random bytes (a comment: part of the cache key, not of the program).
        k = System.unique_integer([:positive])
        nonce = Base.encode16(:crypto.strong_rand_bytes(8))
        program = """
        // #{nonce}
        func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
          %k = stablehlo.constant dense<#{k}.0> : tensor<4xf32>
          %0 = stablehlo.add %x, %k : tensor<4xf32>
          return %0 : tensor<4xf32>
        }
        """

        first = Plugboard.compile!(c, program, name: "cache_#{k}")
        assert first.source == :compiled
        assert is_float(first.compile_ms) and first.notes == []
        second = Plugboard.compile!(c, program, name: "cache_#{k}")
        assert second.source == :compile_cache
        assert Plugboard.compile!(c, program, compile_cache: false).source == :compiled
        x = Plugboard.buffer!(c, <<1.0::float-32-little, 2.0::float-32-little, 3.0::float-32-little, 4.0::float-32-little>>, :f32, {4})
        [y] = Plugboard.run!(second, [x])
        assert Plugboard.to_binary!(y) == for(v <- [1.0, 2.0, 3.0, 4.0], into: <<>>, do: <<v + k::float-32-little>>)
      end

      test "a large binary is adopted and reads back", %{client: c} do
        n = 524_288
        data = f32s(Enum.map(1..n, &(&1 * 0.5)))
        x = Plugboard.buffer!(c, data, :f32, {n})
        exe = Plugboard.compile!(c, add_program(:f32, [n]))
        [y] = Plugboard.run!(exe, [x, x])
        assert binary_part(Plugboard.to_binary!(y), 0, 12) == f32s([1.0, 2.0, 3.0])
        # A view of an immutable binary is never donated (terms_test.exs: whatever its alignment).
        z = Plugboard.buffer!(c, data, :f32, {n}, copy: true)
        assert {:error, %Error{code: :failed_precondition, message: m}} = Plugboard.run(exe, [x, z], donate: [0])
        assert m =~ "immutable"
        assert Plugboard.valid?(x)
      end

      test "donation takes the buffer", %{client: c} do
        exe = Plugboard.compile!(c, add_program())
        x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4})
        y = Plugboard.buffer!(c, f32s([1, 1, 1, 1]), :f32, {4})
        [z] = Plugboard.run!(exe, [x, y], donate: [0])
        assert to_f32s(Plugboard.to_binary!(z)) == [2.0, 3.0, 4.0, 5.0]
        refute Plugboard.valid?(x)
        assert Plugboard.valid?(y)
        assert {:error, %Error{code: :failed_precondition, message: m}} = Plugboard.run(exe, [x, y])
        assert m =~ "argument 0 (buffer f32[4] on device 0) was donated"
        assert {:error, %Error{code: :failed_precondition}} = Plugboard.to_binary(x)
      end

      test "errors come back as values", %{client: c} do
        assert {:error, %Error{message: m}} = Plugboard.compile(c, "this is not MLIR", name: "junk.mlir")
        assert m =~ "junk.mlir"
        exe = Plugboard.compile!(c, add_program())
        x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4})
        assert {:error, %Error{code: :invalid_argument, message: m}} = Plugboard.run(exe, [x])
        assert m =~ "2 argument(s), 1 given"
        wrong_dtype = Plugboard.buffer!(c, <<1::32, 2::32, 3::32, 4::32>>, :i32, {4})
        assert {:error, %Error{code: :invalid_argument, message: m}} = Plugboard.run(exe, [x, wrong_dtype])
        assert m =~ "argument 1"
        wrong_shape = Plugboard.buffer!(c, f32s([1, 2]), :f32, {2})
        assert {:error, %Error{code: :invalid_argument, message: m}} = Plugboard.run(exe, [wrong_shape, x])
        assert m =~ "argument 0"
        assert {:error, %Error{code: :invalid_argument, message: m}} = Plugboard.buffer(c, <<1, 2, 3>>, :f32, {4})
        assert m =~ "3 bytes" and m =~ "f32[4] needs 16"
        assert {:error, %Error{code: :invalid_argument, message: m}} = Plugboard.buffer(c, <<>>, :f31, {0})
        assert m =~ "dtype"
        assert {:error, %Error{code: :invalid_argument}} = Plugboard.run(exe, [x, :not_a_buffer])
        assert_raise Error, ~r/INVALID_ARGUMENT/, fn -> Plugboard.run!(exe, [x]) end
      end

      test "a closed client refuses work; what it made keeps working", %{client: c} do
        exe = Plugboard.compile!(c, add_program())
        x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4})
        :ok = Plugboard.close(c)
        assert {:error, %Error{code: :failed_precondition, message: "the client was closed"}} =
                 Plugboard.compile(c, add_program())
        assert {:error, %Error{code: :failed_precondition}} = Plugboard.buffer(c, f32s([1, 2, 3, 4]), :f32, {4})
        assert [y] = Plugboard.run!(exe, [x, x])
        assert to_f32s(Plugboard.to_binary!(y)) == [2.0, 4.0, 6.0, 8.0]
      end

      test "executions of a small plain program start inline; loops, callbacks and large results on a thread", %{client: c} do
        assert Plugboard.compile!(c, add_program()).launch == :inline
        assert Plugboard.compile!(c, add_program(:f32, [32_768])).launch == :thread
        assert Plugboard.compile!(c, callback_program(), callbacks: ["plugboard.print", "host_scale"]).launch == :thread
        loop = """
        func.func public @main(%n: tensor<i64>) -> tensor<i64> {
          %zero = stablehlo.constant dense<0> : tensor<i64>
          %r:2 = stablehlo.while(%i = %zero, %limit = %n) : tensor<i64>, tensor<i64>
          cond {
            %c = stablehlo.compare LT, %i, %limit : (tensor<i64>, tensor<i64>) -> tensor<i1>
            stablehlo.return %c : tensor<i1>
          } do {
            %one = stablehlo.constant dense<1> : tensor<i64>
            %next = stablehlo.add %i, %one : tensor<i64>
            stablehlo.return %next, %limit : tensor<i64>, tensor<i64>
          }
          return %r#0 : tensor<i64>
        }
        """
        exe = Plugboard.compile!(c, loop)
        assert exe.launch == :thread
        n = Plugboard.buffer!(c, <<1000::signed-little-64>>, :i64, {})
        assert [r] = Plugboard.run!(exe, [n])
        assert Plugboard.to_binary!(r) == <<1000::signed-little-64>>
      end

      test "run_async hands back a run to await", %{client: c} do
        exe = Plugboard.compile!(c, add_program())
        x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4})
        runs = for _ <- 1..10, do: elem(Plugboard.run_async(exe, [x, x]), 1)
        for run <- runs, do: assert({:ok, [_]} = Plugboard.await(run, 5_000))
      end
    end
  end

  test "the conformance case add_f32 gives JAX's output exactly" do
    dir = Path.expand("../../../../tests/conformance/cases/add_f32", __DIR__)
    {:ok, c} = Plugboard.open(first_plugin())
    [a, b, expected] = Enum.map(["in0.npy", "in1.npy", "out0.npy"], &npy_f32(Path.join(dir, &1)))
    exe = Plugboard.compile!(c, {:file, Path.join(dir, "program.mlirbc")})
    [out] = Plugboard.run!(exe, [Plugboard.buffer!(c, a, :f32, {4, 8}), Plugboard.buffer!(c, b, :f32, {4, 8})])
    assert Plugboard.to_binary!(out) == expected
  end

  # The data of a little-endian f32 .npy file (version 1 header).
  defp npy_f32(path) do
    <<0x93, "NUMPY", 1, 0, header_len::little-16, header::binary-size(header_len), data::binary>> = File.read!(path)
    assert header =~ "'<f4'"
    data
  end

  defp floats(dtype, n) do
    values = for i <- 1..n, do: (i - 8) * 0.25
    case dtype do
      :f16 -> for v <- values, into: <<>>, do: <<v::float-16-little>>
      :bf16 -> for v <- values, into: <<>>, do: (<<_::16, hi::binary-2>> = <<v::float-32-little>>; hi)
      :f32 -> f32s(values)
      :f64 -> for v <- values, into: <<>>, do: <<v::float-64-little>>
      :c64 -> for v <- values, into: <<>>, do: <<v::float-32-little, -v::float-32-little>>
      :c128 -> for v <- values, into: <<>>, do: <<v::float-64-little, -v::float-64-little>>
    end
  end

end
