defmodule Plugboard.PointerTest do
  # Device addresses: device_pointer/1 and buffer_from_pointer/5 (views of device memory that
  # plugboard does not own), on the three CPU plugins and on a fault plugin too old for them.
  use ExUnit.Case, async: true
  import Plugboard.TestSupport
  alias Plugboard.Error

  for {label, plugin} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        {:ok, client} = Plugboard.open(unquote(plugin))
        %{client: client}
      end

      test "a buffer's device pointer is a stable, non-zero address", %{client: c} do
        x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4}, copy: true)
        assert {:ok, address} = Plugboard.device_pointer(x)
        assert is_integer(address) and address > 0
        assert Plugboard.device_pointer(x) == {:ok, address}
      end

      test "a view of a buffer's address reads its bytes, runs, and is never donatable", %{client: c} do
        data = f32s(Enum.map(1..12, &(&1 * 1.5)))
        source = Plugboard.buffer!(c, data, :f32, {3, 4}, copy: true)
        {:ok, address} = Plugboard.device_pointer(source)
        assert {:ok, view} = Plugboard.buffer_from_pointer(c, address, :f32, {3, 4})
        assert {view.dtype, view.shape, view.device} == {:f32, {3, 4}, 0}
        assert Plugboard.to_binary!(view) == data
        assert Plugboard.device_pointer(view) == {:ok, address}

        # Viewed as another shape of the same bytes: the first row only.
        {:ok, row} = Plugboard.buffer_from_pointer(c, address, :f32, {4}, device: 0)
        assert to_f32s(Plugboard.to_binary!(row)) == [1.5, 3.0, 4.5, 6.0]

        exe = Plugboard.compile!(c, add_program())
        assert [y] = Plugboard.run!(exe, [row, row])
        assert to_f32s(Plugboard.to_binary!(y)) == [3.0, 6.0, 9.0, 12.0]
        assert {:error, %Error{code: :failed_precondition, message: message}} = Plugboard.run(exe, [row, row], donate: [0])
        assert message =~ "view of device memory it does not own"
        assert Plugboard.valid?(row)
        assert Plugboard.to_binary!(source) == data
      end

      test "a view of an adopted binary's buffer reads the binary while the buffer is kept", %{client: c} do
        # A binary over 64 bytes is adopted; where its bytes are 64-byte aligned the buffer's memory is
        # the binary's own. Either way the view reads what the buffer holds, as long as the buffer's
        # term is still referenced: a variable never used again may be collected (and its memory with it).
        data = f32s(Enum.to_list(1..32))
        x = Plugboard.buffer!(c, data, :f32, {32})
        {:ok, address} = Plugboard.device_pointer(x)
        {:ok, view} = Plugboard.buffer_from_pointer(c, address, :f32, {32})
        :erlang.garbage_collect()
        assert Plugboard.to_binary!(view) == data
        assert Plugboard.valid?(x)
      end

      test "bad addresses, shapes and devices are errors", %{client: c} do
        x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4}, copy: true)
        {:ok, address} = Plugboard.device_pointer(x)
        assert {:error, %Error{code: :invalid_argument, message: m0}} = Plugboard.buffer_from_pointer(c, 0, :f32, {4})
        assert m0 =~ "address 0"
        assert {:error, %Error{code: :invalid_argument}} = Plugboard.buffer_from_pointer(c, -8, :f32, {4})
        assert {:error, %Error{code: :invalid_argument, message: m1}} = Plugboard.buffer_from_pointer(c, 18_446_744_073_709_551_616, :f32, {4})
        assert m1 =~ "out of range"
        assert {:error, %Error{code: :invalid_argument}} = Plugboard.buffer_from_pointer(c, address, :f32, {4}, device: 9)
        assert {:error, %Error{code: :invalid_argument}} = Plugboard.buffer_from_pointer(c, address, :f32, {4}, nope: 1)
        assert {:error, %Error{code: :invalid_argument}} = Plugboard.buffer_from_pointer(c, address, :nope, {4})
        assert {:error, %Error{code: :invalid_argument}} = Plugboard.buffer_from_pointer(c, address, :f32, [4])
        # XLA's CPU client refuses a misaligned address: its error comes back.
        assert {:error, %Error{code: :invalid_argument, message: m2}} = Plugboard.buffer_from_pointer(c, address + 4, :f32, {3})
        assert m2 =~ "CreateViewOfDeviceBuffer"
        assert {:error, %Error{code: :invalid_argument}} = Plugboard.device_pointer(:nope)
      end

      test "size: bounds what a view reads: a shape needing more bytes is refused, naming both", %{client: c} do
        x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4}, copy: true)
        {:ok, address} = Plugboard.device_pointer(x)
        assert {:ok, view} = Plugboard.buffer_from_pointer(c, address, :f32, {2, 2}, size: 16)
        assert Plugboard.to_binary!(view) == f32s([1, 2, 3, 4])
        assert {:ok, _} = Plugboard.buffer_from_pointer(c, address, :f32, {3}, size: 16)

        for {dtype, shape} <- [{:f32, {5}}, {:f64, {4}}, {:f32, {2, 4}}] do
          assert {:error, %Error{code: :invalid_argument, message: m}} = Plugboard.buffer_from_pointer(c, address, dtype, shape, size: 16)
          assert m =~ "shape" and m =~ "more than the 16 bytes", m
        end

        assert {:error, %Error{code: :invalid_argument, message: m}} = Plugboard.buffer_from_pointer(c, address, :f32, {4}, size: 0)
        assert m =~ "needs 16 bytes"

        for size <- [-1, 1.5, :all, 18_446_744_073_709_551_616] do
          assert {:error, %Error{code: :invalid_argument, message: m}} = Plugboard.buffer_from_pointer(c, address, :f32, {4}, size: size)
          assert m =~ "size"
        end

        assert {:error, %Error{code: :invalid_argument, message: m}} = Plugboard.buffer_from_pointer(c, 0, :f32, {4}, size: 16)
        assert m =~ "address 0"
        assert Plugboard.valid?(x)
      end

      test "a freed buffer has no device pointer", %{client: c} do
        x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4}, copy: true)
        :ok = Plugboard.free(x)
        assert {:error, %Error{code: :failed_precondition, message: message}} = Plugboard.device_pointer(x)
        assert message =~ "freed"
      end
    end
  end

  test "a plugin whose PJRT_Api ends before the functions: :unimplemented, naming plugin and function" do
    plugin = fault_plugin("fault_no_device_address")
    {:ok, c} = Plugboard.open(plugin)
    x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4}, copy: true)
    assert {:error, %Error{code: :unimplemented, message: m1}} = Plugboard.device_pointer(x)
    assert m1 =~ "libfault_no_device_address.so" and m1 =~ "PJRT_Buffer_UnsafePointer"
    assert {:error, %Error{code: :unimplemented, message: m2}} = Plugboard.buffer_from_pointer(c, 4096, :f32, {4})
    assert m2 =~ "libfault_no_device_address.so" and m2 =~ "PJRT_Client_CreateViewOfDeviceBuffer"
  end
end
