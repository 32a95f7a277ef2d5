defmodule Plugboard.Nx.Cache do
  @moduledoc false
  # Compiled programs by key (key/4: the client's id, the function, the arguments' templates, the
  # caller's options), in a public ETS table owned by this process:
  #   - bounded: at most `config :plugboard_nx, cache_entries:` (default 512) entries; when an insert
  #     goes past it, the least recently used tenth goes;
  #   - one compile per key: the first process to miss marks the key as compiling; the others wait
  #     for its result (or, if it fails or dies, one of them compiles);
  #   - no client kept alive: keys hold a client's id, not the client, and when the garbage collector
  #     destroys a client (Plugboard.notify_when_dropped/3) its entries go, every kind (jit,
  #     shard_jit): all keys are made by key/4, with the client's id in one place.
  use GenServer

  @table __MODULE__
  @default_entries 512
  @poll_ms 2
  @stamp_ms 1

  def start_link(_), do: GenServer.start_link(__MODULE__, [], name: __MODULE__)

  @impl true
  def init([]) do
    :ets.new(@table, [:named_table, :public, :set, read_concurrency: true, write_concurrency: true])
    {:ok, nil}
  end

  @impl true
  def handle_info({:client_dropped, id}, state) do
    :ets.match_delete(@table, {{:program, id, :_, :_, :_}, :_, :_})
    :ets.delete(@table, {:watched, id})
    {:noreply, state}
  end

  # The first compile for a client asks for word of its end, sent to this process. The client term
  # never reaches this process (a term in its heap would keep the client alive until its next GC).
  defp watch(client) do
    id = Plugboard.client_id(client)

    if :ets.insert_new(@table, {{:watched, id}, :watched, 0}),
      do: :ok = Plugboard.notify_when_dropped(client, Process.whereis(__MODULE__), {:client_dropped, id})

    :ok
  end

  @doc """
  The key of a program compiled for `client` (by its id, which does not keep it alive), `function`
  (`Plugboard.Nx.function_key/1`), arguments like `vars` and `options` (whatever else the program
  depends on). Two calls share a program only when their arguments agree in their whole structure
  (a map's keys, a tuple's size) and in each tensor's type, shape, names, vectorized axes and
  donatable mark (`Nx.donatable/1`).
  """
  def key(client, function, vars, options), do: {:program, Plugboard.client_id(client), function, Enum.map(vars, &template/1), options}

  # Nx.donatable/1's mark too (Plugboard.Nx.Donation): a donating program aliases its outputs to it.
  defp template(%Nx.Tensor{type: type, shape: shape, names: names, vectorized_axes: axes} = t),
    do: {type, shape, names, axes, Plugboard.Nx.Donation.donatable?(t)}
  defp template(container), do: Nx.Defn.Composite.traverse(container, &template/1)

  @doc "The compiled value for `key` (made by key/4 for `client`), compiling it with `compile` on a miss."
  def get_or_compile(client, {:program, _, _, _, _} = key, compile) do
    # Read only when telemetry is on (the hit's event measures the lookup).
    start = Plugboard.Telemetry.start_time()

    case :ets.lookup(@table, key) do
      [{^key, {:ready, value}, used}] ->
        # The use stamp is written at most once a millisecond per key (a write on every hit cost ~0.3 us).
        now = stamp()
        if now - used >= @stamp_ms, do: :ets.update_element(@table, key, {3, now})
        # A hit never reaches Plugboard.compile/3: its [:plugboard, :compile] event is this one.
        Plugboard.Telemetry.cache_hit(start, client.target)
        value

      [{^key, {:compiling, pid}, _}] ->
        wait(client, key, pid, compile)

      [] ->
        if :ets.insert_new(@table, {key, {:compiling, self()}, stamp()}),
          do: compile(client, key, compile),
          else: get_or_compile(client, key, compile)
    end
  end

  defp compile(client, key, compile) do
    value =
      try do
        compile.()
      catch
        kind, reason ->
          :ets.match_delete(@table, {key, {:compiling, self()}, :_})
          :erlang.raise(kind, reason, __STACKTRACE__)
      end

    :ets.insert(@table, {key, {:ready, value}, stamp()})
    watch(client)
    evict(limit())
    value
  end

  # Another process compiles `key`: wait for its result; if it dies first (killed mid-compile), its
  # mark goes and this process tries again.
  defp wait(client, key, pid, compile) do
    ref = Process.monitor(pid)

    result =
      Stream.repeatedly(fn ->
        receive do
          {:DOWN, ^ref, :process, ^pid, _} -> :down
        after
          @poll_ms -> :ets.lookup(@table, key)
        end
      end)
      |> Enum.find(fn
        :down -> true
        [{^key, {:compiling, ^pid}, _}] -> false
        _ -> true
      end)

    Process.demonitor(ref, [:flush])
    if result == :down, do: :ets.match_delete(@table, {key, {:compiling, pid}, :_})
    get_or_compile(client, key, compile)
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

      :ets.select(@table, [{{:"$1", {:ready, :_}, :"$2"}, [], [{{:"$2", :"$1"}}]}])
      |> Enum.sort()
      |> Enum.take(drop)
      |> Enum.each(fn {_, key} -> :ets.delete(@table, key) end)
    end

    :ok
  end

  # Milliseconds: uses within one millisecond of each other count as one (@stamp_ms).
  defp stamp, do: :erlang.monotonic_time(:millisecond)
end
