defmodule Plugboard.Nx.Donation do
  @moduledoc false
  # Buffer donation from Nx: a tensor marked with `Nx.donatable/1` (the tensor field `donatable?`, on
  # an Nx that has it; on one without it nothing is ever donatable) gives its device buffer up to the
  # jitted program it is an argument of.
  #
  #   - at compile time, each donatable parameter the program reads is aliased to the first output of
  #     its type and shape not aliased yet (`tf.aliasing_output`, as jax.jit(donate_argnums=...) writes
  #     it): the plugin writes that output into the argument's memory. The program cache keys on the
  #     marks (Plugboard.Nx.Cache), so a donating and a plain call never share a program;
  #   - at run time, a donatable argument that already lives in a buffer of the program's client and
  #     device is passed with `donate:`, and its tensor is gone afterwards: any use of it is a
  #     `Plugboard.Error` saying it was donated. An argument that had to be copied to the device
  #     (another backend, client or device) is not donated: the copy is the program's alone and the
  #     caller's tensor stays as it was; nor is a buffer passed twice in one call (the plugin could
  #     not write into memory another argument reads). Nothing but the donated arguments is consumed;
  #   - nor is a buffer that does not own its memory (`Plugboard.donatable?/1`): a view of the binary
  #     a tensor was made from (`Plugboard.buffer/5` adopts binaries over 64 bytes, as
  #     `Nx.backend_transfer/2` and `Nx.tensor/2` on this backend make them), or of an address
  #     (`Nx.from_pointer/5`): the plugin copies what the program aliases, and the tensor stays. A
  #     training loop's parameters are program outputs after its first step, and those are donated;
  #   - nor is a buffer something else uses at the time of the call (another process reading it, an
  #     execution of it still starting): `Plugboard.donatable?/1` says false then, and should the use
  #     begin after it answered, plugboard refuses the run before it starts (:aborted) and Plugboard.Nx
  #     runs it again donating nothing (Plugboard.Nx's run!/5): passed as is, as a view is;
  #   - the mark is the user's, for their jit or compile call: the backend's eager operations pass
  #     their operands unmarked (Backend's jit/2), and results are never marked, not even a donated
  #     argument returned as is (unmark/1);
  #   - outputs written into donated memory are not new memory: BufferPressure does not count them
  #     (reused_bytes/3);
  #   - a program split over devices (`shard_jit`) refuses donatable arguments (refuse_split!/1),
  #     naming the caller's argument (Plugboard.Nx.Arguments).

  alias Plugboard.Nx.Backend

  @doc "Whether `tensor` is marked donatable (false on an Nx without the mark)."
  def donatable?(%Nx.Tensor{} = t), do: Map.get(t, :donatable?, false) == true
  def donatable?(_), do: false

  @doc "The indices, among `params` (flat tensors, in order), of the donatable ones."
  def donated(params), do: donated(params, 0)

  # One pass, no index list (on every jit call).
  defp donated([], _i), do: []
  defp donated([p | rest], i), do: if(donatable?(p), do: [i | donated(rest, i + 1)], else: donated(rest, i + 1))

  @doc """
  `tensor` (or each tensor of a tuple; anything else as is) not marked donatable. The mark is the
  user's, for their next jit or compile call: a result never carries it (not even a donated argument
  returned as is), nor do the operands of the backend's own eager programs. (On an Nx without the
  mark, the tensor as is.)
  """
  def unmark(%Nx.Tensor{} = t), do: Map.replace(t, :donatable?, false)
  def unmark(tuple) when is_tuple(tuple), do: tuple |> Tuple.to_list() |> Enum.map(&unmark/1) |> List.to_tuple()
  def unmark(other), do: other

  @doc """
  Which output each donated parameter is aliased to: param index => index in `outputs` (flat
  tensors), the first output with its type and shape that no earlier one took.
  """
  def pairs(params, donated, outputs) do
    free = outputs |> Enum.map(&{&1.type, &1.shape}) |> Enum.with_index()

    {pairs, _} =
      params
      |> Enum.with_index()
      |> Enum.filter(fn {_, i} -> i in donated end)
      |> Enum.reduce({%{}, free}, fn {p, i}, {acc, free} ->
        case Enum.find(free, fn {type_shape, _} -> type_shape == {p.type, p.shape} end) do
          nil -> {acc, free}
          {_, k} = taken -> {Map.put(acc, i, k), List.delete(free, taken)}
        end
      end)

    pairs
  end

  @doc """
  The argument attributes (param index => attribute dictionary, the emitter's `annotations.args`) of
  `pairs/3`. (A parameter the program does not read leaves the signature with its attribute: the
  output it took is then not aliased.)
  """
  def aliases(pairs), do: Map.new(pairs, fn {i, k} -> {i, "{tf.aliasing_output = #{k} : i32}"} end)

  @doc """
  The bytes of the outputs each run position's donation writes into the donated memory (run position
  => bytes), for the pairs/3 of a program whose run arguments are the parameters in `used`: outputs
  that take no new memory when that argument is donated.
  """
  def reused_bytes(pairs, used, outputs) do
    outputs = List.to_tuple(outputs)
    for {i, pos} <- Enum.with_index(used), k = pairs[i], k != nil, into: %{}, do: {pos, Nx.byte_size(elem(outputs, k))}
  end

  @doc "The positions, among the run's arguments (the parameters in `used`, in order), of the donated ones."
  def positions([], _used), do: []
  def positions(donated, used), do: for({i, pos} <- Enum.with_index(used), i in donated, do: pos)

  @doc """
  The `donate:` list of one run: of `positions`, those whose tensor (in `tensors`) is a buffer of this
  run passed as is (not a copy made for it) and passed once.
  """
  def run_donate([], _tensors, _buffers), do: []

  def run_donate(positions, tensors, buffers) do
    tensors = List.to_tuple(tensors)
    buffers_t = List.to_tuple(buffers)
    # One pass, however many arguments a model has.
    passed = Enum.frequencies_by(buffers, & &1.resource)

    Enum.filter(positions, fn pos ->
      buffer = elem(buffers_t, pos)

      match?(%Nx.Tensor{data: %Backend{buffer: ^buffer}}, elem(tensors, pos)) and
        Map.fetch!(passed, buffer.resource) == 1 and Plugboard.donatable?(buffer)
    end)
  end

  @doc "Refuses donatable arguments to a program split over several devices."
  def refuse_split!(vars) do
    case vars |> Nx.Defn.Composite.flatten_list() |> donated() do
      [] ->
        :ok

      [i | _] ->
        raise ArgumentError,
              "Plugboard.Nx.shard_jit: #{Plugboard.Nx.Arguments.name(vars, i)} is marked donatable (Nx.donatable/1), but a " <>
                "program split over several devices cannot take its buffer (each device gets its own part, copied from it); " <>
                "pass it without the mark"
    end
  end
end
