defmodule Plugboard.TestSupport do
  @moduledoc false
  # What the tests need from outside the package: the real plugins and the fault plugins.

  def deps_dir,
    do: System.get_env("PLUGBOARD_DEPS_DIR") || Path.join([System.user_home!(), ".cache", "plugboard", "deps"])

  @default_plugins ["xla_cpu_081/xla_cpu_pjrt.so", "xla_cpu_106/libpjrt_cpu.so", "xla_cpu_115/pjrt_c_api_cpu_plugin.so"]

  @doc "The real CPU plugins, as {label, path}."
  def cpu_plugins do
    paths =
      case System.get_env("PLUGBOARD_TEST_PLUGINS") do
        nil -> Enum.map(@default_plugins, &Path.join([deps_dir(), "files", &1]))
        list -> String.split(list, ":", trim: true)
      end

    Enum.map(paths, fn p -> {p |> Path.dirname() |> Path.basename(), p} end)
  end

  def first_plugin, do: cpu_plugins() |> hd() |> elem(1)

  def fault_plugin(name) do
    dir = System.get_env("PLUGBOARD_FAULT_DIR") || Path.expand("../../../../../build/tests", __DIR__)
    Path.join(dir, "lib#{name}.so")
  end

  def cli, do: Path.join([:code.priv_dir(:plugboard), "bin", "plugboard"])

  def check_environment! do
    for {_, p} <- cpu_plugins(), not File.exists?(p), do: raise("test plugin #{p} is missing: run scripts/setup.sh")
    f = fault_plugin("fault_init_error")
    unless File.exists?(f), do: raise("fault plugin #{f} is missing: build the C++ tests (PLUGBOARD_FAULT_DIR)")
  end

  @doc "A bundle of `targets` (name => plugin path) in a fresh folder."
  def make_bundle(dir, targets) do
    File.rm_rf!(dir)
    args = Enum.flat_map(targets, fn {name, path} -> ["--target", "#{name}=#{path}"] end)
    {out, status} = System.cmd(cli(), ["bundle" | args] ++ ["--out", dir], stderr_to_stdout: true)
    if status != 0, do: raise("plugboard bundle failed: #{out}")
    dir
  end

  # MLIR element types by plugboard dtype.
  @mlir %{
    bool: "i1", i8: "i8", i16: "i16", i32: "i32", i64: "i64", u8: "ui8", u16: "ui16", u32: "ui32", u64: "ui64",
    f16: "f16", bf16: "bf16", f32: "f32", f64: "f64", c64: "complex<f32>", c128: "complex<f64>",
    f8e5m2: "f8E5M2", f8e4m3fn: "f8E4M3FN"
  }
  @sizes %{bool: 1, i8: 1, i16: 2, i32: 4, i64: 8, u8: 1, u16: 2, u32: 4, u64: 8, f16: 2, bf16: 2, f32: 4, f64: 8,
           c64: 8, c128: 16, f8e5m2: 1, f8e4m3fn: 1}
  def dtypes, do: Map.keys(@mlir) |> Enum.sort()
  def mlir_type(dtype), do: @mlir[dtype]
  def element_size(dtype), do: @sizes[dtype]

  def tensor(dtype, dims), do: "tensor<#{Enum.map_join(dims, "", &"#{&1}x")}#{mlir_type(dtype)}>"

  @doc "A program that reverses its argument's rows: exact for every dtype."
  def reverse_program(dtype, rows, cols) do
    t = tensor(dtype, [rows, cols])

    """
    func.func public @main(%x: #{t}) -> #{t} {
      %0 = stablehlo.reverse %x, dims = [0] : #{t}
      return %0 : #{t}
    }
    """
  end

  def add_program(dtype \\ :f32, dims \\ [4]) do
    t = tensor(dtype, dims)

    """
    func.func public @main(%a: #{t}, %b: #{t}) -> #{t} {
      %0 = stablehlo.add %a, %b : #{t}
      return %0 : #{t}
    }
    """
  end

  @doc "Calls host_scale (blocking, one result) between two print hooks, threading a token."
  def callback_program(dims \\ [2, 4]) do
    t = tensor(:f32, dims)

    """
    func.func public @main(%x: #{t}) -> #{t} {
      %t0 = stablehlo.after_all : !stablehlo.token
      %t1 = stablehlo.custom_call @plugboard.print(%t0, %x) {api_version = 4 : i32, has_side_effect = true, backend_config = {label = "x"}} : (!stablehlo.token, #{t}) -> !stablehlo.token
      %t2, %s = stablehlo.custom_call @host_scale(%t1, %x) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, #{t}) -> (!stablehlo.token, #{t})
      %t3 = stablehlo.custom_call @plugboard.print(%t2, %s) {api_version = 4 : i32, has_side_effect = true, backend_config = {label = "scaled"}} : (!stablehlo.token, #{t}) -> !stablehlo.token
      %out = stablehlo.add %s, %x : #{t}
      return %out : #{t}
    }
    """
  end

  @doc "`n` ordered calls to `name` in a chain, each with the value i."
  def ordered_chain_program(name, n) do
    calls =
      for i <- 1..n do
        "%c#{i} = stablehlo.constant dense<#{i}> : tensor<i32>\n" <>
          "  %t#{i} = stablehlo.custom_call @#{name}(%t#{i - 1}, %c#{i}) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, tensor<i32>) -> !stablehlo.token"
      end

    """
    func.func public @main(%x: tensor<i32>) -> tensor<i32> {
      %t0 = stablehlo.after_all : !stablehlo.token
      #{Enum.join(calls, "\n  ")}
      return %x : tensor<i32>
    }
    """
  end

  @doc """
  An i64 counter loop whose trip count is an argument, with a multiply-add recurrence XLA cannot
  fold: XLA's cost model counts the body once, so its CPU client thinks it cheap and would run it
  inside PJRT_LoadedExecutable_Execute (bench/parked.exs runs it too).
  """
  def counter_loop_program, do: File.read!(Path.expand("counter_loop.mlir", __DIR__))

  @doc "A small program never compiled before (a fresh constant and comment): each compile is a real one."
  def unique_program(tag) do
    k = System.unique_integer([:positive])

    """
    // #{tag} #{k} #{System.os_time(:nanosecond)}
    func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
      %k = stablehlo.constant dense<#{k}.0> : tensor<8xf32>
      %0 = stablehlo.multiply %x, %k : tensor<8xf32>
      %1 = stablehlo.add %0, %x : tensor<8xf32>
      return %1 : tensor<8xf32>
    }
    """
  end

  def f32s(list), do: for(v <- list, into: <<>>, do: <<v::float-32-little>>)
  def to_f32s(bin), do: for(<<v::float-32-little <- bin>>, do: v)

  @doc "Waits until `fun` returns true (native objects are released some time after GC)."
  def eventually(fun, tries \\ 100) do
    cond do
      fun.() -> true
      tries == 0 -> false
      true ->
        :erlang.garbage_collect()
        Process.sleep(20)
        eventually(fun, tries - 1)
    end
  end
end
