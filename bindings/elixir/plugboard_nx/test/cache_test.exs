defmodule Plugboard.Nx.CacheTest do
  # The table of compiled programs: bounded, evicting the least recently used; one compile per key
  # however many processes ask at once; no client kept alive by it, and a dropped client's programs
  # (jit and shard_jit) released with their device memory (alone: the table and the native object
  # counts are global).
  use ExUnit.Case, async: false
  import Plugboard.Nx.Case
  alias Plugboard.Nx.Cache

  setup do
    previous = Application.get_env(:plugboard_nx, :cache_entries)
    Application.put_env(:plugboard_nx, :cache_entries, 20)
    Cache.clear()

    on_exit(fn ->
      if previous, do: Application.put_env(:plugboard_nx, :cache_entries, previous), else: Application.delete_env(:plugboard_nx, :cache_entries)
      Cache.clear()
    end)

    %{c: client(cpu_plugins() |> hd() |> elem(1))}
  end

  test "distinct shapes past the bound evict the least recently used; the one in use stays", %{c: c} do
    double = fn t -> Nx.Defn.jit_apply(&Nx.multiply(&1, 2), [t], compiler: Plugboard.Nx, client: c) end
    kept = Nx.tensor([1.0])

    for n <- 2..61 do
      assert Nx.to_list(double.(kept)) == [2.0]
      assert Nx.to_list(double.(Nx.iota({n}, type: :f32))) |> length() == n
      assert Cache.size() <= 20
    end

    shapes = for {{:program, _, _, templates, _}, {:ready, _}, _} <- :ets.tab2list(Cache), do: templates
    assert [{{:f, 32}, {1}, [nil], [], false}] in shapes
    # The newest shape is there, the oldest ones are gone.
    assert [{{:f, 32}, {61}, [nil], [], false}] in shapes
    refute [{{:f, 32}, {2}, [nil], [], false}] in shapes
  end

  test "one compile per key when many processes ask at once; a compiler that dies hands over", %{c: c} do
    counter = :counters.new(1, [])
    key = Cache.key(c, make_ref(), [], [])

    compile = fn ->
      :counters.add(counter, 1, 1)
      Process.sleep(100)
      :compiled
    end

    results = 1..20 |> Task.async_stream(fn _ -> Cache.get_or_compile(c, key, compile) end) |> Enum.map(&elem(&1, 1))
    assert results == List.duplicate(:compiled, 20)
    assert :counters.get(counter, 1) == 1

    # A compiler killed mid-compile: a waiter compiles instead, and nobody hangs.
    key = Cache.key(c, make_ref(), [], [])
    me = self()
    doomed = spawn(fn -> Cache.get_or_compile(c, key, fn -> send(me, :compiling); Process.sleep(:infinity) end) end)
    assert_receive :compiling
    waiter = Task.async(fn -> Cache.get_or_compile(c, key, fn -> :second end) end)
    Process.sleep(20)
    Process.exit(doomed, :kill)
    assert Task.await(waiter, 5_000) == :second
  end

  test "a dropped client's programs go, jit and shard_jit alike: its executables and buffers are released" do
    {_, path} = hd(cpu_plugins())
    before = settled_objects()

    {id, during} =
      (fn ->
         {:ok, client} = Plugboard.open(path, [{"cpu_device_count", 2}])
         Nx.Defn.jit_apply(&Nx.add(&1, 1), [Nx.tensor(1)], compiler: Plugboard.Nx, client: client, output_backend: Nx.BinaryBackend)
         # A constant over 64 KiB: a buffer on each device, held by the cache entry with the program.
         big = Nx.iota({4, 8192}, type: :f32)
         x = Nx.iota({4, 8192}, type: :f32)
         mesh = %Nx.Mesh{name: "rows", shape: {2}}
         args = for k <- 0..1, do: [Nx.slice_along_axis(x, 2 * k, 2)]
         parts = Nx.Defn.shard_jit(&Nx.add(&1, big), mesh, compiler: Plugboard.Nx, client: client, input_shardings: [%{0 => [0]}]).(args)
         assert length(parts) == 2
         {Plugboard.client_id(client), Plugboard.native_objects()}
       end).()

    # Both programs were cached (their executables alive) while the client was.
    assert during.executable >= before.executable + 2, "during: #{inspect(during)} (before: #{inspect(before)})"

    # Once the garbage collector destroys the client, the cache drops all of its entries, and with
    # them the executables and the constants' buffers that kept the native client alive.
    released? = fn ->
      settle()
      now = Plugboard.native_objects()
      now.client <= before.client and now.executable <= before.executable and now.buffer <= before.buffer
    end

    assert eventually(released?), "left: #{inspect(Plugboard.native_objects())} (before: #{inspect(before)}); " <>
                                    "entries: #{inspect(for {{:program, ^id, _, _, o}, _, _} <- :ets.tab2list(Cache), do: elem(o, 0))}"
    refute Enum.any?(:ets.tab2list(Cache), &match?({{:program, ^id, _, _, _}, _, _}, &1))
  end

  test "the bound counts programs, not the clients the table watches (regression)" do
    # One program on each of three clients: three programs under a bound of 3, with three clients
    # watched beside them. When the bound counted the watch rows too, each publish evicted.
    Application.put_env(:plugboard_nx, :cache_entries, 3)
    clients = for {_, path} <- cpu_plugins(), do: client(path)
    assert length(clients) == 3
    x = Nx.tensor([1.0, 2.0])
    f = &Nx.subtract(&1, 5)
    for c <- clients, do: Nx.Defn.jit_apply(f, [x], compiler: Plugboard.Nx, client: c, output_backend: Nx.BinaryBackend)
    assert Cache.size() == 3
    assert length(programs()) == 3
  end

  test "a restarted cache leaves none of its programs behind, and compiles again", %{c: c} do
    x = Nx.tensor([1.0, 2.0])
    jit = fn -> Nx.Defn.jit_apply(&Nx.multiply(&1, 7), [x], compiler: Plugboard.Nx, client: c, output_backend: Nx.BinaryBackend) end
    assert Nx.to_flat_list(jit.()) == [7.0, 14.0]
    assert programs() != []

    # Killed: its table goes with it; the programs it held must go too (nothing else evicts them).
    old = Process.whereis(Cache)
    ref = Process.monitor(old)
    Process.exit(old, :kill)
    assert_receive {:DOWN, ^ref, :process, ^old, :killed}
    assert eventually(fn -> (pid = Process.whereis(Cache)) != nil and pid != old and :ets.whereis(Cache) != :undefined end)
    assert programs() == []

    assert Nx.to_flat_list(jit.()) == [7.0, 14.0]
    assert [_] = programs()
  end

  defp programs, do: for({{Cache, _} = key, _} <- :persistent_term.get(), do: key)

  # Every process's garbage collected, and the native teardowns that set off finished.
  defp settle do
    for pid <- Process.list(), do: :erlang.garbage_collect(pid)
    :ok = Plugboard.Native.await_teardowns(5_000)
  end

  # The native object counts once the programs setup/1 cleared are gone: an entry's program is a
  # :persistent_term, released after the VM's pass over the processes that an erase starts, so the
  # counts may still fall for a moment after settle/0 (two reads 20 ms apart that agree).
  defp settled_objects(tries \\ 50) do
    settle()
    first = Plugboard.native_objects()
    Process.sleep(20)
    settle()
    again = Plugboard.native_objects()
    if Map.take(first, [:client, :executable, :buffer]) == Map.take(again, [:client, :executable, :buffer]) or tries == 0,
      do: again,
      else: settled_objects(tries - 1)
  end

  defp eventually(check, tries \\ 50) do
    cond do
      check.() -> true
      tries == 0 -> false
      true -> Process.sleep(20); eventually(check, tries - 1)
    end
  end
end
