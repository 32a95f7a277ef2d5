defmodule Plugboard.Nx.PointerTest do
  # Nx.to_pointer/2 and Nx.from_pointer/5 on Plugboard.Nx.Backend, as EXLA offers them: the device
  # address of a tensor's buffer, and a tensor viewing memory someone else owns.
  use ExUnit.Case, async: true
  import Plugboard.Nx.Case

  for {label, path} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        %{c: client(unquote(path))}
      end

      test "a tensor's pointer, viewed as a tensor again, reads the same values", %{c: c} do
        t = Nx.tensor([[1.0, 2.0], [3.0, 4.0]], backend: {Plugboard.Nx.Backend, client: c})
        pointer = Nx.to_pointer(t, mode: :local)
        assert %Nx.Pointer{kind: :local, address: address, data_size: 16} = pointer
        assert is_integer(address) and address > 0
        view = Nx.from_pointer({Plugboard.Nx.Backend, client: c}, pointer, {:f, 32}, {2, 2}, names: [:i, :j])
        assert view.names == [:i, :j]
        assert Nx.to_flat_list(Nx.add(view, 1)) == [2.0, 3.0, 4.0, 5.0]
        # t is still in use here: the view does not own its memory.
        assert Nx.to_flat_list(t) == [1.0, 2.0, 3.0, 4.0]
      end

      test "a shape larger than the pointer's data_size, a pointer without one, and the address 0 are refused", %{c: c} do
        t = Nx.tensor([[1.0, 2.0], [3.0, 4.0]], backend: {Plugboard.Nx.Backend, client: c})
        pointer = Nx.to_pointer(t, mode: :local)
        backend = {Plugboard.Nx.Backend, client: c}

        for {type, shape} <- [{{:f, 32}, {3, 2}}, {{:f, 64}, {2, 2}}, {{:f, 32}, {5}}] do
          assert_raise ArgumentError, ~r/shape .* needs \d+ bytes, more than the 16 bytes/, fn ->
            Nx.from_pointer(backend, pointer, type, shape)
          end
        end

        assert_raise ArgumentError, ~r/needs 16 bytes, more than the 8 bytes/, fn ->
          Nx.from_pointer(backend, %{pointer | data_size: 8}, {:f, 32}, {2, 2})
        end

        assert_raise ArgumentError, ~r/data_size must be the number of bytes at its address .* got nil/, fn ->
          Nx.from_pointer(backend, %{pointer | data_size: nil}, {:f, 32}, {2, 2})
        end

        assert_raise ArgumentError, ~r/address 0 is not device memory/, fn ->
          Nx.from_pointer(backend, %{pointer | address: 0}, {:f, 32}, {2, 2})
        end

        # Fewer bytes than data_size is a view of the first ones.
        assert Nx.to_flat_list(Nx.from_pointer(backend, pointer, {:f, 32}, {3})) == [1.0, 2.0, 3.0]
        assert Nx.to_flat_list(t) == [1.0, 2.0, 3.0, 4.0]
      end

      test "IPC pointers and pointers without an address are refused with what is supported", %{c: c} do
        t = Nx.tensor([1], backend: {Plugboard.Nx.Backend, client: c})
        assert_raise ArgumentError, ~r/mode :ipc is not supported \(only :local/, fn -> Nx.to_pointer(t, mode: :ipc) end
        ipc = %Nx.Pointer{kind: :ipc, handle: "x", data_size: 4}
        assert_raise ArgumentError, ~r/only local pointers/, fn -> Nx.from_pointer({Plugboard.Nx.Backend, client: c}, ipc, {:s, 32}, {1}) end
      end
    end
  end
end
