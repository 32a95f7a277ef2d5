defmodule Plugboard.Nx.Arguments do
  @moduledoc false
  # The caller's name for a program parameter. A compiled program's parameters are the caller's
  # arguments flattened in order (`Nx.Defn.Composite.flatten_list(vars)`: a map's values by sorted
  # key, a tuple's elements in order), so an error about "parameter 3" would send the caller looking
  # at the wrong place; errors name "the 2nd argument (at key :w)" instead.

  alias Nx.Defn.Composite

  @doc """
  The caller's argument that flat parameter `index` of `vars` (the jit's argument list, each a tensor
  or a container) is: "the 2nd argument", or "the 2nd argument (at element 0, key :w)" inside a
  container (1-based, as a person counts arguments; elements and keys as in the container).
  """
  def name(vars, index) when is_list(vars) and is_integer(index) do
    {position, path} = locate(vars, index)
    "the #{ordinal(position + 1)} argument" <> if(path == [], do: "", else: " (at #{Enum.join(path, ", ")})")
  end

  # {argument position, path inside it} of flat index `index`.
  defp locate(vars, index) do
    vars
    |> Enum.with_index()
    |> Enum.reduce_while(index, fn {var, position}, left ->
      case leaves(var, []) do
        leaves when left < length(leaves) -> {:halt, {position, leaves |> Enum.at(left) |> Enum.reverse()}}
        leaves -> {:cont, left - length(leaves)}
      end
    end)
    |> case do
      {position, path} -> {position, path}
      _ -> raise ArgumentError, "Plugboard.Nx: no parameter #{index} among the #{length(Composite.flatten_list(vars))} of these arguments"
    end
  end

  # The path (reversed) of each tensor in `var`, in the order Composite.flatten_list/1 gives them.
  defp leaves(tuple, path) when is_tuple(tuple) do
    tuple |> Tuple.to_list() |> Enum.with_index() |> Enum.flat_map(fn {v, i} -> leaves(v, ["element #{i}" | path]) end)
  end

  defp leaves(%Nx.Tensor{}, path), do: [path]
  defp leaves(%Complex{}, path), do: [path]
  defp leaves(number, path) when is_number(number), do: [path]

  defp leaves(map, path) when is_map(map) and not is_struct(map) do
    map |> Enum.sort() |> Enum.flat_map(fn {k, v} -> leaves(v, ["key #{inspect(k)}" | path]) end)
  end

  # Any other container (a struct implementing Nx.Container): its tensors, in its own order.
  defp leaves(%module{} = struct, path) do
    List.duplicate(["in its %#{inspect(module)}{}" | path], length(Composite.flatten_list([struct])))
  end

  defp ordinal(n) when rem(n, 100) in 11..13, do: "#{n}th"
  defp ordinal(n) when rem(n, 10) == 1, do: "#{n}st"
  defp ordinal(n) when rem(n, 10) == 2, do: "#{n}nd"
  defp ordinal(n) when rem(n, 10) == 3, do: "#{n}rd"
  defp ordinal(n), do: "#{n}th"
end
