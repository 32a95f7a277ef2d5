defmodule Plugboard.Nx.Cache do
  @moduledoc false
  # Compiled programs by key ({client, function key, argument templates, options}), in a public ETS
  # table owned by the application. Two processes compiling the same key at once both compile; the
  # first insert wins and both results are valid executables.
  @table __MODULE__

  def init do
    :ets.new(@table, [:named_table, :public, :set, read_concurrency: true])
    :ok
  end

  def get_or_compile(key, compile) do
    case :ets.lookup(@table, key) do
      [{^key, value}] ->
        value

      [] ->
        value = compile.()
        :ets.insert_new(@table, {key, value})
        value
    end
  end

  def size, do: :ets.info(@table, :size)
  def clear, do: :ets.delete_all_objects(@table)
end
