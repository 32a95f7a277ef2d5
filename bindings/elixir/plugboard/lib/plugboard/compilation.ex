defmodule Plugboard.Compilation do
  @moduledoc """
  Compiling a StableHLO program into a `Plugboard.Executable`, on a compile thread, or loading it
  from the bundle's precompiled programs or the persistent compile cache. `Plugboard` delegates these
  calls here.
  """
  alias Plugboard.{Client, Error, Executable, Native, NativeReply, Options, Telemetry}

  @doc """
  Compiles a StableHLO program (MLIR text or portable bytecode, or `{:file, path}`) on a compile
  thread; this process waits for the outcome in a `receive`.

  Options: `name:` (what messages call it), `callbacks:` (the host-callback names the program calls:
  they are declared on the plugin before compiling), `xla_options:` (`["name=value"]`),
  `plugin_defaults:` (leave out the options plugboard adds for JAX's numerics), `portable:` (runs on
  any device), `compile_cache:` (default `true`: the release bundle's precompiled programs, then the
  persistent compile cache, are looked in before compiling; see `Plugboard.Executable`'s `source`),
  `timeout:` (default `:infinity`).

  Several devices (SPMD): `partitions:` (how many parts XLA splits the program into, one per device),
  `partitioner:` (`:gspmd`, the program's `mhlo.sharding` attributes, or `:shardy`, its `sdy`
  dialect; which a plugin accepts is in the guide "Nx on plugboard", "Many devices"), `devices:` (the device indices
  partition by partition; default the first `partitions:`). The executable's `devices` lists where
  it runs; `Plugboard.run_partitioned/3` runs it.

      iex> program = "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> { return %x : tensor<4xf32> }"
      iex> {:ok, exe} = Plugboard.compile(Plugboard.client!(), program)
      iex> {exe.parameters, exe.results}
      {[{:f32, {4}}], [{:f32, {4}}]}
      iex> {:error, %Plugboard.Error{message: message}} = Plugboard.compile(Plugboard.client!(), "not a program", name: "bad")
      iex> message =~ "bad"
      true
  """
  @spec compile(Client.t(), binary() | {:file, Path.t()}, keyword()) :: Plugboard.result(Executable.t())
  def compile(client, program, opts \\ [])

  def compile(%Client{} = client, {:file, path}, opts) do
    case File.read(path) do
      {:ok, bytes} -> compile(client, bytes, Keyword.put_new(opts, :name, Path.basename(path)))
      {:error, reason} -> {:error, Error.new(:not_found, "cannot read program #{path}: #{:file.format_error(reason)}")}
    end
  end

  def compile(%Client{resource: r, target: target}, program, opts) when is_binary(program) do
    with :ok <- Options.known(opts, [:name, :callbacks, :xla_options, :plugin_defaults, :portable, :compile_cache, :timeout,
                                     :partitions, :partitioner, :devices], "compile"),
         {:ok, callbacks} <- Options.names(opts, :callbacks),
         {:ok, xla_options} <- Options.names(opts, :xla_options),
         {:ok, plugin_defaults} <- Options.boolean(opts, :plugin_defaults, false),
         {:ok, portable} <- Options.boolean(opts, :portable, false),
         {:ok, compile_cache} <- Options.boolean(opts, :compile_cache, true),
         {:ok, timeout} <- Options.timeout(opts, :timeout, :infinity),
         {:ok, partitioning} <- partitioning(opts),
         name = to_string(Keyword.get(opts, :name, "<inline>")),
         options = Map.merge(%{callbacks: callbacks, xla_options: xla_options, plugin_defaults: plugin_defaults, portable: portable,
                               compile_cache: compile_cache}, partitioning),
         ref = make_ref(),
         start = System.monotonic_time(),
         {:started, gate} <- Native.compile(r, program, name, options, self(), ref) do
      outcome =
        receive do
          {:plugboard_compiled, ^ref, outcome} -> outcome
        after
          timeout -> NativeReply.give_up(gate, ref, :plugboard_compiled, "compiling #{name} did not finish in #{timeout} ms")
        end

      # The NIF's executable has no target: its client's.
      outcome = with {:ok, exe} <- outcome, do: {:ok, Map.put(exe, :target, target)}
      Telemetry.compiled(outcome, name, target, start)
    end
  end

  def compile(client, program, _opts),
    do: Options.invalid("compile: expected a %Plugboard.Client{} and a program binary or {:file, path}, got #{inspect(client, limit: 3)} and #{inspect(program, limit: 3)}")

  # partitions:, partitioner:, devices: as the NIF takes them (none of them: nothing to add).
  defp partitioning(opts) do
    partitions = Keyword.get(opts, :partitions, 1)
    partitioner = Keyword.get(opts, :partitioner, if(partitions == 1, do: :none, else: nil))
    devices = Keyword.get(opts, :devices, [])

    cond do
      not (is_integer(partitions) and partitions >= 1 and partitions <= 32_768) ->
        Options.invalid("partitions: must be an integer in 1..32768, got #{inspect(partitions)}")

      partitioner not in [:none, :gspmd, :shardy] ->
        Options.invalid("partitioner: must be :gspmd or :shardy for #{partitions} partitions, got #{inspect(partitioner)}")

      not (is_list(devices) and Enum.all?(devices, &(is_integer(&1) and &1 >= 0 and &1 <= 2_147_483_647))) ->
        Options.invalid("devices: must be a list of device indices, got #{inspect(devices, limit: 5)}")

      devices != [] and length(devices) != partitions ->
        Options.invalid("devices: names #{length(devices)} device(s) for #{partitions} partition(s)")

      opts == [] or not Enum.any?([:partitions, :partitioner, :devices], &Keyword.has_key?(opts, &1)) ->
        {:ok, %{}}

      true ->
        {:ok, %{num_partitions: partitions, partitioner: Atom.to_string(partitioner), devices: devices}}
    end
  end

  @doc "Same as `compile/3`, raising the error."
  @spec compile!(Client.t(), binary() | {:file, Path.t()}, keyword()) :: Executable.t()
  def compile!(client, program, opts \\ []), do: Error.unwrap!(compile(client, program, opts))
end
