# What the plugin is told, measured: one model's program (Plugboard.Nx's module, and JAX's own
# lowered module) compiled with each setting below, run through Plugboard.run/3 in interleaved rounds
# with JAX's jax.jit of the same model (bench/jax_models.py), each variant's outputs checked equal to
# JAX's first. For finding what closes a gap between a plugin and JAX; bench/jax_bench.exs times
# Plugboard.Nx itself.
#
#   mix run bench/jax_settings.exs [--models mlp,transformer] [--rounds 7] [--only default,ynn_dot]
#   (bench/jax_bench.sh --settings ... runs it on each plugin, pinned and with JAX set up)
#
# Variants (a variant a plugin refuses is reported and left out):
#   default      plugboard's compile options (JAX's numerics) and the plugin's client defaults;
#   jax_module   the StableHLO JAX lowers the model to, compiled as `default` (is it the emitter?);
#   devices_1    a client opened with cpu_device_count=1 (the plugins default to 4; JAX opens 1);
#   sync         a client opened with asynchronous=false (the plugins that take it);
#   ynn_dot      xla_cpu_experimental_ynn_fusion_type=LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT (dots
#                through YNNPACK, jaxlib 0.10.2's default);
#   xnn_greedy   xla_cpu_experimental_xnn_graph_fusion_mode=XNN_GRAPH_FUSION_MODE_GREEDY (XNNPACK
#                graph fusions);
#   donate       the training step's parameters donated to it (input_output_alias), run with donate:;
#   no_fusion_emitters, cheap_llvm, opt_level_2   what might compile faster:
#                xla_cpu_use_fusion_emitters=false, xla_llvm_disable_expensive_passes=true,
#                xla_backend_optimization_level=2 (XLA's default is 3);
#   no_thunks    xla_cpu_use_thunk_runtime=false (XLA's older runtime, where a plugin still has it).
Code.require_file("bench_helpers.exs", __DIR__)
Code.require_file("jax_models.exs", __DIR__)
Code.require_file("jax_harness.exs", __DIR__)

