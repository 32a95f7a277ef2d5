# What bench/jax_bench.exs and bench/jax_settings.exs share: the client, the models' inputs, JAX's
# worker (bench/jax_models.py as a port) and the equality check.
defmodule JaxBench.Harness do
  alias JaxBench.Models

  @rtol 1.0e-4
  @atol 1.0e-5

  def open_client do
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
  def inputs(model, dims) do
    base = Enum.find_index(Models.names(), &(&1 == model)) * 100

    for {{name, shape, init}, i} <- Enum.with_index(Models.inputs(model, dims)),
        do: {name, shape, Models.data(base + i, shape, init)}
  end

  def on_device(client, inputs) do
    for {_, shape, data} <- inputs,
        do: data |> Nx.from_binary(:f32) |> Nx.reshape(shape) |> Nx.backend_transfer({Plugboard.Nx.Backend, client: client})
  end

  @doc "JAX's outputs of one call of the loaded model: [{shape, raw f32}]."
  def jax_outputs(jax, model) do
    dir = Path.join(System.tmp_dir!(), "jax_bench_out_#{System.pid()}")
    File.mkdir_p!(dir)
    %{"shapes" => shapes} = JaxBench.Worker.request(jax, %{cmd: "outputs", model: model, dir: dir})
    outputs = for {shape, i} <- Enum.with_index(shapes), do: {List.to_tuple(shape), File.read!(Path.join(dir, "#{model}.out#{i}.f32"))}
    File.rm_rf!(dir)
    outputs
  end

  # [{shape, raw f32}] of JAX against Plugboard.Nx's: an error line per output that differs.
  def compare(model, nx_outputs, jax_outputs) do
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

  def max_error(nx_outputs, jax_outputs) do
    for({{_, nx}, {_, jax}} <- Enum.zip(nx_outputs, jax_outputs), {a, b} <- Enum.zip(f32s(nx), f32s(jax)), is_float(a) and is_float(b),
        do: abs(a - b) / max(abs(b), @atol / @rtol))
    |> Enum.max(fn -> 0.0 end)
  end

  @doc "The inputs to files JAX's worker reads, and the model loaded there."
  def load(jax, model, dims, inputs) do
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

  @doc "How many steps make a round of about 0.25 s, from `step.(1)` (microseconds per step)."
  def steps_per_round(step) do
    estimate = Enum.min(for _ <- 1..3, do: step.(1))
    estimate |> then(&round(250_000 / max(&1, 1))) |> max(1) |> min(20_000)
  end

  def ratio(a, b), do: :erlang.float_to_binary(a / b, decimals: 2) <> "x"
  def us(t) when t >= 1000, do: "#{Float.round(t / 1000, 2)} ms"
  def us(t), do: "#{Float.round(t / 1, 1)} us"

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

