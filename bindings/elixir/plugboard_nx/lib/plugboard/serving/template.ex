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
  every batch key; without it, when the serving batches (`batch_size` above 1), the template of each
  batch key is learned from the first request of that key that was answered (until then, requests
  are not checked). `template: false` checks nothing (a serving of `batch_size: 1` never merges two
  requests, and one whose requests of different shapes never arrive together may take them).
  """

  @doc false
  # `serving` with its client preprocessing checking each batch against `name`'s template (`template`,
  # or learned by its client postprocessing), before the batch goes to the serving's process.
  @spec checked(Nx.Serving.t(), atom(), Nx.Container.t() | nil | false) :: Nx.Serving.t()
  def checked(serving, _name, false), do: serving

  def checked(%Nx.Serving{client_preprocessing: pre, client_postprocessing: post} = serving, name, template) do
    serving
    |> Nx.Serving.client_preprocessing(fn input ->
      case if(pre, do: pre.(input), else: {input, :client_info}) do
        {batch, info} -> {batch, {info, check(name, template, batch)}}
        # Not {batch, info}: Nx.Serving refuses it, with its own message.
        other -> other
      end
    end)
    |> Nx.Serving.client_postprocessing(fn result, {info, learned} ->
      if learned, do: remember(name, learned)
      if post, do: post.(result, info), else: output(result)
    end)
  end

  @doc false
  # `template:` as given to Plugboard.Serving: nil (learned), false (none), or a container of
  # tensors/templates.
  @spec validate(term()) :: {:ok, Nx.Container.t() | nil | false} | {:error, String.t()}
  def validate(template) when template in [nil, false], do: {:ok, template}

  def validate(template) do
    case Nx.Defn.Composite.flatten_list([template]) do
      [_ | _] -> {:ok, template}
      [] -> {:error, "template: has no tensor: #{inspect(template, limit: 5)}"}
    end
  rescue
    _ -> {:error, "template: must be an Nx.template/2 or a container of them, got #{inspect(template, limit: 5)}"}
  end

  @doc false
  # Forgets the templates learned for `name` (its serving stopped: a new one may take other shapes).
  def forget(name) do
    for {{__MODULE__, ^name, _} = key, _} <- :persistent_term.get(), do: :persistent_term.erase(key)
    :ok
  end

  # {key, template} to learn once this request is answered (nil: nothing to learn); raises, in the
  # caller's process, for a batch that does not match.
  defp check(name, fixed, %Nx.Batch{key: key, template: template}) when template != nil do
    expected = fixed || :persistent_term.get({__MODULE__, name, key}, nil)

    cond do
      expected == nil -> {key, template}
      Nx.compatible?(expected, template) -> nil
      true ->
        raise ArgumentError,
              "Plugboard.Serving #{inspect(name)}: the request does not match the serving's template: " <>
                "expected #{describe(expected)}, given #{describe(template)}"
    end
  end

  # A stream of batches (or what Nx.Serving refuses itself): not checked here.
  defp check(_name, _fixed, _other), do: nil

  defp remember(name, {key, template}) do
    # Once per key: a persistent term is written only the first time (no global GC on later requests).
    if :persistent_term.get({__MODULE__, name, key}, nil) == nil, do: :persistent_term.put({__MODULE__, name, key}, template)
  end

  defp describe(container) do
    [container]
    |> Nx.Defn.Composite.flatten_list()
    |> Enum.map_join(", ", fn t -> "#{Nx.Type.to_string(Nx.type(t))} #{inspect(Nx.shape(t))}" end)
  end

  # What Nx.Serving answers without a client postprocessing: the output (a stream passes as it is).
  defp output({output, _metadata}), do: output
  defp output(stream), do: stream
end
