defmodule Plugboard.CallbackNestedRunTest do
  # A blocking callback that starts an execution on the client whose execution waits for it. XLA's CPU
  # client runs a program it does not run inline (this one: a 256x256 dot before the call) in order
  # with the device's other asynchronous executions, so the new one would queue behind the one
  # waiting for this callback: it is refused at once instead (and works on another client).
  use ExUnit.Case, async: true
  import Plugboard.TestSupport

  @program """
  func.func public @main(%x: tensor<256x256xf32>) -> tensor<256x256xf32> {
    %y = stablehlo.dot %x, %x : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
    %t0 = stablehlo.after_all : !stablehlo.token
    %t1, %s = stablehlo.custom_call @host_nested(%t0, %y) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, tensor<256x256xf32>) -> (!stablehlo.token, tensor<256x256xf32>)
    return %s : tensor<256x256xf32>
  }
  """
  @plus_one """
  func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    %one = stablehlo.constant dense<1.0> : tensor<2xf32>
    %y = stablehlo.add %x, %one : tensor<2xf32>
    return %y : tensor<2xf32>
  }
  """

  for {label, plugin} <- cpu_plugins() do
    test "on #{label}: a run on the same client from inside a blocking callback fails at once; another client's works" do
      {:ok, client} = Plugboard.open(unquote(plugin))
      {:ok, other} = Plugboard.open(unquote(plugin))
      exe = Plugboard.compile!(client, @program, callbacks: ["host_nested"])
      plus_one = Plugboard.compile!(client, @plus_one)
      plus_one_elsewhere = Plugboard.compile!(other, @plus_one)
      x = Plugboard.buffer!(client, f32s(List.duplicate(0.0, 256 * 256)), :f32, {256, 256})
      me = self()

      nested = fn exe, client ->
        fn [t] ->
          a = Plugboard.buffer!(client, f32s([1.0, 2.0]), :f32, {2})
          {micros, result} = :timer.tc(fn -> Plugboard.run(exe, [a]) end)
          send(me, {:nested, micros, with({:ok, [b]} <- result, do: {:ok, to_f32s(Plugboard.to_binary!(b))})})
          t.data
        end
      end

      opts = [callback_timeout: 5_000]
      assert {:ok, [_]} = Plugboard.run(exe, [x], [callbacks: %{"host_nested" => nested.(plus_one, client)}] ++ opts)
      assert_received {:nested, micros, {:error, %Plugboard.Error{code: :failed_precondition, message: m}}}
      assert m =~ "would wait for itself"
      assert micros < 1_000_000

      assert {:ok, [_]} = Plugboard.run(exe, [x], [callbacks: %{"host_nested" => nested.(plus_one_elsewhere, other)}] ++ opts)
      assert_received {:nested, _, {:ok, [2.0, 3.0]}}
      # Outside the callback the same run works.
      assert {:ok, [_]} = Plugboard.run(plus_one, [Plugboard.buffer!(client, f32s([1.0, 2.0]), :f32, {2})])
    end

    test "on #{label}: from inside a blocking callback of a run on device 0, a run on device 1 of the same client works; on device 0 it fails at once" do
      # Each device has its own in-order queue: only the callback's own device would wait for itself.
      {:ok, client} = Plugboard.open(unquote(plugin), [{"cpu_device_count", 2}])
      exe = Plugboard.compile!(client, @program, callbacks: ["host_nested"])
      portable = Plugboard.compile!(client, @plus_one, portable: true)
      on_device_1 = Plugboard.compile!(client, @plus_one, devices: [1])
      x = Plugboard.buffer!(client, f32s(List.duplicate(0.0, 256 * 256)), :f32, {256, 256})
      me = self()

      nested = fn exe, device, run_opts ->
        fn [t] ->
          a = Plugboard.buffer!(client, f32s([1.0, 2.0]), :f32, {2}, device: device)
          {micros, result} = :timer.tc(fn -> Plugboard.run(exe, [a], run_opts) end)
          send(me, {:nested, device, micros, with({:ok, [b]} <- result, do: {:ok, to_f32s(Plugboard.to_binary!(b))})})
          t.data
        end
      end

      opts = [callback_timeout: 5_000]
      assert {:ok, [_]} = Plugboard.run(exe, [x], [callbacks: %{"host_nested" => nested.(portable, 1, device: 1)}] ++ opts)
      assert_received {:nested, 1, _, {:ok, [2.0, 3.0]}}
      # A program compiled for device 1 too.
      assert {:ok, [_]} = Plugboard.run(exe, [x], [callbacks: %{"host_nested" => nested.(on_device_1, 1, device: 1)}] ++ opts)
      assert_received {:nested, 1, _, {:ok, [2.0, 3.0]}}

      assert {:ok, [_]} = Plugboard.run(exe, [x], [callbacks: %{"host_nested" => nested.(portable, 0, device: 0)}] ++ opts)
      assert_received {:nested, 0, micros, {:error, %Plugboard.Error{code: :failed_precondition, message: m}}}
      assert m =~ "would wait for itself"
      assert micros < 1_000_000
    end
  end
end
