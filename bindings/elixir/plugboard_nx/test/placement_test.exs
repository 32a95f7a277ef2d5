defmodule Plugboard.Nx.PlacementTest do
  # Where programs run, as EXLA users expect: `device_id:` in jit and backend options, one Nx.Serving
  # partition per device, clients named in configuration with their create options.
  use ExUnit.Case, async: false
  import Plugboard.Nx.Case

  {_, path} = hd(cpu_plugins())
  @plugin path

  setup_all do
    {:ok, c} = Plugboard.open(@plugin, [{"cpu_device_count", 4}])
    %{c: c}
  end

  defp device_of(%Nx.Tensor{data: %Plugboard.Nx.Backend{buffer: b}}), do: b.device

  test "device_id: runs the program on that device; its arguments are copied there", %{c: c} do
    x = Nx.tensor([1.0, 2.0], backend: {Plugboard.Nx.Backend, client: c})
    assert device_of(x) == 0
    y = Nx.Defn.jit_apply(&Nx.multiply(&1, 3), [x], compiler: Plugboard.Nx, client: c, device_id: 2)
    assert device_of(y) == 2
    assert Nx.to_flat_list(y) == [3.0, 6.0]
  end

  test "the backend's device_id: tensors made there, eager operations run there", %{c: c} do
    x = Nx.tensor([1, 2, 3], backend: {Plugboard.Nx.Backend, client: c, device_id: 3})
    assert device_of(x) == 3
    y = Nx.add(x, x)
    assert device_of(y) == 3
    assert Nx.to_flat_list(y) == [2, 4, 6]
  end

  test "Nx.Serving partitions: one per device, each with its device_id", %{c: c} do
    opts = Plugboard.Nx.__partitions_options__(client: c)
    assert Enum.map(opts, & &1[:device_id]) == [0, 1, 2, 3]
    assert length(Plugboard.Nx.__partitions_options__(client: c, max_concurrency: 2)) == 2
  end

  test "clients named in config, with their create options; bad names and options say what is wrong" do
    Application.put_env(:plugboard_nx, :clients, two: [plugin: @plugin, create_options: [{"cpu_device_count", 2}]], bad: [plugin: @plugin, cuda: true])
    on_exit(fn -> Application.delete_env(:plugboard_nx, :clients) end)

    y = Nx.Defn.jit_apply(&Nx.add(&1, 1), [Nx.tensor(1)], compiler: Plugboard.Nx, client: :two)
    assert Nx.to_number(y) == 2
    two = Plugboard.Nx.client!(client: :two)
    assert {:ok, [_, _]} = Plugboard.devices(two)
    # Started once, whoever asks.
    assert Plugboard.Nx.client!(client: :two) == two

    assert_raise ArgumentError, ~r/no client named :nope.*configured: \[:two, :bad\]/, fn -> Plugboard.Nx.client!(client: :nope) end
    assert_raise ArgumentError, ~r/client :bad: unknown option\(s\) \[:cuda\]/, fn -> Plugboard.Nx.client!(client: :bad) end
  end
end
