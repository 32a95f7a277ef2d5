defmodule Plugboard.Nx.Shard do
  @moduledoc """
  `Nx.Defn.shard_jit/3` on plugboard: one program split over the devices of an `Nx.Mesh` (SPMD),
  as EXLA does it. Each device gets its own argument list (its shard of each tensor), the function
  is traced over the whole arrays those shards make up, XLA splits the program by the arguments'
  shardings and adds the collectives the function needs (a mean over a sharded batch becomes an
  all-reduce), and each device returns its part of the results, on that device.

      mesh = %Nx.Mesh{name: "batch", shape: {4}}
      step = Nx.Defn.shard_jit(&Train.step/3, mesh,
        compiler: Plugboard.Nx,
        input_shardings: [%{}, %{0 => [0]}, %{0 => [0]}])
      # one list of arguments per device: the parameters whole, a quarter of the batch each
      [{params0, loss0}, {params1, loss1} | _] = step.(for k <- 0..3, do: [params, x_k, y_k])

  Options (besides `Plugboard.Nx`'s `client:`):

    * `input_shardings:` (required) — one map per argument, `%{axis => [mesh_axis, ...]}`: the
      tensor axis (an index, or a name) split over those mesh axes (indices into the mesh's shape),
      each device holding its slice; axes not named are whole on every device, `%{}` is a
      replicated argument. A container argument's map holds for each of its tensors.
    * `partitioner:` — `:shardy` (default, as EXLA: the `sdy` dialect, Shardy) or `:gspmd`
      (`mhlo.sharding` attributes, XLA's GSPMD partitioner). The three CPU plugins split both
      (the guide "Nx on plugboard", "Many devices").
    * `devices:` — the client's device indices the mesh's devices are, in the mesh's row-major
      order (default: the first ones).

  Device `k` of the mesh (row-major over its shape) takes `args_list`'s `k`th list and returns the
  `k`th result. Vectorized arguments and results are as under `jit`: the program's values have the
  vectorized axes leading, whole on every device, and `input_shardings:` names axes of the inner
  shape. Programs are cached under the same key as jit's (`Plugboard.Nx.Cache.key/4`). A program with host calls (hooks, runtime calls) is refused: they are not carried
  across devices.
  """
  alias Nx.Defn.{Composite, Expr}
  alias Nx.Tensor, as: T
  alias Plugboard.Nx.{Backend, Cache, Emitter}

  @doc false
  def shard_jit(key, %Nx.Mesh{shape: mesh_shape} = mesh, vars, fun, args_list, opts) do
    client = Plugboard.Nx.client!(opts)
    n = mesh_devices(mesh_shape)
    partitioner = partitioner!(opts)
    devices = devices!(client, opts, n)
    shardings = shardings!(Keyword.get(opts, :input_shardings), vars, mesh_shape)

    if length(args_list) != n do
      raise ArgumentError,
            "Plugboard.Nx.shard_jit: the mesh #{inspect(mesh.name)} of shape #{inspect(mesh_shape)} has #{n} device(s); " <>
              "#{length(args_list)} argument list(s) given (one per device)"
    end

    cache_key = Cache.key(client, Plugboard.Nx.function_key(key), vars, {:shard, mesh_shape, shardings, partitioner, devices, Plugboard.Nx.debug?(opts)})

    {exe, output, used, constants} =
      Cache.get_or_compile(client, cache_key, fn -> compile(client, key, mesh_shape, vars, fun, shardings, partitioner, devices, opts) end)

    lists =
      for {args, device} <- Enum.zip(args_list, devices) do
        args = for {a, i} <- Enum.with_index(args), i in used, do: a
        Enum.map(args, &Backend.to_buffer(client, &1.(), device)) ++ Map.fetch!(constants, device)
      end

    Plugboard.Nx.refuse_inside_runtime_call(client, devices)

    for outputs <- Plugboard.run_partitioned!(exe, lists) do
      {result, []} =
        Composite.traverse(output, outputs, fn template, [buffer | rest] ->
          # Each device's part of a result has the shape XLA's propagation gave it (after the
          # vectorized axes, which lead the program's value and are whole on every device).
          inner = buffer.shape |> Tuple.to_list() |> Enum.drop(length(template.vectorized_axes)) |> List.to_tuple()
          {Backend.from_buffer(%{template | shape: inner}, buffer, client), rest}
        end)

      result
    end
  end

  defp compile(client, key, mesh_shape, vars, fun, shardings, partitioner, devices, opts) do
    {global_vars, leaf_shardings} = global_vars(vars, shardings, mesh_shape)
    {expr, output} = Plugboard.Nx.devectorized_output(fun.(global_vars))
    # The program's parameters are the tensors devectorized (vectorized axes leading), as for jit.
    params = global_vars |> Composite.flatten_list() |> Enum.map(&Nx.devectorize/1)
    annotations = annotations(partitioner, mesh_shape, leaf_shardings)
    {text, _, used, hooks, constants} = Emitter.to_mlir(params, expr, [], annotations)

    if hooks != [] do
      raise ArgumentError,
            "Plugboard.Nx.shard_jit: the function makes host calls (hooks, runtime calls, prints); a program split over devices cannot"
    end

    if opts[:debug], do: IO.puts(text)

    exe =
      Plugboard.compile!(client, text,
        name: Plugboard.Nx.name_of(key),
        partitions: length(devices),
        partitioner: partitioner,
        devices: devices
      )

    # Large constants live on every device with the executable, sent once.
    {exe, output, used, Map.new(devices, fn d -> {d, Enum.map(constants, &Backend.to_buffer(client, &1, d))} end)}
  end

  ## Options

  defp mesh_devices(shape) when is_tuple(shape) and tuple_size(shape) > 0 do
    dims = Tuple.to_list(shape)

    unless Enum.all?(dims, &(is_integer(&1) and &1 > 0)),
      do: raise(ArgumentError, "Plugboard.Nx.shard_jit: a mesh's shape is a tuple of positive sizes, got #{inspect(shape)}")

    Enum.product(dims)
  end

  defp mesh_devices(shape), do: raise(ArgumentError, "Plugboard.Nx.shard_jit: a mesh's shape is a tuple of positive sizes, got #{inspect(shape)}")

  defp partitioner!(opts) do
    case Keyword.get(opts, :partitioner, :shardy) do
      p when p in [:gspmd, :shardy] -> p
      other -> raise ArgumentError, "Plugboard.Nx.shard_jit: partitioner: must be :gspmd or :shardy, got #{inspect(other)}"
    end
  end

  defp devices!(client, opts, n) do
    {:ok, available} = Plugboard.devices(client)
    count = length(available)

    case Keyword.get(opts, :devices) do
      nil when n <= count ->
        Enum.to_list(0..(n - 1))

      nil ->
        raise ArgumentError,
              "Plugboard.Nx.shard_jit: the mesh has #{n} devices, the client (#{client.plugin}) has #{count}" <>
                " (a CPU plugin takes more with the create option cpu_device_count)"

      list when is_list(list) ->
        cond do
          length(list) != n -> raise ArgumentError, "Plugboard.Nx.shard_jit: devices: names #{length(list)} device(s) for a mesh of #{n}"
          Enum.any?(list, &(not is_integer(&1) or &1 < 0 or &1 >= count)) -> raise ArgumentError, "Plugboard.Nx.shard_jit: devices: #{inspect(list)} are not all device indices of a client with #{count}"
          length(Enum.uniq(list)) != n -> raise ArgumentError, "Plugboard.Nx.shard_jit: devices: #{inspect(list)} names a device twice"
          true -> list
        end

      other ->
        raise ArgumentError, "Plugboard.Nx.shard_jit: devices: must be a list of device indices, got #{inspect(other)}"
    end
  end

  # One normalized sharding per argument: a sorted list of {axis index, mesh axes}, checked against
  # each of the argument's tensors.
  defp shardings!(nil, _vars, _mesh),
    do: raise(ArgumentError, "Plugboard.Nx.shard_jit: input_shardings: is required, one map %{axis => [mesh_axis]} per argument (%{} for a replicated one)")

  defp shardings!(specs, vars, mesh_shape) when is_list(specs) do
    if length(specs) != length(vars) do
      raise ArgumentError, "Plugboard.Nx.shard_jit: input_shardings: #{length(specs)} given for #{length(vars)} argument(s)"
    end

    Enum.with_index(Enum.zip(specs, vars), fn {spec, var}, i -> sharding!(spec, var, i, mesh_shape) end)
  end

  defp shardings!(other, _vars, _mesh),
    do: raise(ArgumentError, "Plugboard.Nx.shard_jit: input_shardings: must be a list of maps, got #{inspect(other)}")

  defp sharding!(spec, var, i, mesh_shape) when is_map(spec) do
    bad = fn message -> raise ArgumentError, "Plugboard.Nx.shard_jit: input_shardings: argument #{i}: #{message}" end
    mesh_rank = tuple_size(mesh_shape)

    for leaf <- Composite.flatten_list([var]) do
      normalized =
        Enum.map(spec, fn {axis, mesh_axes} ->
          index = axis_index(axis, leaf) || bad.("#{inspect(axis)} is no axis of a tensor of shape #{inspect(leaf.shape)}")

          unless is_list(mesh_axes) and Enum.all?(mesh_axes, &(is_integer(&1) and &1 >= 0 and &1 < mesh_rank)),
            do: bad.("axis #{inspect(axis)} names #{inspect(mesh_axes)}; mesh axes are indices into the mesh's shape #{inspect(mesh_shape)}")

          {index, mesh_axes}
        end)
        |> Enum.sort()

      used = Enum.flat_map(normalized, &elem(&1, 1))
      if length(Enum.uniq(used)) != length(used), do: bad.("a mesh axis splits two tensor axes (#{inspect(spec)})")
      normalized
    end
    |> Enum.uniq()
    |> case do
      [] -> []
      [one] -> one
      _ -> bad.("its tensors name axes differently (#{inspect(spec)})")
    end
  end

  defp sharding!(spec, _var, i, _mesh),
    do: raise(ArgumentError, "Plugboard.Nx.shard_jit: input_shardings: argument #{i}: expected a map %{axis => [mesh_axis]}, got #{inspect(spec)}")

  defp axis_index(axis, %T{shape: shape}) when is_integer(axis) and axis >= 0 and axis < tuple_size(shape), do: axis

  defp axis_index(axis, %T{names: names}) when is_atom(axis) and not is_nil(axis),
    do: Enum.find_index(names, &(&1 == axis))

  defp axis_index(_, _), do: nil

  ## The whole arrays

  # Parameters of the whole arrays the devices' shards make up (a split axis is the shard's times
  # the devices along the mesh axes splitting it), and each tensor's sharding, in parameter order,
  # over the program's parameter: its vectorized axes lead, whole on every device.
  defp global_vars(vars, shardings, mesh_shape) do
    {vars, {_, leaves}} =
      Enum.zip(vars, shardings)
      |> Enum.map_reduce({0, []}, fn {var, sharding}, acc ->
        Composite.traverse(var, acc, fn %T{shape: shape, vectorized_axes: vectorized} = t, {i, leaves} ->
          global =
            Enum.reduce(sharding, shape, fn {axis, mesh_axes}, shape ->
              put_elem(shape, axis, elem(shape, axis) * Enum.product(Enum.map(mesh_axes, &elem(mesh_shape, &1))))
            end)

          lead = length(vectorized)
          program_sharding = for {axis, mesh_axes} <- sharding, do: {axis + lead, mesh_axes}
          {Expr.parameter(%T{t | shape: global, data: nil}, :root, i), {i + 1, [{program_sharding, lead + tuple_size(shape)} | leaves]}}
        end)
      end)

    {vars, Enum.reverse(leaves)}
  end

  ## Annotations

  defp annotations(partitioner, mesh_shape, leaf_shardings) do
    n = mesh_devices(mesh_shape)
    module = "{mhlo.num_partitions = #{n} : i32, mhlo.num_replicas = 1 : i32}"
    args = leaf_shardings |> Enum.with_index(fn s, i -> {i, argument_attribute(partitioner, mesh_shape, s)} end) |> Map.new()

    case partitioner do
      :gspmd ->
        %{module: module, args: args, constants: fn _ -> ~s|{mhlo.sharding = "{replicated}"}| end}

      :shardy ->
        axes = mesh_shape |> Tuple.to_list() |> Enum.with_index(fn size, a -> ~s|"axis_#{a}"=#{size}| end) |> Enum.join(", ")
        replicated = fn t -> argument_attribute(:shardy, mesh_shape, {[], tuple_size(t.shape)}) end
        %{module: module, preamble: "  sdy.mesh @mesh = <[#{axes}]>\n", args: args, constants: replicated}
    end
  end

  # A tensor's sharding as the partitioner reads it.
  defp argument_attribute(:gspmd, mesh_shape, {sharding, rank}), do: ~s|{mhlo.sharding = "#{gspmd(mesh_shape, sharding, rank)}"}|

  defp argument_attribute(:shardy, _mesh_shape, {sharding, rank}) do
    split = Map.new(sharding)
    dims = for axis <- 0..(rank - 1)//1, do: "{" <> Enum.map_join(Map.get(split, axis, []), ", ", &~s|"axis_#{&1}"|) <> "}"
    "{sdy.sharding = #sdy.sharding<@mesh, [#{Enum.join(dims, ", ")}]>}"
  end

  @doc false
  # The GSPMD (HloSharding) text of a sharding of a tensor of `rank` axes: the tile counts per axis,
  # then (when some mesh axes split nothing) a last axis over which the tiles are replicated; the
  # devices (partition ids, row-major over the mesh) listed in the order of the tiles.
  def gspmd(_mesh_shape, [], _rank), do: "{replicated}"

  def gspmd(mesh_shape, sharding, rank) do
    mesh_rank = tuple_size(mesh_shape)
    split = Map.new(sharding)
    tiles = for axis <- 0..(rank - 1), do: split |> Map.get(axis, []) |> Enum.map(&elem(mesh_shape, &1)) |> Enum.product()
    used = Enum.flat_map(0..(rank - 1), &Map.get(split, &1, []))
    rest = Enum.to_list(0..(mesh_rank - 1)) -- used
    replicated = rest |> Enum.map(&elem(mesh_shape, &1)) |> Enum.product()
    devices = transposed_iota(mesh_shape, used ++ rest)
    dims = if replicated > 1, do: tiles ++ [replicated], else: tiles
    "{devices=[#{Enum.join(dims, ",")}]#{Enum.join(devices, ",")}#{if replicated > 1, do: " last_tile_dim_replicate"}}"
  end

  # iota(prod(mesh_shape)) reshaped to mesh_shape, its axes permuted to `order`, flattened.
  defp transposed_iota(mesh_shape, order) do
    sizes = Tuple.to_list(mesh_shape)
    strides = sizes |> Enum.reverse() |> Enum.scan(1, &(&1 * &2)) |> Enum.reverse() |> tl() |> Kernel.++([1])
    ordered_sizes = Enum.map(order, &Enum.at(sizes, &1))
    ordered_strides = Enum.map(order, &Enum.at(strides, &1))

    Enum.reduce(Enum.zip(ordered_sizes, ordered_strides), [0], fn {size, stride}, acc ->
      for base <- acc, j <- 0..(size - 1), do: base + j * stride
    end)
  end
end
