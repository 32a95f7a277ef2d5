defmodule Plugboard.Serving.Template do
  @moduledoc """
  What one entry of a `Plugboard.Serving`'s batches must look like (the shapes and types of its
  tensors, the batch axis left out: `Nx.template({3}, :f32)` for batches of `Nx.Batch.stack([t])`
  with `t` an f32 tensor of shape {3}), and the check of each request against it **in the caller's
  process, before the request joins a batch**: `Nx.Serving` merges the requests it has into one batch
  in the serving's process, where one request of another shape raises and takes down the serving and
  every other request of that batch. A request that does not match fails alone:

      ** (ArgumentError) Plugboard.Serving MyApp.Model: the request does not match the serving's
      template: expected f32 {3}, given f32 {2}

  The template is the serving's `template:` option (an `Nx.template/2` or a container of them), for
  every batch key. Without it nothing is checked, as in `Nx.Serving`: requests of different shapes
  that are sent one after another (never waiting together for the same batch) are answered, and
  requests of different shapes that do wait together fail together. A serving that batches
  (`batch_size` above 1) and takes concurrent requests from callers it does not trust should give
  `template:`. Nothing is learned from the requests: a serving may well take several shapes.
  """

  @doc false
  # `serving` with its client preprocessing checking each batch against `template` before the batch
  # goes to the serving's process (nil: no template, nothing checked).
  @spec checked(Nx.Serving.t(), atom(), Nx.Container.t() | nil) :: Nx.Serving.t()
  def checked(serving, _name, nil), do: serving

  def checked(%Nx.Serving{client_preprocessing: pre} = serving, name, template) do
    Nx.Serving.client_preprocessing(serving, fn input ->
      case if(pre, do: pre.(input), else: {input, :client_info}) do
        {batch, info} -> check(name, template, batch) && {batch, info}
        # Not {batch, info}: Nx.Serving refuses it, with its own message.
        other -> other
      end
    end)
  end

  @doc false
  # `template:` as given to Plugboard.Serving: nil or false (none), or a container of tensors/templates.
  @spec validate(term()) :: {:ok, Nx.Container.t() | nil} | {:error, String.t()}
  def validate(template) when template in [nil, false], do: {:ok, nil}

  def validate(template) do
    case Nx.Defn.Composite.flatten_list([template]) do
      [_ | _] -> {:ok, template}
      [] -> {:error, "template: has no tensor: #{inspect(template, limit: 5)}"}
    end
  rescue
    _ -> {:error, "template: must be an Nx.template/2 or a container of them, got #{inspect(template, limit: 5)}"}
  end

  # true, or raises in the caller's process for a batch that does not match.
  defp check(name, expected, %Nx.Batch{template: template}) when template != nil do
    Nx.compatible?(expected, template) ||
      raise ArgumentError,
            "Plugboard.Serving #{inspect(name)}: the request does not match the serving's template: " <>
              "expected #{describe(expected)}, given #{describe(template)}"
  end

  # A stream of batches (or what Nx.Serving refuses itself): not checked here.
  defp check(_name, _expected, _other), do: true

  defp describe(container) do
    [container]
    |> Nx.Defn.Composite.flatten_list()
    |> Enum.map_join(", ", fn t -> "#{Nx.Type.to_string(Nx.type(t))} #{inspect(Nx.shape(t))}" end)
  end
end
