# Plugboard.Nx against JAX on the same models (bench/jax_models.exs, bench/jax_models.py), on one CPU
# plugin (Bench.plugin/0). Three modes:
#
#   mix run bench/jax_bench.exs [--models mlp,cnn,transformer,add] [--rounds 7]
#       the benchmark (full shapes): JAX's worker (JAXBENCH_PYTHON, a Python with JAX) is started
#       as a port, so it runs on the cores this VM runs on (bench/jax_bench.sh pins both with
#       taskset); the same inputs go to both; the outputs of one call are checked equal (rtol 1e-4,
#       atol 1e-5), then steady-state time per step and first-call time (trace/emit + compile + run,
#       caches cleared: PLUGBOARD_COMPILE_CACHE=off, jax.clear_caches()) and XLA's compile alone
#       are taken in interleaved rounds (Plugboard.Nx, JAX, Plugboard.Nx, JAX, ...), medians and
#       ratios Plugboard.Nx / JAX printed;
#   mix run bench/jax_bench.exs --check
#       the test command's check, without JAX: each model on tiny shapes, its outputs against the
#       ones JAX gave for the same inputs (bench/fixtures/jax_tiny, written by --fixtures);
#   mix run bench/jax_bench.exs --fixtures
#       writes those fixtures from JAX (and checks this plugin against them).
#
# PLUGBOARD_BENCH_CREATE_OPTIONS="name=int,..." adds client create options (e.g. cpu_device_count=1).
Code.require_file("bench_helpers.exs", __DIR__)
Code.require_file("jax_models.exs", __DIR__)

