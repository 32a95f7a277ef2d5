defmodule Compute.Demo do
  @moduledoc """
  Runs a small StableHLO program on the target the release booted, from inside the release:

      bin/compute eval 'Compute.Demo.main()'     # eval starts no application: main/0 starts :compute
      COMPUTE_DEMO=1 bin/compute start            # the application runs it, then halts

  It prints the selection report (which target was chosen, and why each other one was not), then
  runs a program that calls the print hook `plugboard.print` (ordered: the program does not wait) and
  `host_scale`, a blocking host callback answered by an Elixir function (the program waits for it),
  and prints the result: `host_scale(x) + x`, where host_scale multiplies by 3.
  """

  # The token threaded through the custom calls fixes their order; tokens are not passed to the host.
  @program """
  module @demo attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
    func.func public @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
      %t0 = stablehlo.after_all : !stablehlo.token
      %t1 = stablehlo.custom_call @plugboard.print(%t0, %x) {api_version = 4 : i32, has_side_effect = true, backend_config = {label = "x"}} : (!stablehlo.token, tensor<2x4xf32>) -> !stablehlo.token
      %t2, %scaled = stablehlo.custom_call @host_scale(%t1, %x) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, tensor<2x4xf32>) -> (!stablehlo.token, tensor<2x4xf32>)
      %t3 = stablehlo.custom_call @plugboard.print(%t2, %scaled) {api_version = 4 : i32, has_side_effect = true, backend_config = {label = "host_scale(x)"}} : (!stablehlo.token, tensor<2x4xf32>) -> !stablehlo.token
      %out = stablehlo.add %scaled, %x : tensor<2x4xf32>
      return %out : tensor<2x4xf32>
    }
  }
  """

  @model_file Path.expand("../../programs/model.mlir", __DIR__)
  @external_resource @model_file
  @model File.read!(@model_file)

  @input [1.0, 2.0, 3.0, 4.0, -1.0, -2.0, 0.5, 0.25]
  @factor 3.0

  @doc "Starts the application (and so the boot), then runs the demo; halts with 1 if either fails."
  @spec main() :: :ok
  def main do
    case Application.ensure_all_started(:compute) do
      {:ok, _} ->
        run()

      {:error, reason} ->
        IO.puts(:stderr, "compute: the application did not start: #{inspect(reason)}")
        System.halt(1)
    end
  end

  @doc "Runs the demo and halts the node: 0 when it succeeded, 1 when it raised."
  @spec run_and_halt() :: no_return()
  def run_and_halt do
    try do
      run()
      System.halt(0)
    rescue
      e ->
        IO.puts(:stderr, "compute: demo failed: " <> Exception.format(:error, e, __STACKTRACE__))
        System.halt(1)
    end
  end

  @doc "Prints the report, compiles and runs the program with its host callbacks, prints the result."
  @spec run() :: :ok
  def run do
    IO.puts(Plugboard.report().text)
    client = Plugboard.client!()
    IO.puts("compute: running on target #{Plugboard.report().chosen} (#{client.platform}, #{client.plugin})")

    exe = Plugboard.compile!(client, @program, name: "demo.mlir", callbacks: ["plugboard.print", "host_scale"])
    x = Plugboard.buffer!(client, f32s(@input), :f32, {2, 4})
    me = self()

    scale = fn [%Plugboard.HostTensor{} = t] ->
      IO.puts("host_scale: called in #{inspect(self())} (#{if self() == me, do: "the running process", else: "another process"}) with #{format(t)}")
      t.data |> floats() |> Enum.map(&(&1 * @factor)) |> f32s()
    end

    print = fn %Plugboard.OrderedCall{} = call -> IO.puts("print: " <> Plugboard.Printer.format(call)) end

    [out] = Plugboard.run!(exe, [x], callbacks: %{"host_scale" => scale}, ordered: %{"plugboard.print" => print})
    IO.puts("result: " <> format(Plugboard.to_host(out) |> elem(1)))
    run_model(client)
  end

  # The model precompiled into the release's bundle: found there by its key, not compiled.
  defp run_model(client) do
    model = Plugboard.compile!(client, @model, name: "model.mlir")
    IO.puts("model.mlir: #{source(model)}#{Enum.map_join(model.notes, "", &("; " <> &1))}")
    args = [
      Plugboard.buffer!(client, f32s(@input), :f32, {2, 4}),
      Plugboard.buffer!(client, f32s(for i <- 1..12, do: i / 4), :f32, {4, 3}),
      Plugboard.buffer!(client, f32s([-1.0, 0.0, 1.0]), :f32, {3})
    ]
    [y] = Plugboard.run!(model, args)
    IO.puts("model: " <> format(Plugboard.to_host(y) |> elem(1)))
    # Compute.NxJob and Compute.AxonJob exist when the release was built with Nx and Axon.
    for job <- [Compute.NxJob, Compute.AxonJob], Code.ensure_loaded?(job), do: apply(job, :run, [client])
    :ok
  end

  defp source(%Plugboard.Executable{source: :precompiled, compile_ms: ms}), do: "precompiled in the bundle (loaded in #{Float.round(ms, 2)} ms)"
  defp source(%Plugboard.Executable{source: :compile_cache, compile_ms: ms}), do: "compile-cache hit (loaded in #{Float.round(ms, 2)} ms)"
  defp source(%Plugboard.Executable{compile_ms: ms}), do: "compiled in #{Float.round(ms, 1)} ms"

  defp f32s(values), do: for(v <- values, into: <<>>, do: <<v::float-32-little>>)
  defp floats(bytes), do: for(<<v::float-32-little <- bytes>>, do: v)

  defp format(%Plugboard.HostTensor{dtype: dtype, shape: shape} = t),
    do: "#{dtype}[#{shape |> Tuple.to_list() |> Enum.join(",")}] #{inspect(Plugboard.HostTensor.to_list(t))}"
end
