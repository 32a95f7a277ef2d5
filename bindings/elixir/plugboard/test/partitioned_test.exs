defmodule Plugboard.PartitionedTest do
  # A program split over several devices (compile/3's partitions:, partitioner:, devices:), run with
  # run_partitioned/3: one argument list per device, one output list per device, each on its device.
  # Not async: terms_test counts live buffers across the VM, and these make and drop some.
  use ExUnit.Case, async: false
  import Plugboard.TestSupport

  # x: f32[4] split over two devices; returns 2x (split as x) and the sum of all of x (on every
  # device: XLA adds the all-reduce).
  @split """
  module @split attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
    func.func public @main(%x: tensor<4xf32> {mhlo.sharding = "{devices=[2]0,1}"}) -> (tensor<4xf32>, tensor<f32>) {
      %two = stablehlo.constant dense<2.0> : tensor<4xf32>
      %y = stablehlo.multiply %x, %two : tensor<4xf32>
      %zero = stablehlo.constant dense<0.0> : tensor<f32>
      %s = "stablehlo.reduce"(%x, %zero) <{dimensions = array<i64: 0>}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %t = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %t : tensor<f32>
      }) : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
      return %y, %s : tensor<4xf32>, tensor<f32>
    }
  }
  """

  for {label, path} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        {:ok, c} = Plugboard.open(unquote(path), [{"cpu_device_count", 4}])
        %{c: c}
      end

      test "each device runs its part; the outputs come back per device, on it", %{c: c} do
        exe = Plugboard.compile!(c, @split, partitions: 2, partitioner: :gspmd, devices: [3, 1])
        assert exe.devices == [3, 1]
        x3 = Plugboard.buffer!(c, f32s([1.0, 2.0]), :f32, {2}, device: 3)
        x1 = Plugboard.buffer!(c, f32s([3.0, 4.0]), :f32, {2}, device: 1)
        assert {:ok, [[y3, s3], [y1, s1]]} = Plugboard.run_partitioned(exe, [[x3], [x1]])
        assert {y3.device, s3.device, y1.device, s1.device} == {3, 3, 1, 1}
        assert {y3.shape, s3.shape} == {{2}, {}}
        assert to_f32s(Plugboard.to_binary!(y3)) == [2.0, 4.0]
        assert to_f32s(Plugboard.to_binary!(y1)) == [6.0, 8.0]
        # The sum of both devices' parts, on each.
        assert to_f32s(Plugboard.to_binary!(s3)) == [10.0]
        assert to_f32s(Plugboard.to_binary!(s1)) == [10.0]
      end

      test "loaded from the compile cache, a split program keeps its devices", %{c: c} do
        # A program no run compiled before (the cache folder outlives the VM): a comment makes it new.
        program = "// #{Base.encode16(:crypto.strong_rand_bytes(8))}\n" <> @split
        first = Plugboard.compile!(c, program, partitions: 2, partitioner: :gspmd, devices: [2, 0])
        second = Plugboard.compile!(c, program, partitions: 2, partitioner: :gspmd, devices: [2, 0])
        assert {first.source, second.source} == {:compiled, :compile_cache}
        assert second.devices == [2, 0]
        # Another device assignment is another program.
        assert Plugboard.compile!(c, program, partitions: 2, partitioner: :gspmd, devices: [1, 3]).source == :compiled
        x2 = Plugboard.buffer!(c, f32s([1.0, 2.0]), :f32, {2}, device: 2)
        x0 = Plugboard.buffer!(c, f32s([3.0, 4.0]), :f32, {2}, device: 0)
        assert {:ok, [[y2, s2], [y0, s0]]} = Plugboard.run_partitioned(second, [[x2], [x0]])
        assert {y2.device, y0.device} == {2, 0}
        assert to_f32s(Plugboard.to_binary!(y0)) == [6.0, 8.0]
        assert to_f32s(Plugboard.to_binary!(s2)) == [10.0] and to_f32s(Plugboard.to_binary!(s0)) == [10.0]
      end

      test "donated arguments are given up on every device", %{c: c} do
        exe = Plugboard.compile!(c, @split, partitions: 2, partitioner: :gspmd)
        assert exe.devices == [0, 1]
        x0 = Plugboard.buffer!(c, f32s([1.0, 2.0]), :f32, {2}, device: 0, copy: true)
        x1 = Plugboard.buffer!(c, f32s([3.0, 4.0]), :f32, {2}, device: 1, copy: true)
        assert {:ok, [[y0, _], [_, _]]} = Plugboard.run_partitioned(exe, [[x0], [x1]], donate: [0])
        assert to_f32s(Plugboard.to_binary!(y0)) == [2.0, 4.0]
        assert {:error, %Plugboard.Error{}} = Plugboard.to_binary(x0)
        assert {:error, %Plugboard.Error{}} = Plugboard.to_binary(x1)
      end

      test "what is wrong is named", %{c: c} do
        exe = Plugboard.compile!(c, @split, partitions: 2, partitioner: :gspmd)
        x0 = Plugboard.buffer!(c, f32s([1.0, 2.0]), :f32, {2}, device: 0)
        x2 = Plugboard.buffer!(c, f32s([1.0, 2.0]), :f32, {2}, device: 2)
        assert {:error, e} = Plugboard.run(exe, [x0])
        assert e.message =~ "run it on all of them at once (execute_partitioned)"
        assert {:error, e} = Plugboard.run_partitioned(exe, [[x0]])
        assert e.message =~ "1 argument list(s) given"
        assert {:error, e} = Plugboard.run_partitioned(exe, [[x0], [x2]])
        assert Exception.message(e) =~ "argument list 1 (device 1)"
        assert e.message =~ "is on device 2"
        assert {:error, e} = Plugboard.compile(c, @split, partitions: 2)
        assert e.message =~ "partitioner: must be :gspmd or :shardy"
        assert {:error, e} = Plugboard.compile(c, @split, partitions: 2, partitioner: :gspmd, devices: [0])
        assert e.message =~ "names 1 device(s) for 2 partition(s)"
        assert {:error, e} = Plugboard.compile(c, @split, partitions: 2, partitioner: :gspmd, devices: [0, 7])
        assert e.code == :invalid_argument
        assert Exception.message(e) =~ "device 7"
        assert {:error, e} = Plugboard.compile(c, @split, partitions: 2, partitioner: :gspmd, portable: true)
        assert e.message =~ "a portable program runs on one device"
        assert {:error, e} = Plugboard.run_partitioned(exe, [])
        assert e.code == :invalid_argument
      end
    end
  end
end
