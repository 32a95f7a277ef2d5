defmodule Plugboard.Nx.Cache do
  @moduledoc false
  # Compiled programs by key (key/4: the client's id, the function, the arguments' templates, the
  # caller's options):
  #   - a hit reads `:persistent_term` (no copy: a cached jit runs on every call, and an ETS lookup
  #     copied the key and the value out, ~1 us of the Nx layer's +4 us; bench/nx_bench.exs). The
  #     public ETS table owned by this process holds what the cache knows of each key: {key,
  #     {:compiling, pid} | {:ready, last_use}, stamp}, `last_use` an :atomics cell a hit writes;
  #   - only this process puts and erases the terms (publish, evict, a dropped client, clear, a
  #     restart), so a term and its ready row come and go together: a compiling process killed at
  #     any point leaves no term that nothing would remove, and no two evictions race;
  #   - bounded: at most `config :plugboard_nx, cache_entries:` (default 512) entries; when a
  #     publish goes past it, the least recently used tenth goes. An entry that goes is a
  #     `:persistent_term` erase, each a copy of the table of terms and a pass over every process
  #     that might hold the term (its executable and constants are released when the pass ends, not
  #     when the erase returns), so the bound is there for a program churn, not for a steady state:
  #     a bound of tens of thousands makes each eviction costly;
  #   - one compile per key: the first process to miss marks the key as compiling; the others wait
  #     for its result (or, if it fails or dies, one of them compiles);
  #   - no client kept alive: keys hold a client's id, not the client, and when the garbage collector
  #     destroys a client (Plugboard.notify_when_dropped/3) its entries go, every kind (jit,
  #     shard_jit): all keys are made by key/4, with the client's id in one place.
  use GenServer

  @table __MODULE__
  @default_entries 512
  @poll_ms 2

  def start_link(_), do: GenServer.start_link(__MODULE__, [], name: __MODULE__)

  @impl true
  def init([]) do
    :ets.new(@table, [:named_table, :public, :set, read_concurrency: true, write_concurrency: true])
    # Programs of a table that died with its owner (this process, restarted): nothing would evict
    # them or drop them with their client. No other process puts one (publish/3 is a call here).
    erase_all()
    {:ok, nil}
  end

  @impl true
  def handle_call({:publish, key, value}, _from, state) do
    last_use = :atomics.new(1, signed: true)
    :atomics.put(last_use, 1, stamp())
    # The term first, then the row that tells waiters it is there.
    :persistent_term.put({__MODULE__, key}, {value, last_use})
    :ets.insert(@table, {key, {:ready, last_use}, stamp()})
    evict(limit())
    {:reply, :ok, state}
  end

  def handle_call(:clear, _from, state) do
    :ets.match_delete(@table, {{:program, :_, :_, :_, :_}, :_, :_})
    erase_all()
    {:reply, :ok, state}
  end

  @impl true
  def handle_info({:client_dropped, id}, state) do
    :ets.select(@table, [{{{:program, id, :_, :_, :_}, :_, :_}, [], [:"$_"]}]) |> Enum.each(&drop/1)
    :ets.delete(@table, {:watched, id})
    {:noreply, state}
  end

  defp erase_all, do: for({{__MODULE__, _} = key, _} <- :persistent_term.get(), do: :persistent_term.erase(key))

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
    # A hit's event (and its clock) only with the run events on (Plugboard.Telemetry.hit_start/0).
    start = Plugboard.Telemetry.hit_start()

    case :persistent_term.get({__MODULE__, key}, nil) do
      {value, last_use} ->
        # Written when the millisecond changed: a read of a cell every caller of the key shares.
        now = stamp()
        if :atomics.get(last_use, 1) != now, do: :atomics.put(last_use, 1, now)
        # A hit never reaches Plugboard.compile/3: its [:plugboard, :compile] event is this one.
        Plugboard.Telemetry.cache_hit(start, client.target)
        value

      nil ->
        missed(client, key, compile)
    end
  end

  defp missed(client, key, compile) do
    case :ets.lookup(@table, key) do
      [{^key, {:compiling, pid}, _}] ->
        wait(client, key, pid, compile)

      [] ->
        if :ets.insert_new(@table, {key, {:compiling, self()}, stamp()}),
          do: compile(client, key, compile),
          else: get_or_compile(client, key, compile)

      # Ready since the :persistent_term read, or going (evicted, its client dropped) this moment:
      # a row whose term is gone goes too, and the key is compiled again.
      [{^key, {:ready, _}, _} = row] ->
        if :persistent_term.get({__MODULE__, key}, nil) == nil, do: :ets.delete_object(@table, row)
        get_or_compile(client, key, compile)
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

    watch(client)

    # Published by this table's process; if it is gone (restarting), the value is used uncached and
    # the next caller compiles again.
    try do
      :ok = GenServer.call(__MODULE__, {:publish, key, value}, :infinity)
    catch
      :exit, _ -> :ets.whereis(@table) != :undefined and :ets.match_delete(@table, {key, {:compiling, self()}, :_})
    end

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

  @doc "The number of programs (compiled or compiling): what the bound counts."
  def size, do: :ets.select_count(@table, [{{{:program, :_, :_, :_, :_}, :_, :_}, [], [true]}])

  @doc "Forgets every compiled program (a test's fresh start)."
  def clear, do: GenServer.call(__MODULE__, :clear, :infinity)

  # One entry goes (in this table's process): its row, then its term, the one this row published (a
  # process that reads the term in between keeps using the value it got; one that reads it after
  # compiles again).
  defp drop({key, state, _} = row) do
    :ets.delete_object(@table, row)

    with {:ready, last_use} <- state,
         {_, ^last_use} <- :persistent_term.get({__MODULE__, key}, nil),
         do: :persistent_term.erase({__MODULE__, key})

    :ok
  end

  @doc false
  def limit, do: Application.get_env(:plugboard_nx, :cache_entries, @default_entries)

  # Past `limit` entries (in this table's process): the least recently used tenth of them (at least
  # one) goes.
  defp evict(limit) do
    size = size()

    if size > limit do
      count = max(size - limit, div(limit, 10)) |> max(1)

      :ets.select(@table, [{{:_, {:ready, :"$1"}, :_}, [], [{{:"$1", :"$_"}}]}])
      |> Enum.map(fn {last_use, row} -> {:atomics.get(last_use, 1), row} end)
      |> Enum.sort()
      |> Enum.take(count)
      |> Enum.each(fn {_, row} -> drop(row) end)
    end

    :ok
  end

  # Milliseconds: uses within one millisecond of each other count as one.
  defp stamp, do: :erlang.monotonic_time(:millisecond)
end
