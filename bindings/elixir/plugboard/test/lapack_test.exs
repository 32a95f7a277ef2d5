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

defmodule Plugboard.LapackConfinementTest do
  # A boot confined to its bundle (use_environment: false) does not read PLUGBOARD_LAPACK either: LAPACK
  # is the system's liblapack.so.3, and the boot report names the file and that the variable was not
  # read (issue 34), without opening it (the first LAPACK call does); a confined boot that fails leaves
  # the variable read. The variable is read by the native library (getenv), which does not see
  # System.put_env: each case runs in a VM of its own started with it.
  use ExUnit.Case, async: true
  import Plugboard.TestSupport

  @script ~S"""
  [bundle, use_environment, failed_first] = System.argv()
  {:ok, _} = Application.ensure_all_started(:plugboard)
  maps = fn prefix -> for line <- String.split(File.read!("/proc/self/maps"), "\n"), path = List.last(String.split(line)), path, do: IO.puts(prefix <> path) end
  if failed_first == "true", do: {:error, _, _} = Plugboard.boot(bundle: bundle, target: "no_such_target", use_environment: false)
  {:ok, client, report} = Plugboard.boot(bundle: bundle, target: "cpu", use_environment: use_environment == "true")
  for line <- report.notes, String.starts_with?(line, "LAPACK: "), do: IO.puts("note: " <> line)
  maps.("booted: ")
  IO.puts("declare_lapack: #{inspect(Plugboard.declare_lapack(client))}")
  maps.("mapped: ")
  """

  setup_all do
    dir = Path.join(System.tmp_dir!(), "plugboard-lapack-confined-#{System.unique_integer([:positive])}")
    bundle = make_bundle(dir, cpu: first_plugin())
    on_exit(fn -> File.rm_rf!(dir) end)
    # A library that loads but is no LAPACK: opened, it is in the memory map and declare_lapack refuses it.
    %{bundle: bundle, bogus: fault_plugin("fault_well_formed")}
  end

  defp boot_in_vm(bundle, bogus, use_environment, failed_first \\ false) do
    ebins = Path.wildcard(Path.join(Mix.Project.build_path(), "lib/*/ebin"))
    args = Enum.flat_map(ebins, &["-pa", &1]) ++ ["-e", @script, "--", bundle, to_string(use_environment), to_string(failed_first)]
    {out, 0} = System.cmd(System.find_executable("elixir"), args, stderr_to_stdout: true, env: [{"PLUGBOARD_LAPACK", bogus}])
    lines = String.split(out, "\n")
    pick = fn prefix -> for l <- lines, String.starts_with?(l, prefix), do: String.replace_prefix(l, prefix, "") end
    %{declare: hd(pick.("declare_lapack: ")), notes: pick.("note: "), booted: pick.("booted: "), mapped: pick.("mapped: ")}
  end

  test "with use_environment: false, PLUGBOARD_LAPACK is not loaded and the report says which LAPACK is", %{bundle: bundle, bogus: bogus} do
    vm = boot_in_vm(bundle, bogus, false)
    assert vm.declare == ":ok"
    refute bogus in vm.mapped
    assert [line] = vm.notes
    assert line ==
             "LAPACK: liblapack.so.3, opened at its first use (liblapack.so.3 on the loader's path; " <>
               "PLUGBOARD_LAPACK=#{bogus} not read: use_environment is false)"
    # The boot opened no LAPACK; declare_lapack (its first use) did.
    assert vm.booted != [] and not Enum.any?(vm.booted, &(&1 =~ "liblapack"))
    assert Enum.any?(vm.mapped, &(&1 =~ "liblapack"))
  end

  test "a confined boot that fails leaves PLUGBOARD_LAPACK read by a later boot that reads the environment",
       %{bundle: bundle, bogus: bogus} do
    vm = boot_in_vm(bundle, bogus, true, true)
    assert vm.notes == ["LAPACK: #{bogus}, opened at its first use (from PLUGBOARD_LAPACK)"]
    assert vm.declare =~ "has no ssyevd_"
  end

  test "with use_environment: true, PLUGBOARD_LAPACK is the LAPACK, and the report says so", %{bundle: bundle, bogus: bogus} do
    vm = boot_in_vm(bundle, bogus, true)
    assert vm.declare =~ "not_found" and vm.declare =~ "has no ssyevd_"
    refute bogus in vm.booted
    assert bogus in vm.mapped
    assert vm.notes == ["LAPACK: #{bogus}, opened at its first use (from PLUGBOARD_LAPACK)"]
  end
end
