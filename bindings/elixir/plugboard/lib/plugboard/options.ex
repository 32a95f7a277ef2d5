defmodule Plugboard.Options do
  @moduledoc false
  # Checks the options of Plugboard's functions whole, before anything reaches the NIF: every bad
  # option is an {:error, %Plugboard.Error{code: :invalid_argument}} that names it.
  alias Plugboard.Error

  # Erlang's own limit for `receive ... after` (ms).
  @max_timeout 4_294_967_295

  @doc "Refuses keys not in `known` (opts must be a keyword list)."
  def known(opts, known, function) do
    cond do
      not Keyword.keyword?(opts) ->
        invalid("#{function}: options must be a keyword list, got #{inspect(opts, limit: 5)}")

      (unknown = Keyword.keys(opts) -- known) != [] ->
        invalid("#{function}: unknown option(s) #{inspect(unknown)}; known: #{inspect(known)}")

      true ->
        :ok
    end
  end

  @doc "A time-out in ms: :infinity or an integer in 0..4294967295."
  def timeout(opts, key, default) do
    case Keyword.get(opts, key, default) do
      :infinity -> {:ok, :infinity}
      ms when is_integer(ms) and ms >= 0 and ms <= @max_timeout -> {:ok, ms}
      other -> invalid("#{key}: must be :infinity or an integer number of ms in 0..#{@max_timeout}, got #{inspect(other)}")
    end
  end

  @doc "A non-negative integer (device indices)."
  def index(opts, key, default) do
    case Keyword.get(opts, key, default) do
      i when is_integer(i) and i >= 0 and i <= 2_147_483_647 -> {:ok, i}
      other -> invalid("#{key}: must be an integer in 0..2147483647, got #{inspect(other)}")
    end
  end

  @doc "nil when absent, else a non-negative integer (node ids and counts)."
  def optional_index(opts, key) do
    if Keyword.get(opts, key) == nil, do: {:ok, nil}, else: index(opts, key, nil)
  end

  @doc "nil when absent, else a byte count (an integer in 0..2^64-1)."
  def optional_bytes(opts, key) do
    case Keyword.get(opts, key) do
      nil -> {:ok, nil}
      n when is_integer(n) and n >= 0 and n <= 18_446_744_073_709_551_615 -> {:ok, n}
      other -> invalid("#{key}: must be a number of bytes (an integer in 0..2^64-1), got #{inspect(other, limit: 3)}")
    end
  end

  def boolean(opts, key, default) do
    case Keyword.get(opts, key, default) do
      b when is_boolean(b) -> {:ok, b}
      other -> invalid("#{key}: must be true or false, got #{inspect(other)}")
    end
  end

  @doc "A list of strings (atoms are taken as their names)."
  def names(opts, key) do
    list = Keyword.get(opts, key, [])

    if is_list(list) and Enum.all?(list, &(is_binary(&1) or (is_atom(&1) and not is_boolean(&1) and not is_nil(&1)))),
      do: {:ok, Enum.map(list, &to_string/1)},
      else: invalid("#{key}: must be a list of strings, got #{inspect(list, limit: 5)}")
  end

  @doc "A map or keyword list of name => binding; each binding is checked by `valid?`."
  def bindings(opts, key, valid?, what) do
    value = Keyword.get(opts, key) || %{}

    pairs =
      cond do
        is_map(value) -> Map.to_list(value)
        is_list(value) and Enum.all?(value, &match?({_, _}, &1)) -> value
        true -> :bad
      end

    with pairs when is_list(pairs) <- pairs,
         [] <- for({name, _} <- pairs, not name?(name), do: name),
         [] <- for({name, binding} <- pairs, not valid?.(binding), do: {name, binding}) do
      {:ok, Map.new(pairs, fn {k, v} -> {to_string(k), v} end)}
    else
      :bad -> invalid("#{key}: must be a map of callback name => #{what}, got #{inspect(value, limit: 5)}")
      [{name, binding} | _] -> invalid("#{key}: #{inspect(name)} is bound to #{inspect(binding, limit: 5)}; it must be #{what}")
      [name | _] -> invalid("#{key}: the callback name #{inspect(name)} must be a string")
    end
  end

  # A callback name: a string, an atom, or a charlist.
  defp name?(name), do: is_binary(name) or (is_atom(name) and not is_nil(name)) or (is_list(name) and List.ascii_printable?(name) and name != [])

  def invalid(message), do: {:error, Error.new(:invalid_argument, message)}
end
