# Plugboard.Nx against JAX on the same models (bench/jax_models.exs, bench/jax_models.py), on one CPU
# plugin (Bench.plugin/0). Three modes:
#
#   mix run bench/jax_bench.exs [--models mlp,cnn,transformer,add] [--rounds 7] [--steady]
#       the benchmark (full shapes): JAX's worker (JAXBENCH_PYTHON, a Python with JAX) is started
#       as a port, so it runs on the cores this VM runs on (bench/jax_bench.sh pins both with
#       taskset); the same inputs go to both; the outputs of one call are checked equal (rtol 1e-4,
#       atol 1e-5), then steady-state time per step and first-call time (trace/emit + compile + run,
#       caches cleared: PLUGBOARD_COMPILE_CACHE=off, jax.clear_caches()) and XLA's compile alone
#       are taken in interleaved rounds (Plugboard.Nx, JAX, Plugboard.Nx, JAX, ...), medians and
#       ratios Plugboard.Nx / JAX printed (--steady: the steady state only);
#   mix run bench/jax_bench.exs --check
#       the test command's check, without JAX: each model on tiny shapes, its outputs against the
#       ones JAX gave for the same inputs (bench/fixtures/jax_tiny, written by --fixtures);
#   mix run bench/jax_bench.exs --fixtures
#       writes those fixtures from JAX (and checks this plugin against them).
#
# PLUGBOARD_BENCH_CREATE_OPTIONS="name=int,..." adds client create options (e.g. cpu_device_count=1).
Code.require_file("bench_helpers.exs", __DIR__)
Code.require_file("jax_models.exs", __DIR__)
Code.require_file("jax_harness.exs", __DIR__)