defmodule JaxBench do
  alias JaxBench.Models

  @rtol 1.0e-4
  @atol 1.0e-5
  @fixtures Path.expand("fixtures/jax_tiny", __DIR__)

  def main(argv) do
    {opts, _} = OptionParser.parse!(argv, strict: [check: :boolean, fixtures: :boolean, models: :string, rounds: :integer])
    models = if opts[:models], do: opts[:models] |> String.split(",") |> Enum.map(&model!/1), else: Models.names()
    client = open_client()

    cond do
      opts[:check] -> check(client, models)
      opts[:fixtures] -> fixtures(client, models)
      true -> bench(client, models, Keyword.get(opts, :rounds, 7))
    end
  end

  defp model!(name) do
    Enum.find(Models.names(), &(Atom.to_string(&1) == name)) ||
      raise ArgumentError, "--models: unknown model #{inspect(name)}; known: #{Enum.join(Models.names(), ", ")}"
  end

  defp open_client do
    plugin = Bench.plugin()

    create =
      for pair <- String.split(System.get_env("PLUGBOARD_BENCH_CREATE_OPTIONS", ""), ",", trim: true) do
        [k, v] = String.split(pair, "=", parts: 2)
        {k, String.to_integer(v)}
      end

    {:ok, client} = Plugboard.open(plugin, create)
    IO.puts("plugin: #{plugin}#{if create != [], do: " (create options #{inspect(create)})"}")
    client
  end

  # The model's arguments: [{name, shape, raw f32}], seeded by the model and the argument's position.
  defp inputs(model, dims) do
    base = Enum.find_index(Models.names(), &(&1 == model)) * 100

    for {{name, shape, init}, i} <- Enum.with_index(Models.inputs(model, dims)),
        do: {name, shape, Models.data(base + i, shape, init)}
  end

  defp on_device(client, inputs) do
    for {_, shape, data} <- inputs,
        do: data |> Nx.from_binary(:f32) |> Nx.reshape(shape) |> Nx.backend_transfer({Plugboard.Nx.Backend, client: client})
  end

  defp jit(client, model, dims), do: Nx.Defn.jit(Models.function(model, dims), compiler: Plugboard.Nx, client: client)

  defp outputs(result), do: result |> Tuple.to_list() |> Enum.map(&{Nx.shape(&1), Nx.to_binary(&1)})

  # --- the equality check ---------------------------------------------------------------------------

  # [{shape, raw f32}] of JAX against Plugboard.Nx's: an error line per output that differs.
  defp compare(model, nx_outputs, jax_outputs) do
    if length(nx_outputs) != length(jax_outputs) do
      ["#{model}: #{length(nx_outputs)} outputs from Plugboard.Nx, #{length(jax_outputs)} from JAX"]
    else
      for {{{shape, nx}, {jax_shape, jax}}, i} <- Enum.with_index(Enum.zip(nx_outputs, jax_outputs)),
          error = differs(shape, nx, jax_shape, jax),
          do: "#{model} output #{i} #{inspect(shape)}: #{error}"
    end
  end

  defp differs(shape, _, jax_shape, _) when shape != jax_shape, do: "JAX's has shape #{inspect(jax_shape)}"

  defp differs(_, nx, _, jax) do
    pairs = Enum.zip(f32s(nx), f32s(jax))
    bad = pairs |> Enum.with_index() |> Enum.reject(fn {{a, b}, _} -> close?(a, b) end)

    case bad do
      [] -> nil
      [{{a, b}, i} | _] -> "#{length(bad)} of #{length(pairs)} elements differ beyond rtol #{@rtol}, atol #{@atol} (first: [#{i}] #{inspect(a)} against JAX's #{inspect(b)})"
    end
  end

  # Elements as floats, or {:nonfinite, bits} for NaN and infinities (which Erlang floats cannot be).
  defp f32s(binary), do: for(<<bits::binary-size(4) <- binary>>, do: f32(bits))
  defp f32(<<v::float-32-little>>), do: v
  defp f32(bits), do: {:nonfinite, bits}

  defp close?(a, b) when is_float(a) and is_float(b), do: abs(a - b) <= @atol + @rtol * abs(b)
  defp close?(a, b), do: a == b

  defp max_error(nx_outputs, jax_outputs) do
    for({{_, nx}, {_, jax}} <- Enum.zip(nx_outputs, jax_outputs), {a, b} <- Enum.zip(f32s(nx), f32s(jax)), is_float(a) and is_float(b),
        do: abs(a - b) / max(abs(b), @atol / @rtol))
    |> Enum.max(fn -> 0.0 end)
  end

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
    jax = JaxBench.Worker.start()
    File.mkdir_p!(@fixtures)

    outputs =
      for model <- models, into: %{} do
        dims = Models.dims(model, :tiny)
        load(jax, model, dims, inputs(model, dims))
        %{"shapes" => shapes} = JaxBench.Worker.request(jax, %{cmd: "outputs", model: model, dir: @fixtures})
        {Atom.to_string(model), shapes}
      end

    File.write!(Path.join(@fixtures, "manifest.json"), JSON.encode!(%{"jax" => JaxBench.Worker.version(jax), "outputs" => outputs}) <> "\n")
    IO.puts("wrote #{@fixtures}")
    check(client, models)
  end

  # The inputs to files JAX's worker reads, and the model loaded there.
  defp load(jax, model, dims, inputs) do
    dir = Path.join(System.tmp_dir!(), "jax_bench_#{System.pid()}")
    File.mkdir_p!(dir)

    files =
      for {name, shape, data} <- inputs do
        file = Path.join(dir, "#{model}.#{name}.f32")
        File.write!(file, data)
        %{file: file, shape: Tuple.to_list(shape)}
      end

    JaxBench.Worker.request(jax, %{cmd: "load", model: model, dims: dims, inputs: files})
    File.rm_rf!(dir)
  end

  # --- the benchmark ----------------------------------------------------------------------------------

  defp bench(client, models, rounds) do
    # First calls compile: no compiled program may come from plugboard's persistent compile cache
    # (JAX's is off unless configured). The variable is read from the process's environment, which
    # System.put_env does not reach.
    System.get_env("PLUGBOARD_COMPILE_CACHE") in ["off", "0"] ||
      raise "PLUGBOARD_COMPILE_CACHE=off is needed (first calls would load compiled programs): run bench/jax_bench.sh"

    jax = JaxBench.Worker.start()
    IO.puts("JAX #{JaxBench.Worker.version(jax)}; #{Bench.load()}; #{rounds} interleaved rounds (Plugboard.Nx, JAX, ...), medians")

    rows =
      for model <- models do
        dims = Models.dims(model, :full)
        inputs = inputs(model, dims)
        load(jax, model, dims, inputs)
        args = on_device(client, inputs)
        step = jit(client, model, dims)
        nx = outputs(apply(step, args))
        out_dir = Path.join(System.tmp_dir!(), "jax_bench_out_#{System.pid()}")
        File.mkdir_p!(out_dir)
        %{"shapes" => shapes} = JaxBench.Worker.request(jax, %{cmd: "outputs", model: model, dir: out_dir})
        jax_out = for {shape, i} <- Enum.with_index(shapes), do: {List.to_tuple(shape), File.read!(Path.join(out_dir, "#{model}.out#{i}.f32"))}
        File.rm_rf!(out_dir)

        case compare(model, nx, jax_out) do
          [] -> :ok
          errors -> raise "#{model}: outputs differ from JAX's:\n" <> Enum.join(errors, "\n")
        end

        {steady, first} = time(client, jax, model, dims, step, args, rounds)
        IO.puts("#{model}: outputs equal (largest relative difference #{Float.round(max_error(nx, jax_out), 7)}); " <> row_text(steady, first))
        {model, steady, first}
      end

    IO.puts("\n#{Bench.load()}\n")
    print_table(rows)
  end

  defp time(client, jax, model, dims, step, args, rounds) do
    params = Models.params(model)

    # One round of `n` steps, each on the last one's parameters for a training step.
    nx_steps = fn n ->
      {t, _} =
        :timer.tc(fn ->
          Enum.reduce(1..n, args, fn _, args ->
            out = apply(step, args)
            if params > 0, do: Enum.take(Tuple.to_list(out), params) ++ Enum.drop(args, params), else: args
          end)
        end)

      t / n
    end

    # Rounds of about 0.25 s a side.
    estimate = Enum.min(for _ <- 1..3, do: nx_steps.(1))
    n = estimate |> then(&round(250_000 / max(&1, 1))) |> max(1) |> min(20_000)
    nx_steps.(n)
    JaxBench.Worker.request(jax, %{cmd: "steady", model: model, n: n})

    steady =
      Bench.rounds(
        [nx: fn -> nx_steps.(n) end, jax: fn -> JaxBench.Worker.request(jax, %{cmd: "steady", model: model, n: n})["us"] end],
        rounds
      )

    first =
      Bench.rounds(
        [
          nx: fn -> first_call(client, model, dims, args) end,
          jax: fn -> JaxBench.Worker.request(jax, %{cmd: "first", model: model})["us"] end,
          nx_compile: fn -> compile_only(client, model, dims, args) end,
          jax_compile: fn -> JaxBench.Worker.request(jax, %{cmd: "first", model: model})["compile_us"] end,
          nx_emit: fn -> elem(:timer.tc(fn -> Plugboard.Nx.to_mlir(Models.function(model, dims), args) end), 0) end
        ],
        max(div(rounds, 2), 3)
      )

    {steady, first}
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

  defp ratio(a, b), do: :erlang.float_to_binary(a / b, decimals: 2) <> "x"
  defp us(t) when t >= 1000, do: "#{Float.round(t / 1000, 2)} ms"
  defp us(t), do: "#{Float.round(t / 1, 1)} us"

  defp row_text(s, f) do
    "step #{us(s.nx)} / JAX #{us(s.jax)} = #{ratio(s.nx, s.jax)}; first call #{us(f.nx)} / #{us(f.jax)} = #{ratio(f.nx, f.jax)}; " <>
      "compile alone #{us(f.nx_compile)} / #{us(f.jax_compile)} = #{ratio(f.nx_compile, f.jax_compile)}; emit #{us(f.nx_emit)}"
  end

  defp print_table(rows) do
    IO.puts("| model | step: Plugboard.Nx | JAX | ratio | first call: Plugboard.Nx | JAX | ratio | XLA compile: Plugboard.Nx | JAX | ratio | emit |")
    IO.puts("|---|---|---|---|---|---|---|---|---|---|---|")

    for {model, s, f} <- rows do
      IO.puts("| #{model} | #{us(s.nx)} | #{us(s.jax)} | #{ratio(s.nx, s.jax)} | #{us(f.nx)} | #{us(f.jax)} | #{ratio(f.nx, f.jax)} | " <>
                "#{us(f.nx_compile)} | #{us(f.jax_compile)} | #{ratio(f.nx_compile, f.jax_compile)} | #{us(f.nx_emit)} |")
    end
  end
end

defmodule JaxBench.Worker do
  @moduledoc false
  # bench/jax_models.py as a port: one JSON request a line, one JSON answer a line.

  def start do
    python = System.get_env("JAXBENCH_PYTHON") || raise "JAXBENCH_PYTHON: a Python with JAX 0.10.2 (bench/jax_bench.sh sets one up)"
    script = Path.expand("jax_models.py", __DIR__)
    Port.open({:spawn_executable, python}, [:binary, :exit_status, {:line, 1_048_576}, args: ["-u", script]])
  end

  def request(port, request) do
    Port.command(port, JSON.encode!(request) <> "\n")

    case JSON.decode!(read_line(port, [])) do
      %{"error" => error} -> raise "JAX's worker, #{inspect(request)}: #{error}"
      reply -> reply
    end
  end

  def version(port), do: request(port, %{cmd: "version"})["jax"]

  defp read_line(port, acc) do
    receive do
      {^port, {:data, {:eol, part}}} -> IO.iodata_to_binary(Enum.reverse([part | acc]))
      {^port, {:data, {:noeol, part}}} -> read_line(port, [part | acc])
      {^port, {:exit_status, status}} -> raise "JAX's worker (bench/jax_models.py) exited with status #{status}"
    end
  end
end

JaxBench.main(System.argv())
