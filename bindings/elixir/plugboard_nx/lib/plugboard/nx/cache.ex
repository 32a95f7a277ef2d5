defmodule Plugboard.Nx.Cache do
  @moduledoc false
  # Compiled programs by key ({client, function key, argument templates, options}), in a public ETS
  # table owned by the application, bounded: at most `config :plugboard_nx, cache_entries:` (default
  # 512) entries; when an insert goes past it, the least recently used tenth goes. An entry holds its
  # executable, and so its client, until it is evicted. Two processes compiling the same key at once
  # both compile; the first insert wins and both results are valid executables.
  @table __MODULE__
  @default_entries 512

  def init do
    :ets.new(@table, [:named_table, :public, :set, read_concurrency: true, write_concurrency: true])
    :ok
  end

  def get_or_compile(key, compile) do
    case :ets.lookup(@table, key) do
      [{^key, value, _used}] ->
        :ets.update_element(@table, key, {3, stamp()})
        value

      [] ->
        value = compile.()
        if :ets.insert_new(@table, {key, value, stamp()}), do: evict(limit())
        value
    end
  end

  def size, do: :ets.info(@table, :size)
  def clear, do: :ets.delete_all_objects(@table)

  @doc false
  def limit, do: Application.get_env(:plugboard_nx, :cache_entries, @default_entries)

  # Past `limit` entries: the least recently used tenth of them (at least one) goes.
  defp evict(limit) do
    size = size()

    if size > limit do
      drop = max(size - limit, div(limit, 10)) |> max(1)

      :ets.select(@table, [{{:"$1", :_, :"$2"}, [], [{{:"$2", :"$1"}}]}])
      |> Enum.sort()
      |> Enum.take(drop)
      |> Enum.each(fn {_, key} -> :ets.delete(@table, key) end)
    end

    :ok
  end

  defp stamp, do: :erlang.unique_integer([:monotonic])
end
