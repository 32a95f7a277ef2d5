defmodule Plugboard.Nx.CacheTest do
  # The table of compiled programs is bounded and evicts the least recently used (alone: the bound is
  # global).
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

    shapes = for {{_, _, templates, _, _}, _, _} <- :ets.tab2list(Cache), do: templates
    assert [{{:f, 32}, {1}, [nil], []}] in shapes
    # The newest shape is there, the oldest ones are gone.
    assert [{{:f, 32}, {61}, [nil], []}] in shapes
    refute [{{:f, 32}, {2}, [nil], []}] in shapes
  end
end
