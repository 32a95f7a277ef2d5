defmodule Plugboard.CreateOptionsTest do
  # A create option plugboard knows is checked before the plugin sees it (issue 34): the hostile
  # tester's values killed the VM on the 0.106 plugin (SIGSEGV for -1, ±2^31, "4", 4.5; SIGABRT for
  # true) and gave a client without devices on every plugin (0). Each is an {:error, ...} naming the
  # option, the value, what is allowed and the plugin, and the VM goes on to open a good client.
  use ExUnit.Case, async: true
  import Plugboard.TestSupport
  alias Plugboard.Error

  @bad [-1, 0, 2 ** 31, -(2 ** 31), 4097, "4", 4.5, true, [4]]

  for {label, plugin} <- cpu_plugins() do
    test "#{label}: every bad cpu_device_count is refused, and a good one opens" do
      plugin = unquote(plugin)

      for value <- @bad do
        assert {:error, %Error{code: :invalid_argument, message: m}} = Plugboard.open(plugin, [{"cpu_device_count", value}]),
               "cpu_device_count #{inspect(value)} was not refused"

        assert m =~ "create option cpu_device_count = "
        assert m =~ "must be an integer in 1..4096"
        assert m =~ plugin
      end

      assert {:ok, client} = Plugboard.open(plugin, [{"cpu_device_count", 2}])
      assert {:ok, [_, _]} = Plugboard.devices(client)
    end
  end

  test "the refusal spells the value and its type" do
    plugin = first_plugin()
    assert {:error, %Error{message: m}} = Plugboard.open(plugin, [{"cpu_device_count", "4"}])
    assert m =~ ~s[cpu_device_count = "4" (a string)]
    assert {:error, %Error{message: m}} = Plugboard.open(plugin, [{"cpu_device_count", 4.5}])
    assert m =~ "cpu_device_count = 4.5 (a float)"
    assert {:error, %Error{message: m}} = Plugboard.open(plugin, [{"cpu_device_count", true}], timeout: 60_000)
    assert m =~ "cpu_device_count = true (a boolean)"
  end
end
