defmodule Plugboard.Nx.CacheTest do
  # The table of compiled programs: bounded, evicting the least recently used; one compile per key
  # however many processes ask at once; no client kept alive by it (alone: the table is global).
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

    shapes = for {{_, _, templates, _, _, _}, {:ready, _}, _} <- :ets.tab2list(Cache), do: templates
    assert [{{:f, 32}, {1}, [nil], []}] in shapes
    # The newest shape is there, the oldest ones are gone.
    assert [{{:f, 32}, {61}, [nil], []}] in shapes
    refute [{{:f, 32}, {2}, [nil], []}] in shapes
  end

  test "one compile per key when many processes ask at once; a compiler that dies hands over", %{c: c} do
    counter = :counters.new(1, [])
    key = {Cache.client_key(c), make_ref(), [], [], false, []}

    compile = fn ->
      :counters.add(counter, 1, 1)
      Process.sleep(100)
      :compiled
    end

    results = 1..20 |> Task.async_stream(fn _ -> Cache.get_or_compile(c, key, compile) end) |> Enum.map(&elem(&1, 1))
    assert results == List.duplicate(:compiled, 20)
    assert :counters.get(counter, 1) == 1

    # A compiler killed mid-compile: a waiter compiles instead, and nobody hangs.
    key = {Cache.client_key(c), make_ref(), [], [], false, []}
    me = self()
    doomed = spawn(fn -> Cache.get_or_compile(c, key, fn -> send(me, :compiling); Process.sleep(:infinity) end) end)
    assert_receive :compiling
    waiter = Task.async(fn -> Cache.get_or_compile(c, key, fn -> :second end) end)
    Process.sleep(20)
    Process.exit(doomed, :kill)
    assert Task.await(waiter, 5_000) == :second
  end

  test "a client nobody refers to any more is not kept alive by the table" do
    {_, path} = hd(cpu_plugins())
    {id, weak} =
      (fn ->
         {:ok, client} = Plugboard.open(path)
         Nx.Defn.jit_apply(&Nx.add(&1, 1), [Nx.tensor(1)], compiler: Plugboard.Nx, client: client, output_backend: Nx.BinaryBackend)
         id = Cache.client_key(client)
         {id, :ok}
       end).()

    assert weak == :ok
    assert Enum.any?(:ets.tab2list(Cache), &match?({{^id, _, _, _, _, _}, _, _}, &1))
    :erlang.garbage_collect()
    Process.sleep(200)
    # The cache's own process drops the entries once the client's resource is destroyed.
    assert eventually(fn -> not Enum.any?(:ets.tab2list(Cache), &match?({{^id, _, _, _, _, _}, _, _}, &1)) end)
  end

  defp eventually(check, tries \\ 50) do
    cond do
      check.() -> true
      tries == 0 -> false
      true -> Process.sleep(20); eventually(check, tries - 1)
    end
  end
end
