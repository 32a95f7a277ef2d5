defmodule Plugboard.TestSupport.JSON do
  @moduledoc """
  A strict JSON reader for the tests (OTP 25 has none): the whole text must be one value (RFC 8259:
  objects, arrays, strings with their escapes and surrogate pairs, numbers, true, false, null), or
  it raises naming the offset. Objects become maps with string keys (a key given twice raises),
  integers integers, numbers with a fraction or an exponent floats.
  """

  def decode!(iodata) do
    text = IO.iodata_to_binary(iodata)
    {value, rest} = value(skip(text), text)

    case skip(rest) do
      "" -> value
      more -> fail(text, more, "text after the value")
    end
  end

  defp skip(<<c, rest::binary>>) when c in [?\s, ?\t, ?\n, ?\r], do: skip(rest)
  defp skip(rest), do: rest

  defp value(<<?{, rest::binary>>, text), do: object(skip(rest), text, %{})
  defp value(<<?[, rest::binary>>, text), do: array(skip(rest), text, [])
  defp value(<<?", rest::binary>>, text), do: string(rest, text, [])
  defp value(<<"true", rest::binary>>, _), do: {true, rest}
  defp value(<<"false", rest::binary>>, _), do: {false, rest}
  defp value(<<"null", rest::binary>>, _), do: {nil, rest}
  defp value(<<c, _::binary>> = rest, text) when c == ?- or c in ?0..?9, do: number(rest, text)
  defp value(rest, text), do: fail(text, rest, "a value expected")

  defp object(<<?}, rest::binary>>, _text, acc) when map_size(acc) == 0, do: {acc, rest}

  defp object(<<?", rest::binary>>, text, acc) do
    {key, rest} = string(rest, text, [])
    if Map.has_key?(acc, key), do: fail(text, rest, "key #{inspect(key)} given twice")

    case skip(rest) do
      <<?:, rest::binary>> ->
        {v, rest} = value(skip(rest), text)
        acc = Map.put(acc, key, v)

        case skip(rest) do
          <<?,, rest::binary>> -> object(skip(rest), text, acc)
          <<?}, rest::binary>> -> {acc, rest}
          rest -> fail(text, rest, "',' or '}' expected")
        end

      rest ->
        fail(text, rest, "':' expected")
    end
  end

  defp object(rest, text, _), do: fail(text, rest, "a key expected")

  defp array(<<?], rest::binary>>, _text, []), do: {[], rest}

  defp array(rest, text, acc) do
    {v, rest} = value(rest, text)

    case skip(rest) do
      <<?,, rest::binary>> -> array(skip(rest), text, [v | acc])
      <<?], rest::binary>> -> {Enum.reverse([v | acc]), rest}
      rest -> fail(text, rest, "',' or ']' expected")
    end
  end

  defp string(<<?", rest::binary>>, _text, acc), do: {IO.iodata_to_binary(acc), rest}
  defp string(<<?\\, e, rest::binary>>, text, acc) when e in ~c("\\/), do: string(rest, text, [acc, e])
  defp string(<<"\\b", rest::binary>>, text, acc), do: string(rest, text, [acc, 8])
  defp string(<<"\\f", rest::binary>>, text, acc), do: string(rest, text, [acc, 12])
  defp string(<<"\\n", rest::binary>>, text, acc), do: string(rest, text, [acc, 10])
  defp string(<<"\\r", rest::binary>>, text, acc), do: string(rest, text, [acc, 13])
  defp string(<<"\\t", rest::binary>>, text, acc), do: string(rest, text, [acc, 9])

  defp string(<<"\\u", h::binary-4, "\\u", l::binary-4, rest::binary>> = at, text, acc) do
    case {hex(h, text, at), hex(l, text, at)} do
      {hi, lo} when hi in 0xD800..0xDBFF and lo in 0xDC00..0xDFFF ->
        string(rest, text, [acc, <<(0x10000 + (hi - 0xD800) * 0x400 + (lo - 0xDC00))::utf8>>])

      {hi, _} ->
        string(binary_part(at, 6, byte_size(at) - 6), text, [acc, code_point(hi, text, at)])
    end
  end

  defp string(<<"\\u", h::binary-4, rest::binary>> = at, text, acc), do: string(rest, text, [acc, code_point(hex(h, text, at), text, at)])
  defp string(<<?\\, _::binary>> = rest, text, _), do: fail(text, rest, "a bad escape")
  defp string(<<c, _::binary>> = rest, text, _) when c < 0x20, do: fail(text, rest, "a control character in a string")
  defp string(<<c::utf8, rest::binary>>, text, acc), do: string(rest, text, [acc, <<c::utf8>>])
  defp string(rest, text, _), do: fail(text, rest, "invalid UTF-8 or an unterminated string")

  defp hex(h, text, at) do
    case Integer.parse(h, 16) do
      {n, ""} -> n
      _ -> fail(text, at, "a bad \\u escape")
    end
  end

  defp code_point(n, text, at) when n in 0xD800..0xDFFF, do: fail(text, at, "a lone surrogate")
  defp code_point(n, _, _), do: <<n::utf8>>

  defp number(rest, text) do
    case Regex.run(~r/\A-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/, rest) do
      [n] -> {String.to_integer(n), binary_part(rest, byte_size(n), byte_size(rest) - byte_size(n))}
      [n | _] -> {float(n), binary_part(rest, byte_size(n), byte_size(rest) - byte_size(n))}
      nil -> fail(text, rest, "a bad number")
    end
  end

  # Erlang's binary_to_float wants a fraction: "1e5" -> "1.0e5".
  defp float(n) do
    n = if n =~ ".", do: n, else: String.replace(n, ~r/[eE]/, ".0e")
    String.to_float(n)
  end

  defp fail(text, rest, what), do: raise(ArgumentError, "JSON: #{what} at offset #{byte_size(text) - byte_size(rest)}")
end
