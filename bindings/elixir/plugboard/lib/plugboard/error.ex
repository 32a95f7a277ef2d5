defmodule Plugboard.Error do
  @moduledoc """
  An error from plugboard or from a plugin: a canonical code (`:invalid_argument`, `:not_found`,
  `:unavailable`, ... — PJRT's and absl's codes, lower-cased) and a message that names the file,
  plugin or argument at fault, with the context it came through ("compiling add.mlir: ...").

  Functions return `{:error, %Plugboard.Error{}}`; their bang variants raise it.
  """
  @type code ::
          :cancelled | :unknown | :invalid_argument | :deadline_exceeded | :not_found | :already_exists
          | :permission_denied | :resource_exhausted | :failed_precondition | :aborted | :out_of_range
          | :unimplemented | :internal | :unavailable | :data_loss | :unauthenticated
  @type t :: %__MODULE__{code: code(), message: String.t()}
  defexception [:code, :message]

  @impl true
  def message(%__MODULE__{code: code, message: message}),
    do: "#{code |> Atom.to_string() |> String.upcase()}: #{message}"

  @doc false
  def new(code, message), do: %__MODULE__{code: code, message: message}

  @doc false
  # The bang variants' answer: the value, or the error raised.
  def unwrap!({:ok, value}), do: value
  def unwrap!({:error, %__MODULE__{} = error}), do: raise(error)
end
