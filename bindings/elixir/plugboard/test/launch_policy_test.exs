defmodule Plugboard.LaunchPolicyTest do
  # Which executables may start on the calling scheduler (Plugboard.Executable's `launch`,
  # c_src/compile_policy.cpp). A collective or an SPMD program waits on its peers (and, with a
  # key-value store attached, on the store): started on a scheduler, it would hold it for as long.
  use ExUnit.Case, async: true
  import Plugboard.TestSupport

  # One op on x: f32[4] -> f32[4], over a single replica (replica_groups [[0]]): it compiles and runs
  # on one CPU device, yet names the collective. (collective_broadcast is on the list too, but XLA:CPU
  # does not compile it.)
  @sum_region """
  ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    })
  """
  @collectives %{
    "all_reduce" => ~s|"stablehlo.all_reduce"(%x) #{@sum_region} {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<4xf32>) -> tensor<4xf32>|,
    "all_gather" => ~s|"stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64, replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<4xf32>) -> tensor<4xf32>|,
    "all_to_all" => ~s|"stablehlo.all_to_all"(%x) {split_dimension = 0 : i64, concat_dimension = 0 : i64, split_count = 1 : i64, replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<4xf32>) -> tensor<4xf32>|,
    "collective_permute" => ~s|"stablehlo.collective_permute"(%x) {source_target_pairs = dense<[[0, 0]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>|,
    "reduce_scatter" => ~s|"stablehlo.reduce_scatter"(%x) #{@sum_region} {scatter_dimension = 0 : i64, replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<4xf32>) -> tensor<4xf32>|
  }

  defp one_op(module_attributes, arg_attributes, op) do
    """
    module @m #{module_attributes} {
      func.func public @main(%x: tensor<4xf32>#{arg_attributes}) -> tensor<4xf32> {
        %r = #{op}
        return %r : tensor<4xf32>
      }
    }
    """
  end

  defp plain(module_attributes \\ "", arg_attributes \\ ""),
    do: one_op(module_attributes, arg_attributes, "stablehlo.add %x, %x : tensor<4xf32>")

  for {label, path} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        {:ok, c} = Plugboard.open(unquote(path), [{"cpu_device_count", 2}])
        %{c: c}
      end

      test "a plain small program starts inline (the control for what follows)", %{c: c} do
        exe = Plugboard.compile!(c, plain())
        assert exe.launch == :inline
        # JAX writes one partition and one replica into every module: that alone changes nothing.
        assert Plugboard.compile!(c, plain("attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32}")).launch == :inline
        x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4})
        assert [y] = Plugboard.run!(exe, [x])
        assert to_f32s(Plugboard.to_binary!(y)) == [2.0, 4.0, 6.0, 8.0]
      end

      for {op, text} <- @collectives do
        test "#{op} launches on a thread, never inline", %{c: c} do
          exe = Plugboard.compile!(c, one_op("", "", unquote(text)), name: unquote(op))
          assert exe.launch == :thread, "#{unquote(op)} would start on the calling scheduler"
          x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4})
          assert {:ok, [_]} = Plugboard.run(exe, [x])
        end
      end

      test "a module of several partitions or replicas launches on a thread", %{c: c} do
        for attributes <- ["attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32}",
                           "attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32}"] do
          # Compiled for one device (no partitions:) the module's own count is still what it says.
          assert Plugboard.compile!(c, plain(attributes)).launch == :thread, attributes
        end

        exe = Plugboard.compile!(c, plain("attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32}", ~s| {mhlo.sharding = "{devices=[2]0,1}"}|),
                                 partitions: 2, partitioner: :gspmd)
        assert exe.devices == [0, 1]
        assert exe.launch == :thread
      end

      test "a sharding that may split an array launches on a thread", %{c: c} do
        exe = Plugboard.compile!(c, plain("", ~s| {mhlo.sharding = "{devices=[2]0,1}"}|))
        assert exe.launch == :thread
      end

      test "a single-device JAX program (replicated shardings) starts inline", %{c: c} do
        # What jax.jit(f).lower(x).as_text() writes for one device: one partition and replica, the
        # argument and the result "{replicated}".
        program = """
        module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
          func.func public @main(%arg0: tensor<4xf32> {mhlo.sharding = "{replicated}"}) -> (tensor<4xf32> {jax.result_info = "result", mhlo.sharding = "{replicated}"}) {
            %0 = stablehlo.add %arg0, %arg0 : tensor<4xf32>
            return %0 : tensor<4xf32>
          }
        }
        """

        exe = Plugboard.compile!(c, program)
        assert exe.devices == [0]
        assert exe.launch == :inline, "a one-device program with replicated shardings would go to a thread"
        x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4})
        assert [y] = Plugboard.run!(exe, [x])
        assert to_f32s(Plugboard.to_binary!(y)) == [2.0, 4.0, 6.0, 8.0]
        # Whole on one device too: maximal.
        assert Plugboard.compile!(c, plain("", ~s| {mhlo.sharding = "{maximal device=0}"}|)).launch == :inline
      end
    end
  end
end