defmodule JaxSettings do
  alias JaxBench.{Models, Worker}
  import JaxBench.Harness

  @variants [
    default: [],
    jax_module: [module: :jax],
    devices_1: [create: [{"cpu_device_count", 1}]],
    sync: [create: [{"asynchronous", false}]],
    ynn_dot: [xla: ["xla_cpu_experimental_ynn_fusion_type=LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"]],
    xnn_greedy: [xla: ["xla_cpu_experimental_xnn_graph_fusion_mode=XNN_GRAPH_FUSION_MODE_GREEDY"]],
    donate: [donate: true],
    no_fusion_emitters: [xla: ["xla_cpu_use_fusion_emitters=false"]],
    cheap_llvm: [xla: ["xla_llvm_disable_expensive_passes=true"]],
    opt_level_2: [xla: ["xla_backend_optimization_level=2"]],
    no_thunks: [xla: ["xla_cpu_use_thunk_runtime=false"]]
  ]

  def main(argv) do
    {opts, _} = OptionParser.parse!(argv, strict: [models: :string, rounds: :integer, only: :string])
    models = if opts[:models], do: opts[:models] |> String.split(",") |> Enum.map(&String.to_existing_atom/1), else: [:mlp, :transformer]
    variants = if opts[:only], do: Keyword.take(@variants, opts[:only] |> String.split(",") |> Enum.map(&String.to_existing_atom/1)), else: @variants
    rounds = Keyword.get(opts, :rounds, 7)
    plugin = Bench.plugin()
    jax = Worker.start()
    IO.puts("plugin: #{plugin}\nJAX #{Worker.version(jax)}; #{Bench.load()}; #{rounds} interleaved rounds, medians")
    # One client per set of create options, opened once.
    clients = Map.new([[] | Enum.map(variants, fn {_, v} -> Keyword.get(v, :create, []) end)] |> Enum.uniq(), &{&1, open(plugin, &1)})

    for model <- models do
      dims = Models.dims(model, :full)
      inputs = inputs(model, dims)
      load(jax, model, dims, inputs)
      jax_outputs = jax_outputs(jax, model)
      jax_text = Worker.request(jax, %{cmd: "lowered", model: model})["text"]

      runs =
        for {name, v} <- variants, run = prepare(name, v, clients, model, dims, inputs, jax_text, jax_outputs), run != nil, do: run

      n = steps_per_round(&elem(hd(runs).step.(&1), 0))
      jax_steady = fn -> %{"us" => us, "cpu_us" => cpu} = Worker.request(jax, %{cmd: "steady", model: model, n: n}); %{jax: us, jax_cpu: cpu} end
      jax_steady.()
      measures = [{:jax, jax_steady} | Enum.map(runs, fn r -> {r.name, fn -> {wall, cpu} = r.step.(n); %{r.name => wall, {r.name, :cpu} => cpu} end} end)]
      t = Bench.rounds(measures, rounds)
      {jax_wall, jax_cpu} = {t.jax, t.jax_cpu}

      IO.puts("\n#{model} (#{n} steps a round): JAX #{us(jax_wall)} (CPU time #{us(jax_cpu)})")
      IO.puts("| variant | step | / JAX | CPU time / JAX's | XLA compile |")
      IO.puts("|---|---|---|---|---|")

      for r <- runs do
        {wall, cpu} = {t[r.name], t[{r.name, :cpu}]}
        IO.puts("| #{r.name} | #{us(wall)} | #{ratio(wall, jax_wall)} | #{ratio(cpu, jax_cpu)} | #{us(r.compile_us)} |")
      end
    end

    IO.puts("\n#{Bench.load()}")
  end

  defp open(plugin, create) do
    case Plugboard.open(plugin, create) do
      {:ok, client} -> client
      {:error, e} -> {:refused, Exception.message(e)}
    end
  end

  # The variant compiled and checked: %{name, step: fn n -> us per step end, compile_us}, or nil
  # (reported) when the plugin refuses it or its outputs differ from JAX's.
  defp prepare(name, v, clients, model, dims, inputs, jax_text, jax_outputs) do
    params = Models.params(model)

    with {:client, %Plugboard.Client{} = client} <- {:client, clients[Keyword.get(v, :create, [])]},
         donate = if(v[:donate] && params > 0, do: Enum.to_list(0..(params - 1)), else: []),
         text = program(v[:module], model, dims, donate, jax_text),
         {t, {:ok, exe}} <- :timer.tc(fn -> Plugboard.compile(client, text, xla_options: Keyword.get(v, :xla, []), compile_cache: false) end) do
      fresh = fn -> for {_, shape, data} <- inputs, do: Plugboard.buffer!(client, data, :f32, shape, copy: true) end
      outputs = Plugboard.run!(exe, fresh.(), donate: donate)
      got = for b <- outputs, do: {b.shape, Plugboard.to_binary!(b)}

      case compare(model, got, jax_outputs) do
        [] ->
          # {wall, CPU} microseconds per step.
          step = fn n ->
            args = fresh.()

            {wall, cpu} =
              Bench.timed(fn ->
                Enum.reduce(1..n, args, fn _, args ->
                  out = Plugboard.run!(exe, args, donate: donate)
                  # What the step replaced is freed at once (as Python's reference counts free it),
                  # so that these figures are the plugin's, not the VM's garbage collection's.
                  {next, dropped} = if params > 0, do: {Enum.take(out, params) ++ Enum.drop(args, params), Enum.take(args, params) ++ Enum.drop(out, params)}, else: {args, out}
                  if donate == [], do: Enum.each(dropped, &Plugboard.free/1), else: Enum.each(Enum.drop(out, params), &Plugboard.free/1)
                  next
                end)
              end)

            {wall / n, cpu / n}
          end

          %{name: name, step: step, compile_us: t}

        errors ->
          IO.puts("#{model} #{name}: left out, outputs differ from JAX's: #{Enum.join(errors, "; ")}")
          nil
      end
    else
      {:client, {:refused, message}} -> IO.puts("#{model} #{name}: left out, the plugin refuses the client: #{message}") && nil
      {_, {:error, e}} -> IO.puts("#{model} #{name}: left out, the plugin refuses to compile: #{Exception.message(e)}") && nil
    end
  end

  # The program: JAX's module or Plugboard.Nx's, with the donated parameters aliased to the outputs
  # that replace them (tf.aliasing_output, as JAX writes donate_argnums).
  defp program(:jax, _model, _dims, _donate, jax_text), do: jax_text

  defp program(nil, model, dims, donate, _) do
    args = for {_, shape, _} <- inputs(model, dims), do: Nx.template(shape, :f32)
    text = Plugboard.Nx.to_mlir(Models.function(model, dims), args)

    Enum.reduce(donate, text, fn i, text ->
      String.replace(text, ~r/(%arg#{i}: tensor<[^>]*>)/, "\\1 {tf.aliasing_output = #{i} : i32}", global: false)
    end)
  end
end

JaxSettings.main(System.argv())
# Halt at once: a normal stop ends the processes, whose executables the NIF then destroys on its work
# pool while the VM exits, and the 0.106 plugin sometimes aborted there (~ExecutionEngine locking a
# mutex exit() had already destroyed: 2 runs in 24 of this script).
System.halt(0)
