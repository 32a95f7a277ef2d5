defmodule Plugboard.Nx.MLIR do
  @moduledoc false
  # Nx types and values as MLIR text: element and tensor types, comparison kinds, and constants as
  # exact bit patterns (hex), so that NaN, infinities, f16 and bf16 values survive unchanged.

  @doc "The MLIR element type of an Nx type (`:pred` is the i1 of comparisons)."
  def element({:f, 8}), do: "f8E5M2"
  def element({:f8_e4m3fn, 8}), do: "f8E4M3FN"
  def element({:s, n}), do: "i#{n}"
  def element({:u, n}), do: "ui#{n}"
  def element({:f, n}), do: "f#{n}"
  def element({:bf, 16}), do: "bf16"
  def element({:c, 64}), do: "complex<f32>"
  def element({:c, 128}), do: "complex<f64>"
  def element(:pred), do: "i1"

  @doc "`tensor<2x3xf32>` for a type and a shape tuple."
  def tensor(type, shape) do
    dims = shape |> Tuple.to_list() |> Enum.map_join("", &"#{&1}x")
    "tensor<#{dims}#{element(type)}>"
  end

  @doc "The comparison type stablehlo.compare needs for operands of `type`."
  def comparison({:s, _}), do: "SIGNED"
  def comparison({:u, _}), do: "UNSIGNED"
  def comparison(:pred), do: "UNSIGNED"
  def comparison(_), do: "FLOAT"

  @doc "A list of integers as `[1, 2]`."
  def list(ints), do: "[" <> Enum.map_join(ints, ", ", &Integer.to_string/1) <> "]"

  @doc "A list of integers as `array<i64: 1, 2>`."
  def array([]), do: "array<i64>"
  def array(ints), do: "array<i64: " <> Enum.map_join(ints, ", ", &Integer.to_string/1) <> ">"

  @doc """
  The dense attribute of a scalar `value` (a number, `:nan`, `:infinity`, `:neg_infinity` or a
  `Complex`) of `type`: the element's bytes as Nx's binary backend encodes them, as a hex string.
  """
  def scalar_attribute(value, :pred), do: if(value in [0, false], do: "dense<false>", else: "dense<true>")

  def scalar_attribute(value, type) do
    binary = Nx.BinaryBackend.constant(%Nx.Tensor{type: type, shape: {}, names: []}, value, []).data.state
    hex_attribute(binary)
  end

  @doc "A dense attribute holding `binary`, the raw little-endian bytes of a tensor."
  def hex_attribute(binary), do: ~s(dense<"0x#{Base.encode16(binary)}">)
end
