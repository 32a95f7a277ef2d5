defmodule Plugboard.Printer do
  @moduledoc """
  Logs ordered host calls routed to `:logger` (by default every `plugboard.print`), one line per call,
  in the order each execution made them:

      plugboard.print x: f32[2,4] [1.0, 2.0, ...]
  """
  use GenServer
  require Logger

  @limit 50

  @doc false
  def start_link(_), do: GenServer.start_link(__MODULE__, nil, name: __MODULE__)

  @impl true
  def init(nil), do: {:ok, nil}

  @impl true
  def handle_info({:plugboard_ordered, _ref, %Plugboard.OrderedCall{} = call}, state) do
    Logger.info(format(call))
    {:noreply, state}
  end

  def handle_info(_, state), do: {:noreply, state}

  @doc "The log line for an ordered call."
  @spec format(Plugboard.OrderedCall.t()) :: String.t()
  def format(%Plugboard.OrderedCall{name: name, operands: operands, attributes: attributes}) do
    label = Map.get(attributes, "label")
    values = Enum.map_join(operands, " ", &format_tensor/1)
    if label, do: "#{name} #{label}: #{values}", else: "#{name}: #{values}"
  end

  defp format_tensor(%Plugboard.HostTensor{dtype: dtype, shape: shape} = t) do
    dims = shape |> Tuple.to_list() |> Enum.join(",")
    elements = Plugboard.HostTensor.to_list(t)
    shown = Enum.take(elements, @limit) |> Enum.map_join(", ", &inspect/1)
    more = if length(elements) > @limit, do: ", ...", else: ""
    "#{dtype}[#{dims}] [#{shown}#{more}]"
  end
end