defmodule JaxBench do
  alias JaxBench.{Models, Worker}
  import JaxBench.Harness

  @fixtures Path.expand("fixtures/jax_tiny", __DIR__)

  def main(argv) do
    {opts, _} = OptionParser.parse!(argv, strict: [check: :boolean, fixtures: :boolean, models: :string, rounds: :integer, steady: :boolean])
    models = if opts[:models], do: opts[:models] |> String.split(",") |> Enum.map(&model!/1), else: Models.names()
    client = open_client()

    cond do
      opts[:check] -> check(client, models)
      opts[:fixtures] -> fixtures(client, models)
      true -> bench(client, models, Keyword.get(opts, :rounds, 7), !opts[:steady])
    end
  end

  defp model!(name) do
    Enum.find(Models.names(), &(Atom.to_string(&1) == name)) ||
      raise ArgumentError, "--models: unknown model #{inspect(name)}; known: #{Enum.join(Models.names(), ", ")}"
  end

  defp jit(client, model, dims), do: Nx.Defn.jit(Models.function(model, dims), compiler: Plugboard.Nx, client: client)

  defp outputs(result), do: result |> Tuple.to_list() |> Enum.map(&{Nx.shape(&1), Nx.to_binary(&1)})

  # --- the equality check ---------------------------------------------------------------------------

  defp check(client, models) do
    manifest = read_manifest!()

    errors =
      for model <- models do
        dims = Models.dims(model, :tiny)
        args = on_device(client, inputs(model, dims))
        nx = outputs(apply(jit(client, model, dims), args))
        jax = fixture_outputs!(manifest, model)
        errors = compare(model, nx, jax)
        IO.puts("#{model}: #{if errors == [], do: "equal to JAX #{manifest["jax"]}'s outputs", else: "DIFFERS"} (largest relative difference #{Float.round(max_error(nx, jax), 8)})")
        errors
      end
      |> List.flatten()

    if errors != [] do
      Enum.each(errors, &IO.puts(:stderr, &1))
      raise "Plugboard.Nx's outputs differ from JAX's on #{Bench.plugin()} (fixtures: #{@fixtures})"
    end
  end

  defp read_manifest! do
    path = Path.join(@fixtures, "manifest.json")

    case File.read(path) do
      {:ok, text} -> JSON.decode!(text)
      {:error, reason} -> raise "cannot read #{path} (#{:file.format_error(reason)}): write it with bench/jax_bench.sh --fixtures"
    end
  end

  defp fixture_outputs!(manifest, model) do
    shapes = manifest["outputs"][Atom.to_string(model)] || raise "#{model}: not in #{@fixtures}/manifest.json: write it with bench/jax_bench.sh --fixtures"
    for {shape, i} <- Enum.with_index(shapes), do: {List.to_tuple(shape), File.read!(Path.join(@fixtures, "#{model}.out#{i}.f32"))}
  end

  defp fixtures(client, models) do
    jax = Worker.start()
    File.mkdir_p!(@fixtures)

    outputs =
      for model <- models, into: %{} do
        dims = Models.dims(model, :tiny)
        load(jax, model, dims, inputs(model, dims))
        %{"shapes" => shapes} = Worker.request(jax, %{cmd: "outputs", model: model, dir: @fixtures})
        {Atom.to_string(model), shapes}
      end

    File.write!(Path.join(@fixtures, "manifest.json"), JSON.encode!(%{"jax" => Worker.version(jax), "outputs" => outputs}) <> "\n")
    IO.puts("wrote #{@fixtures}")
    check(client, models)
  end

  # --- the benchmark ----------------------------------------------------------------------------------

  defp bench(client, models, rounds, first?) do
    # First calls compile: no compiled program may come from plugboard's persistent compile cache
    # (JAX's is off unless configured). The variable is read from the process's environment, which
    # System.put_env does not reach.
    System.get_env("PLUGBOARD_COMPILE_CACHE") in ["off", "0"] ||
      raise "PLUGBOARD_COMPILE_CACHE=off is needed (first calls would load compiled programs): run bench/jax_bench.sh"

    jax = Worker.start()
    IO.puts("JAX #{Worker.version(jax)}; #{Bench.load()}; #{rounds} interleaved rounds (Plugboard.Nx, JAX, ...), medians; " <>
              "ERL_FLAGS=#{inspect(System.get_env("ERL_FLAGS", ""))}")

    rows =
      for model <- models do
        dims = Models.dims(model, :full)
        inputs = inputs(model, dims)
        load(jax, model, dims, inputs)
        args = on_device(client, inputs)
        step = jit(client, model, dims)
        nx = outputs(apply(step, args))
        jax_out = jax_outputs(jax, model)

        case compare(model, nx, jax_out) do
          [] -> :ok
          errors -> raise "#{model}: outputs differ from JAX's:\n" <> Enum.join(errors, "\n")
        end

        {steady, first} = time(client, jax, model, dims, step, args, rounds, first?)
        IO.puts("#{model}: outputs equal (largest relative difference #{Float.round(max_error(nx, jax_out), 7)}); " <> row_text(steady, first))
        {model, steady, first}
      end

    IO.puts("\n#{Bench.load()}\n")
    print_table(rows)
  end

  defp time(client, jax, model, dims, step, args, rounds, first?) do
    params = Models.params(model)

    # One round of `n` steps, each on the last one's parameters for a training step.
    nx_steps = fn n ->
      run = fn ->
        Enum.reduce(1..n, args, fn _, args ->
          out = apply(step, args)
          if params > 0, do: Enum.take(Tuple.to_list(out), params) ++ Enum.drop(args, params), else: args
        end)
      end

      {wall, cpu} = Bench.timed(run)
      %{nx: wall / n, nx_cpu: cpu / n}
    end

    n = steps_per_round(&nx_steps.(&1).nx)
    nx_steps.(n)
    Worker.request(jax, %{cmd: "steady", model: model, n: n})

    steady =
      Bench.rounds(
        [nx: fn -> nx_steps.(n) end, jax: fn -> jax_steady(jax, model, n) end],
        rounds
      )

    first =
      first? &&
      Bench.rounds(
        [
          nx: fn -> first_call(client, model, dims, args) end,
          jax: fn -> %{"us" => us, "compile_us" => compile} = Worker.request(jax, %{cmd: "first", model: model}); %{jax: us, jax_compile: compile} end,
          nx_compile: fn -> compile_only(client, model, dims, args) end,
          nx_emit: fn -> elem(:timer.tc(fn -> Plugboard.Nx.to_mlir(Models.function(model, dims), args) end), 0) end
        ],
        max(div(rounds, 2), 3)
      )

    {steady, first}
  end

  defp jax_steady(jax, model, n) do
    %{"us" => us, "cpu_us" => cpu} = Worker.request(jax, %{cmd: "steady", model: model, n: n})
    %{jax: us, jax_cpu: cpu}
  end

  # A jit no cache has seen (the closure holds a new salt), its first call: Nx's tracing, the
  # emitter, XLA's compile, the run.
  defp first_call(client, model, dims, args) do
    salt = System.unique_integer([:positive])
    fun = Models.function(model, dims)
    fresh = Nx.Defn.jit(fn tuple -> salted(fun, tuple, salt) end, compiler: Plugboard.Nx, client: client)
    {t, _} = :timer.tc(fn -> fresh.(List.to_tuple(args)) end)
    t
  end

  @doc false
  def salted(fun, tuple, _salt), do: apply(fun, Tuple.to_list(tuple))

  defp compile_only(client, model, dims, args) do
    text = Plugboard.Nx.to_mlir(Models.function(model, dims), args)
    {t, _} = :timer.tc(fn -> Plugboard.compile!(client, text, compile_cache: false) end)
    t
  end

  defp step_text(s),
    do: "step #{us(s.nx)} / JAX #{us(s.jax)} = #{ratio(s.nx, s.jax)} (CPU time #{us(s.nx_cpu)} / #{us(s.jax_cpu)} = #{ratio(s.nx_cpu, s.jax_cpu)})"

  defp row_text(s, false), do: step_text(s)

  defp row_text(s, f) do
    step_text(s) <> "; first call #{us(f.nx)} / #{us(f.jax)} = #{ratio(f.nx, f.jax)}; " <>
      "compile alone #{us(f.nx_compile)} / #{us(f.jax_compile)} = #{ratio(f.nx_compile, f.jax_compile)}; emit #{us(f.nx_emit)}"
  end

  defp print_table(rows) do
    IO.puts("| model | step: Plugboard.Nx | JAX | ratio | CPU time ratio | first call: Plugboard.Nx | JAX | ratio | XLA compile: Plugboard.Nx | JAX | ratio | emit |")
    IO.puts("|---|---|---|---|---|---|---|---|---|---|---|---|")

    for {model, s, f} <- rows do
      first =
        if f,
          do: [us(f.nx), us(f.jax), ratio(f.nx, f.jax), us(f.nx_compile), us(f.jax_compile), ratio(f.nx_compile, f.jax_compile), us(f.nx_emit)],
          else: List.duplicate("-", 7)

      IO.puts("| " <> Enum.join([model, us(s.nx), us(s.jax), ratio(s.nx, s.jax), ratio(s.nx_cpu, s.jax_cpu) | first], " | ") <> " |")
    end
  end
end

JaxBench.main(System.argv())
# Halt at once: a normal stop ends the processes, whose executables the NIF then destroys on its work
# pool while the VM exits, and the 0.106 plugin sometimes aborted there (~ExecutionEngine locking a
# mutex exit() had already destroyed: 2 runs in 24 of this script).
System.halt(0)
