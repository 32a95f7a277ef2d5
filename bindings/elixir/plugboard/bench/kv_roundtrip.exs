# The multi-host key-value store's cost per call (Plugboard.KeyValueStore), on two `erl` nodes on
# 127.0.0.1 started with :peer: node `a` holds the cluster's data (the leader), node `b` calls it.
# Each figure is timed on the calling node (:timer.tc around one call), so :peer's control channel
# is not in it:
#   - native try_get, remote leader: C++ KeyValueStore (a plugboard thread) -> handler on b ->
#     leader on a -> back (what a plugin's kv_try_get costs);
#   - native try_get, local leader: the same with the leader on the calling node;
#   - Elixir try_get, remote leader: the GenServer call alone (distribution's share).
#
#   bindings/elixir/plugboard/bench/kv_roundtrip.sh [BUILD_DIR] [CALLS]
alias Plugboard.KeyValueStore

calls = String.to_integer(List.first(System.argv()) || "2000")
paths = Enum.flat_map(:code.get_path(), &[~c"-pa", &1])

start = fn tag ->
  name = ~c"kv_bench_#{tag}_#{System.unique_integer([:positive])}"
  args = [~c"-setcookie", ~c"plugboard_kv_bench" | paths]
  {:ok, pid, node} = :peer.start(%{name: name, host: ~c"127.0.0.1", longnames: true, connection: :standard_io, args: args})
  # :plugboard itself: its supervisor holds the leader a store on that node starts.
  {:ok, _} = :peer.call(pid, Application, :ensure_all_started, [:plugboard])
  {pid, node}
end

{a, node_a} = start.("a")
{b, node_b} = start.("b")
true = :peer.call(b, Node, :connect, [node_a])
:ok = :peer.call(b, :global, :sync, [])
open = fn peer, cluster, name ->
  {:ok, _} = :peer.call(peer, KeyValueStore, :open, ["bench", [name: name, link: false, cluster: cluster]])
end

open.(a, :remote, :kv_a)
open.(b, :remote, :kv_b)
open.(b, :local, :kv_b_local)
^node_a = :peer.call(b, KeyValueStore, :leader, [:remote])
^node_b = :peer.call(b, KeyValueStore, :leader, [:local])
:ok = :peer.call(a, KeyValueStore, :native_put, [:kv_a, "key", :binary.copy("x", 64)])
:ok = :peer.call(b, KeyValueStore, :native_put, [:kv_b_local, "key", :binary.copy("x", 64)])

measure = fn label, f, args ->
  for _ <- 1..100, do: {:ok, _} = :peer.call(b, KeyValueStore, f, args)
  us =
    for _ <- 1..calls do
      {t, {:ok, _}} = :peer.call(b, :timer, :tc, [KeyValueStore, f, args])
      t
    end
    |> Enum.sort()

  pct = fn p -> Enum.at(us, min(length(us) - 1, trunc(p * length(us)))) end
  IO.puts(String.pad_trailing(label, 36) <> "p50 #{pct.(0.5)} us  p99 #{pct.(0.99)} us  (#{calls} calls)")
end

IO.puts("key-value store round trips, #{System.schedulers_online()} schedulers, loaded machine figures are noisy")
measure.("native try_get, remote leader", :native_try_get, [:kv_b, "key"])
measure.("native try_get, local leader", :native_try_get, [:kv_b_local, "key"])
measure.("Elixir try_get, remote leader", :try_get, [:kv_b, "key"])
:peer.stop(a)
:peer.stop(b)
