defmodule Plugboard.LapackTest do
  # Plugboard.declare_lapack/1: plugboard's LAPACK kernels registered on the three CPU plugins and
  # called by a program (stablehlo.custom_call); refused on a plugin without the FFI extension and on
  # a closed client.
  use ExUnit.Case, async: true
  import Plugboard.TestSupport
  alias Plugboard.Error

  @eigh """
  module @lapack_eigh attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
    func.func public @main(%a: tensor<2x2xf64>) -> (tensor<2xf64>, tensor<2x2xf64>) {
      %w, %v = stablehlo.custom_call @plugboard_lapack_dsyevd(%a) {api_version = 4 : i32} : (tensor<2x2xf64>) -> (tensor<2xf64>, tensor<2x2xf64>)
      return %w, %v : tensor<2xf64>, tensor<2x2xf64>
    }
  }
  """

  defp f64s(list), do: for(v <- list, into: <<>>, do: <<v::float-64-little>>)
  defp to_f64s(bin), do: for(<<v::float-64-little <- bin>>, do: v)

  for {label, plugin} <- cpu_plugins() do
    describe "on #{label}" do
      test "declared (twice), a program's custom call runs LAPACK's syevd" do
        {:ok, c} = Plugboard.open(unquote(plugin))
        assert Plugboard.declare_lapack(c) == :ok
        assert Plugboard.declare_lapack(c) == :ok
        exe = Plugboard.compile!(c, @eigh)
        a = Plugboard.buffer!(c, f64s([2.0, 1.0, 1.0, 2.0]), :f64, {2, 2}, copy: true)
        [w, v] = Plugboard.run!(exe, [a])
        assert to_f64s(Plugboard.to_binary!(w)) == [1.0, 3.0]
        # Eigenvectors as columns: ±(1, -1)/√2 for 1, ±(1, 1)/√2 for 3.
        [v00, v01, v10, v11] = to_f64s(Plugboard.to_binary!(v))
        r = :math.sqrt(0.5)
        assert_in_delta abs(v00), r, 1.0e-15
        assert_in_delta v10, -v00, 1.0e-15
        assert_in_delta abs(v01), r, 1.0e-15
        assert_in_delta v11, v01, 1.0e-15
      end
    end
  end

  test "a plugin without the FFI extension, and a closed client, are refused" do
    {:ok, c} = Plugboard.open(fault_plugin("fault_cpu_no_ffi"))
    assert {:error, %Error{code: :unimplemented, message: message}} = Plugboard.declare_lapack(c)
    assert message =~ "FFI extension"
    {:ok, closed} = Plugboard.open(first_plugin())
    :ok = Plugboard.close(closed)
    assert {:error, %Error{code: :failed_precondition}} = Plugboard.declare_lapack(closed)
    assert {:error, %Error{code: :invalid_argument}} = Plugboard.declare_lapack(:nope)
  end
end
