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
  #   - a program split over devices (`shard_jit`) refuses donatable arguments (refuse_split!/1).

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
  The argument attributes (param index => attribute dictionary, the emitter's `annotations.args`)
  aliasing each donated parameter to the first output of `outputs` (flat tensors) with its type and
  shape that no earlier one took. (A parameter the program does not read leaves the signature with
  its attribute: the output it took is then not aliased.)
  """
  def aliases(params, donated, outputs) do
    free = outputs |> Enum.map(&{&1.type, &1.shape}) |> Enum.with_index()

    {attributes, _} =
      params
      |> Enum.with_index()
      |> Enum.filter(fn {_, i} -> i in donated end)
      |> Enum.reduce({%{}, free}, fn {p, i}, {acc, free} ->
        case Enum.find(free, fn {type_shape, _} -> type_shape == {p.type, p.shape} end) do
          nil -> {acc, free}
          {_, k} = taken -> {Map.put(acc, i, "{tf.aliasing_output = #{k} : i32}"), List.delete(free, taken)}
        end
      end)

    attributes
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
    if Enum.any?(Nx.Defn.Composite.flatten_list(vars), &donatable?/1) do
      raise ArgumentError,
            "Plugboard.Nx.shard_jit: an argument is marked donatable (Nx.donatable/1), but a program split over " <>
              "several devices cannot take its buffer (each device gets its own part, copied from it); " <>
              "pass it without the mark"
    end

    :ok
  end
end
