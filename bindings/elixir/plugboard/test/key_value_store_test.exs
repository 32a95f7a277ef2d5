defmodule Plugboard.KeyValueStoreTest do
  # The multi-host key-value store across real OS nodes on 127.0.0.1 (:peer starts `erl` processes,
  # distributed among themselves; epmd starts with the first of them when none runs, and is stopped
  # after when this module started it and no node is left on it): every native_* call goes C++
  # KeyValueStore -> its handler process -> the cluster's leader (often on another node) -> back,
  # through the object a client's plugin calls. The test VM drives the peers over their standard I/O
  # (:peer's control channel), so it stays out of their cluster and its own distribution is untouched.
  # The peers run with prevent_overlapping_partitions off: with OTP 25's default, a node stopped
  # mid-test makes :global disconnect survivors from one another until a connector heals the mesh
  # (what a release's cluster formation does), which is not what these tests are about. Their
  # distribution (and an epmd they start) listens on 127.0.0.1 only, with a cookie random to this run.
  use ExUnit.Case, async: false
  import Bitwise
  import ExUnit.CaptureLog

  alias Plugboard.{Error, KeyValueStore, Native}
  alias Plugboard.KeyValueStore.Server
  alias Plugboard.TestSupport.{KvPeer, SchedulerWatch}
  @compile {:no_warn_undefined, :telemetry}

  @moduletag timeout: 120_000

  setup_all do
    :persistent_term.put({__MODULE__, :cookie}, Base.encode32(:crypto.strong_rand_bytes(20), padding: false))
    epmd_ran = match?({_, 0}, System.cmd("epmd", ["-names"], stderr_to_stdout: true))
    a = start_peer("a")
    b = start_peer("b")

    on_exit(fn ->
      for {pid, _} <- [a, b], Process.alive?(pid), do: :peer.stop(pid)
      unless epmd_ran, do: System.cmd("epmd", ["-kill"], stderr_to_stdout: true)
    end)

    %{a: a, b: b}
  end

  setup %{a: a, b: b} do
    heal([a, b])
    %{cluster: :"kv_cluster_#{System.unique_integer([:positive])}"}
  end

  # A node of its own: an `erl` process with this VM's code paths, connected to the `others`.
  defp start_peer(tag, others \\ []) do
    name = ~c"kv_#{tag}_#{System.unique_integer([:positive])}"
    paths = Enum.flat_map(:code.get_path(), &[~c"-pa", &1])
    cookie = String.to_charlist(:persistent_term.get({__MODULE__, :cookie}))
    args = [~c"-setcookie", cookie, ~c"-kernel", ~c"prevent_overlapping_partitions", ~c"false",
            ~c"-kernel", ~c"inet_dist_use_interface", ~c"{127,0,0,1}" | paths]
    {:ok, pid, node} = :peer.start(%{name: name, host: ~c"127.0.0.1", longnames: true, connection: :standard_io, args: args,
                                     env: [{~c"ERL_EPMD_ADDRESS", ~c"127.0.0.1"}]})
    # :plugboard itself: its supervisor holds the leader a store on that node starts.
    {:ok, _} = :peer.call(pid, Application, :ensure_all_started, [:plugboard])
    peer = {pid, node}
    heal([peer | others])
    peer
  end

  # Every pair connected and :global in step on each (names registered anywhere seen everywhere).
  defp heal(peers) do
    for {pid, _} <- peers, {_, other} <- peers, do: true = :peer.call(pid, Node, :connect, [other])
    for {pid, _} <- peers, do: :ok = :peer.call(pid, :global, :sync, [])
  end

  # A store on the peer whose handler outlives the call (link: false), registered there as `name`.
  defp open_on(peer, namespace, name, cluster) do
    {:ok, %KeyValueStore{}} = on(peer, :open, [namespace, [name: name, link: false, cluster: cluster]])
    name
  end

  defp on({pid, _node}, fun, args), do: :peer.call(pid, KeyValueStore, fun, args, 40_000)

  defp ms_since(start), do: System.monotonic_time(:millisecond) - start

  defp stop_peer({pid, node}, survivors) do
    :ok = :peer.stop(pid)
    for {p, _} <- survivors, do: wait_until(fn -> node not in :peer.call(p, Node, :list, []) end)
  end

  # What the peer logged while `fun` ran (a logger_std_h file handler added there for that time).
  defp peer_log({pid, _}, fun) do
    log = Path.join(System.tmp_dir!(), "kv_peer_#{System.unique_integer([:positive])}.log")
    handler = :"kv_log_#{System.unique_integer([:positive])}"
    :ok = :peer.call(pid, :logger, :add_handler, [handler, :logger_std_h, %{config: %{file: String.to_charlist(log)}}])

    try do
      fun.()
    after
      :ok = :peer.call(pid, :logger_std_h, :filesync, [handler])
      :ok = :peer.call(pid, :logger, :remove_handler, [handler])
    end

    text = File.read!(log)
    File.rm(log)
    text
  end

  defp wait_until(fun, tries \\ 100) do
    cond do
      fun.() -> :ok
      tries == 0 -> flunk("condition not reached in 5 s")
      true -> Process.sleep(50) && wait_until(fun, tries - 1)
    end
  end

  test "a put on one node is read on another through the native store", %{a: a, b: b, cluster: c} do
    store_a = open_on(a, "job", :kv_put_get_a, c)
    store_b = open_on(b, "job", :kv_put_get_b, c)
    assert on(a, :leader, [c]) == elem(a, 1)
    assert on(a, :native_put, [store_a, "node:0/devices", <<0, 1, 255>>]) == :ok
    assert on(b, :native_try_get, [store_b, "node:0/devices"]) == {:ok, <<0, 1, 255>>}
    assert on(b, :native_get, [store_b, "node:0/devices", 1000]) == {:ok, <<0, 1, 255>>}
    # A later put replaces the value; Elixir's own calls see what the native store put.
    assert on(b, :native_put, [store_b, "node:0/devices", "again"]) == :ok
    assert on(a, :try_get, [store_a, "node:0/devices"]) == {:ok, "again"}
    assert {:error, %Error{code: :not_found, message: msg}} = on(b, :native_try_get, [store_b, "missing"])
    assert msg =~ "missing"
  end

  test "a get of a key nobody puts ends with deadline_exceeded after its timeout", %{a: a, b: b, cluster: c} do
    _ = open_on(a, "job", :kv_timeout_a, c)
    store_b = open_on(b, "job", :kv_timeout_b, c)
    start = System.monotonic_time(:millisecond)
    assert {:error, %Error{code: :deadline_exceeded, message: msg}} = on(b, :native_get, [store_b, "never", 300])
    waited = ms_since(start)
    assert msg =~ "never" and msg =~ "300 ms"
    assert waited >= 300
    assert waited < 2_300, "a 300 ms get took #{waited} ms"
  end

  test "a get waiting for a key returns when another node puts it", %{a: a, b: b, cluster: c} do
    store_a = open_on(a, "job", :kv_wait_a, c)
    store_b = open_on(b, "job", :kv_wait_b, c)
    start = System.monotonic_time(:millisecond)
    getter = Task.async(fn -> on(b, :native_get, [store_b, "barrier", 20_000]) end)
    Process.sleep(300)
    assert on(a, :native_put, [store_a, "barrier", "go"]) == :ok
    assert Task.await(getter, 25_000) == {:ok, "go"}
    waited = ms_since(start)
    assert waited >= 300
    assert waited < 5_000, "the get did not wake at the put (#{waited} ms)"
  end

  test "namespaces keep two clients' keys apart", %{a: a, b: b, cluster: c} do
    job1 = open_on(a, "job-1", :kv_ns_1, c)
    job2 = open_on(a, "job-2", :kv_ns_2, c)
    job1_b = open_on(b, "job-1", :kv_ns_1b, c)
    assert on(a, :native_put, [job1, "rank", "one"]) == :ok
    assert on(a, :native_put, [job2, "rank", "two"]) == :ok
    assert on(b, :native_get, [job1_b, "rank", 1000]) == {:ok, "one"}
    assert on(a, :native_try_get, [job2, "rank"]) == {:ok, "two"}
    assert on(a, :native_put, [job1, "only-in-1", "x"]) == :ok
    assert {:error, %Error{code: :not_found}} = on(a, :native_try_get, [job2, "only-in-1"])
  end

  test "a node other than the leader leaves: what it put stays", %{a: a, b: b, cluster: c} do
    store_a = open_on(a, "job", :kv_leave_a, c)
    leaving = start_peer("leaving", [a, b])
    store_l = open_on(leaving, "job", :kv_leave_l, c)
    assert on(leaving, :leader, [c]) == elem(a, 1)
    assert on(leaving, :native_put, [store_l, "from-leaving", "kept"]) == :ok
    stop_peer(leaving, [a, b])
    assert on(a, :leader, [c]) == elem(a, 1)
    assert on(a, :native_get, [store_a, "from-leaving", 1000]) == {:ok, "kept"}
  end

  test "the leader leaves: a waiting get fails unavailable at once and a new, empty leader takes over", %{a: a, b: b, cluster: c} do
    leader = start_peer("leader", [a, b])
    store_l = open_on(leader, "job", :kv_lead_l, c)
    store_b = open_on(b, "job", :kv_lead_b, c)
    assert on(b, :leader, [c]) == elem(leader, 1)
    assert on(leader, :native_put, [store_l, "before", "v"]) == :ok
    start = System.monotonic_time(:millisecond)
    getter = Task.async(fn -> on(b, :native_get, [store_b, "never", 30_000]) end)
    Process.sleep(300)
    stop_peer(leader, [a, b])
    assert {:error, %Error{code: :unavailable, message: msg}} = Task.await(getter, 35_000)
    assert msg =~ "gone"
    assert ms_since(start) < 10_000, "the waiting get did not fail when the leader left"
    # The data went with the leader; the next call starts an empty one on the caller's node.
    assert {:error, %Error{code: :not_found}} = on(b, :native_try_get, [store_b, "before"])
    assert on(b, :leader, [c]) == elem(b, 1)
    assert on(b, :native_put, [store_b, "after", "w"]) == :ok
    assert on(b, :native_get, [store_b, "after", 1000]) == {:ok, "w"}
  end

  test "a split cluster heals by merging its two leaders; calls retried there see the merged data at once; a key put on both sides keeps one value and the loss is logged", %{a: a, b: b, cluster: c} do
    {pid_a, node_a} = a
    {pid_b, node_b} = b
    store_a = open_on(a, "job", :kv_split_a, c)
    store_b = open_on(b, "job", :kv_split_b, c)
    assert on(a, :native_put, [store_a, "before", "v"]) == :ok
    assert on(b, :leader, [c]) == node_a
    # The split: a and b lose sight of each other; b's next call starts a leader of its own there.
    true = :peer.call(pid_a, Node, :disconnect, [node_b])
    wait_until(fn -> node_b not in :peer.call(pid_a, Node, :list, []) and node_a not in :peer.call(pid_b, Node, :list, []) end)
    wait_until(fn -> on(b, :leader, [c]) != node_a end)
    assert on(a, :native_put, [store_a, "left", "from a"]) == :ok
    assert on(b, :native_put, [store_b, "right", "from b"]) == :ok
    assert on(a, :native_put, [store_a, "both", "a's"]) == :ok
    assert on(b, :native_put, [store_b, "both", "b's"]) == :ok
    assert on(b, :native_put, [store_b, "mine", "1"]) == :ok
    # 64 MB more on b's side: its handover to a takes a while.
    assert :peer.call(pid_b, KvPeer, :put_bulk, [store_b, "bulk", 64_000_000], 40_000) == :ok
    assert on(b, :leader, [c]) == node_b
    # A get waiting at b's leader is handed over with the rest.
    getter = Task.async(fn -> on(b, :native_get, [store_b, "late", 20_000]) end)
    Process.sleep(300)
    # b's leader is held over the heal, so that :global's order to merge waits in its mailbox, and
    # calls from a third node queue behind that order: they end with the leader and are retried at
    # the one kept (a's), over another connection than the handover's.
    leader_b = :peer.call(pid_b, Server, :whereis, [c])
    :ok = :peer.call(pid_b, :sys, :suspend, [leader_b])

    text =
      peer_log(a, fn ->
        heal([a, b])
        # One leader again (the lower node's, a's).
        assert on(a, :leader, [c]) == node_a and on(b, :leader, [c]) == node_a
        queued = fn -> elem(:peer.call(pid_b, Process, :info, [leader_b, :messages]), 1) end
        wait_until(fn -> Enum.any?(queued.(), &match?({:merge_into, _}, &1)) end)
        third = start_peer("third", [a, b])

        retried =
          for request <- [{:try_get, nil, "job", "right"}, {:put, nil, "job", "mine", "2"}],
              do: :peer.call(elem(third, 0), KvPeer, :start, [Server, :call, [leader_b, request, 10_000]])

        wait_until(fn -> Enum.count(queued.(), &match?({:"$gen_call", _, _}, &1)) == 2 end)
        :ok = :peer.call(pid_b, :sys, :resume, [leader_b])
        # The retried calls: answered by a's leader with what b's held.
        assert [{:ok, "from b"}, :ok] == for(pid <- retried, do: :peer.call(elem(third, 0), KvPeer, :result, [pid, 30_000]))
        stop_peer(third, [a, b])
        # Both sides' keys, readable from both nodes, at once.
        assert on(a, :native_try_get, [store_a, "right"]) == {:ok, "from b"}
        assert on(b, :native_try_get, [store_b, "left"]) == {:ok, "from a"}
        assert on(b, :native_try_get, [store_b, "before"]) == {:ok, "v"}
        assert on(b, :native_try_get, [store_b, "both"]) == {:ok, "a's"}
        assert on(a, :native_try_get, [store_a, "mine"]) == {:ok, "2"}
        assert on(a, :native_put, [store_a, "late", "w"]) == :ok
        assert Task.await(getter, 25_000) == {:ok, "w"}
      end)

    # The one key put on both sides is reported; "mine", put again after the merge, is no conflict.
    assert text =~ "healed a split with #{node_b}" and text =~ "1 key(s) put on both sides" and text =~ ~s({"job", "both"}), text
    refute text =~ "mine", text
  end

  test "a partition keeps the keys of a job whose stores are all on the other side; away past the grace, they are dropped and reported", %{a: a, b: b, cluster: c} do
    {pid_a, node_a} = a
    {pid_b, node_b} = b
    _ = open_on(a, "here", :kv_part_a, c)
    store_b = open_on(b, "there", :kv_part_b, c)
    assert on(b, :leader, [c]) == node_a
    assert on(b, :native_put, [store_b, "k", "v"]) == :ok
    split = fn ->
      true = :peer.call(pid_a, Node, :disconnect, [node_b])
      wait_until(fn -> node_b not in :peer.call(pid_a, Node, :list, []) and node_a not in :peer.call(pid_b, Node, :list, []) end)
      # The leader (on a) has seen b's handler go down (:noconnection) by the time it answers this.
      Process.sleep(300)
      assert {:error, %Error{code: :not_found}} = on(a, :try_get, [:kv_part_a, "nothing"])
    end

    # A partition shorter than the grace (5 minutes by default): the job's keys are there after it.
    split.()
    heal([a, b])
    assert on(b, :native_try_get, [store_b, "k"]) == {:ok, "v"}

    # Away longer than the grace: dropped, and the leader's node says so.
    :ok = :peer.call(pid_a, Application, :put_env, [:plugboard, :key_value_store_away_ms, 200])

    text =
      try do
        peer_log(a, fn ->
          split.()
          Process.sleep(600)
        end)
      after
        :ok = :peer.call(pid_a, Application, :delete_env, [:plugboard, :key_value_store_away_ms])
      end

    assert text =~ ~s(deleted namespace "there") and text =~ "1 key(s)" and text =~ "#{node_b}", text
    heal([a, b])
    assert {:error, %Error{code: :not_found}} = on(b, :native_try_get, [store_b, "k"])
  end

  test "a store's handler that crashes takes its namespace's keys with it: logged and reported lost", %{cluster: c} do
    {:ok, kv} = KeyValueStore.open("crashed", cluster: c)
    :ok = KeyValueStore.put(kv, "k", "v")
    me = self()
    telemetry? = Plugboard.Telemetry.enabled?()
    if telemetry?, do: :telemetry.attach("kv-lost-ns", [:plugboard, :key_value_store, :lost], fn _, m, md, _ -> send(me, {:lost, m, md}) end, nil)

    log =
      capture_log(fn ->
        ref = Process.monitor(kv.handler)
        Process.exit(kv.handler, :kill)
        assert_receive {:DOWN, ^ref, :process, _, :killed}
        # The leader has handled the handler's end by the time it answers this.
        {:ok, other} = KeyValueStore.open("other", cluster: c)
        assert {:error, %Error{code: :not_found}} = KeyValueStore.try_get(other, "k")
      end)

    assert log =~ ~s(deleted namespace "crashed") and log =~ "1 key(s)" and log =~ ":killed", log

    if telemetry? do
      :telemetry.detach("kv-lost-ns")
      assert_received {:lost, %{keys: 1, waiters: 0}, %{cluster: ^c, namespace: "crashed", reason: :killed}}
    end
  end

  test "deleting a finished namespace costs its own waiters, not every waiting get", %{cluster: c} do
    {:ok, busy} = KeyValueStore.open("busy", cluster: c)
    leader = Server.whereis(c)
    # 20,000 gets waiting in another namespace (sent as requests: no process each).
    for _ <- 1..20_000, do: :gen_server.send_request(leader, {:get, busy.handler, "busy", "later", 60_000})
    stores = for i <- 1..50, do: elem(KeyValueStore.open("small-#{i}", cluster: c), 1)
    for kv <- stores, do: :ok = KeyValueStore.put(kv, "k", "v")
    {:reductions, before} = Process.info(leader, :reductions)
    for kv <- stores, do: :ok = KeyValueStore.close(kv)
    # The leader has handled the 50 ends by the time it answers this.
    assert {:error, %Error{code: :not_found}} = KeyValueStore.try_get(busy, "k")
    {:reductions, after_closes} = Process.info(leader, :reductions)
    spent = after_closes - before
    IO.puts("[ kv ] reductions of the leader for 50 namespaces deleted beside 20,000 waiting gets: #{spent}")
    assert spent < 200_000, "deleting 50 namespaces cost the leader #{spent} reductions with 20,000 gets waiting elsewhere"
    :ok = KeyValueStore.put(busy, "later", "done")
  end

  test "telling a store's pid from another process's copies nothing of that process", %{cluster: _} do
    me = self()
    other =
      spawn(fn ->
        Process.put(:big, Enum.to_list(1..1_000_000))
        send(me, :ready)
        receive(do: (:stop -> :ok))
      end)

    assert_receive :ready, 10_000

    {pid, ref} =
      spawn_monitor(fn ->
        result = KeyValueStore.close(other)
        send(me, {:closed, result, Process.info(self(), :memory)})
      end)

    assert_receive {:closed, {:error, %Error{code: :invalid_argument}}, {:memory, memory}}, 10_000
    assert_receive {:DOWN, ^ref, :process, ^pid, _}
    assert Process.alive?(other)
    send(other, :stop)
    assert memory < 1_000_000, "close/1 of a process that is no store took #{memory} bytes (its dictionary copied)"
  end

  test "a store whose handler exited fails its native calls unavailable at once", %{cluster: c} do
    {:ok, kv} = KeyValueStore.open("job", cluster: c)
    {:ok, resource} = KeyValueStore.resource(kv)
    :ok = KeyValueStore.close(kv)
    # Through the handle, the gone handler is an error value too, and opening a client with it.
    assert {:error, %Error{code: :unavailable}} = KeyValueStore.native_try_get(kv, "k")
    assert {:error, %Error{code: :unavailable}} = KeyValueStore.resource(kv)
    assert {:error, %Error{code: :unavailable}} = Plugboard.open(Plugboard.TestSupport.first_plugin(), [], kv_store: kv)
    ref = make_ref()
    start = System.monotonic_time(:millisecond)
    :ok = Native.kv_call(resource, :get, "k", 30_000, ref)
    assert_receive {^ref, {:error, %Error{code: :unavailable}}}, 5_000
    assert ms_since(start) < 5_000
  end

  test "a store's native object is released once its handler and every term are gone", %{cluster: c} do
    before = Plugboard.native_objects().key_value_store

    {pid, ref} =
      spawn_monitor(fn ->
        {:ok, kv} = KeyValueStore.open("gc", cluster: c)
        :ok = KeyValueStore.native_put(kv, "k", "v")
        {:ok, "v"} = KeyValueStore.native_get(kv, "k", 1000)
      end)

    assert_receive {:DOWN, ^ref, :process, ^pid, :normal}, 10_000
    # The handler was linked to the process that opened it: both gone, the resource goes with them.
    assert Plugboard.TestSupport.eventually(fn ->
             :erlang.garbage_collect()
             Plugboard.native_objects().key_value_store <= before
           end),
           "stores left: #{inspect(Plugboard.native_objects())} (before: #{before})"
  end

  test "open/2 refuses bad options, naming them" do
    assert {:error, %Error{code: :invalid_argument, message: m1}} = KeyValueStore.open("")
    assert m1 =~ "namespace"
    assert {:error, %Error{code: :invalid_argument, message: m2}} = KeyValueStore.open("job", bogus: 1)
    assert m2 =~ "bogus"
    {:ok, kv} = KeyValueStore.open("job")
    assert {:error, %Error{code: :invalid_argument, message: m3}} = KeyValueStore.native_get(kv, :key, 10)
    assert m3 =~ "native_get" and m3 =~ "key: :key"
    assert {:error, %Error{code: :invalid_argument}} = KeyValueStore.get(kv, "k", -1)
    assert {:error, %Error{code: :invalid_argument}} = KeyValueStore.native_put(kv, "k", 1)
  end

  test "a timeout beyond the VM's longest timer is refused, naming it; the leader and its data stay", %{cluster: c} do
    {:ok, kv} = KeyValueStore.open("job", cluster: c)
    :ok = KeyValueStore.put(kv, "k", "v")
    waiter = Task.async(fn -> KeyValueStore.get(kv, "later", 20_000) end)
    leader = Server.whereis(c)

    for function <- [:get, :native_get], timeout <- [1 <<< 48, 4_294_967_296, -1, :never] do
      assert {:error, %Error{code: :invalid_argument, message: m}} = apply(KeyValueStore, function, [kv, "missing", timeout])
      assert m =~ "#{function}" and m =~ "timeout" and m =~ inspect(timeout), m
    end

    assert Server.whereis(c) == leader
    assert KeyValueStore.try_get(kv, "k") == {:ok, "v"}
    :ok = KeyValueStore.put(kv, "later", "w")
    assert Task.await(waiter, 5_000) == {:ok, "w"}
    # :infinity is a timeout, natively too (the C++ store's milliseconds::max(), handed to the
    # leader as int64's maximum: no timer, no overflow).
    forever = Task.async(fn -> KeyValueStore.native_get(kv, "forever", :infinity) end)
    Process.sleep(300)
    :ok = KeyValueStore.put(kv, "forever", "x")
    assert Task.await(forever, 5_000) == {:ok, "x"}
  end

  test "the leader runs under the :plugboard supervisor; its crash fails waiting gets and reports the loss", %{cluster: c} do
    {:ok, kv} = KeyValueStore.open("job", cluster: c)
    :ok = KeyValueStore.put(kv, "k", "v")
    leader = Server.whereis(c)
    assert leader in for({_, pid, _, _} <- DynamicSupervisor.which_children(Plugboard.KeyValueStore.Supervisor), do: pid)
    waiter = Task.async(fn -> KeyValueStore.get(kv, "never", 30_000) end)
    Process.sleep(200)
    me = self()
    # With :telemetry (the Elixir 1.18 pass), the loss is an event too.
    telemetry? = Plugboard.Telemetry.enabled?()
    if telemetry?, do: :telemetry.attach("kv-lost", [:plugboard, :key_value_store, :lost], fn _, m, md, _ -> send(me, {:lost, m, md}) end, nil)

    log =
      capture_log(fn ->
        ref = Process.monitor(leader)
        # Not a request the leader knows: it crashes (as any bug would).
        GenServer.cast(leader, :not_a_request)
        assert_receive {:DOWN, ^ref, :process, ^leader, _}, 5_000
        assert {:error, %Error{code: :unavailable, message: m}} = Task.await(waiter, 5_000)
        assert m =~ "1 key(s) in 1 namespace(s) lost", m
      end)

    assert log =~ "lost"

    if telemetry? do
      :telemetry.detach("kv-lost")
      assert_received {:lost, %{keys: 1, waiters: 1}, %{cluster: ^c}}
    end

    # Lost and said so: the next call starts a new, empty leader.
    assert {:error, %Error{code: :not_found}} = KeyValueStore.try_get(kv, "k")
    assert Server.whereis(c) not in [leader, :undefined]
  end

  test "a namespace's keys are deleted when the last store opened on it closes", %{cluster: c} do
    {:ok, kv1} = KeyValueStore.open("done", cluster: c)
    {:ok, kv2} = KeyValueStore.open("done", cluster: c)
    {:ok, running} = KeyValueStore.open("running", cluster: c)
    big = :binary.copy("x", 4_000_000)
    :ok = KeyValueStore.put(kv1, "big", big)
    :ok = KeyValueStore.native_put(kv2, "small", "y")
    :ok = KeyValueStore.put(running, "kept", "z")
    leader = Server.whereis(c)
    holds_big? = fn -> :erlang.garbage_collect(leader) && Enum.any?(elem(Process.info(leader, :binary), 1), &(elem(&1, 1) == byte_size(big))) end
    assert holds_big?.()
    :ok = KeyValueStore.close(kv1)
    # Another store of the job is open: its keys stay.
    assert KeyValueStore.try_get(kv2, "big") == {:ok, big}
    :ok = KeyValueStore.close(kv2)
    assert Plugboard.TestSupport.eventually(fn -> not holds_big?.() end), "the leader still holds the finished job's value"
    # A closed store's handle is refused (it would bring the namespace back), a new store finds none.
    assert {:error, %Error{code: :unavailable}} = KeyValueStore.put(kv1, "big", "again")
    {:ok, again} = KeyValueStore.open("done", cluster: c)
    assert {:error, %Error{code: :not_found}} = KeyValueStore.try_get(again, "big")
    assert {:error, %Error{code: :not_found}} = KeyValueStore.try_get(again, "small")
    assert KeyValueStore.try_get(running, "kept") == {:ok, "z"}
  end

  test "8,000 gets expiring on one key hold up no other call", %{cluster: c} do
    {:ok, kv} = KeyValueStore.open("crowd", cluster: c)
    # Every get's timer fires at the same millisecond.
    expiry = System.monotonic_time(:millisecond) + 1_500
    me = self()

    getters =
      for _ <- 1..8_000 do
        spawn(fn ->
          send(me, :asking)
          send(me, {:got, KeyValueStore.get(kv, "missing", max(expiry - System.monotonic_time(:millisecond), 0))})
        end)
      end

    for _ <- getters, do: assert_receive(:asking, 10_000)
    Process.sleep(max(expiry - System.monotonic_time(:millisecond) - 50, 0))

    # Calls on another key across the expiry: each answers within the bound.
    slowest =
      Enum.reduce(1..40, 0, fn i, slowest ->
        start = System.monotonic_time(:microsecond)
        :ok = KeyValueStore.put(kv, "other", "#{i}")
        {:ok, _} = KeyValueStore.try_get(kv, "other")
        Process.sleep(10)
        max(slowest, System.monotonic_time(:microsecond) - start - 10_000)
      end)

    for _ <- getters, do: assert_receive({:got, {:error, %Error{code: :deadline_exceeded}}}, 20_000)
    IO.puts("[ kv ] slowest put + try_get while 8,000 gets expired: #{div(slowest, 1000)} ms")
    # The quadratic expiry took 2.7 s; 1 s leaves room for a loaded 2-core machine.
    assert slowest < 1_000_000, "a put + try_get took #{div(slowest, 1000)} ms while 8,000 gets expired"
  end

  test "close/1 twice, or of no store, is an error value naming it", %{cluster: c} do
    {:ok, kv} = KeyValueStore.open("job", cluster: c, name: :kv_close_twice)
    assert KeyValueStore.close(kv) == :ok
    assert {:error, %Error{code: :unavailable, message: m}} = KeyValueStore.close(kv)
    assert m =~ "closed"
    assert {:error, %Error{code: :unavailable}} = KeyValueStore.close(:kv_close_twice)
    # A process that is no store's handler, by pid or by name, is not stopped.
    for bad <- ["job", 42, nil, %{handler: self()}, self(), :init] do
      assert {:error, %Error{code: :invalid_argument, message: m}} = KeyValueStore.close(bad)
      assert m =~ "close" and m =~ "store" and m =~ inspect(bad), m
    end
  end

  test "a 100 MB native_put or kv_reply holds no normal scheduler (the copy runs on a dirty one)", %{cluster: c} do
    {:ok, kv} = KeyValueStore.open("big", cluster: c)
    {:ok, resource} = KeyValueStore.resource(kv)
    big = :binary.copy(<<7>>, 100_000_000)

    for {label, fun} <- [native_put: fn -> :ok = KeyValueStore.native_put(kv, "big", big) end,
                         kv_reply: fn -> Native.kv_reply(resource, 1 <<< 60, {:ok, big}) end] do
      # What the NIF calls held of the caller's normal scheduler (SchedulerWatch: the calls' own
      # time, less their dirty part), with the scheduler test's rule: rerun while a run counted
      # something, fail when one function counted in two runs.
      {_, runs} = SchedulerWatch.repeat(fn -> {nil, held_by(fun)} end)
      recurring = SchedulerWatch.recurring(runs)
      assert recurring == [], "#{label} held a normal scheduler:\n" <> SchedulerWatch.describe_recurring(recurring)
    end

    assert {:ok, got} = KeyValueStore.native_get(kv, "big", 10_000)
    assert byte_size(got) == 100_000_000
  end

  defp held_by(fun) do
    me = self()
    caller = spawn(fn -> receive(do: (:go -> send(me, {:done, self(), fun.()}))) end)
    watch = SchedulerWatch.start(20)
    SchedulerWatch.trace(watch, caller)
    send(caller, :go)
    assert_receive {:done, ^caller, _}, 20_000
    events = SchedulerWatch.stop(watch, [caller])
    assert SchedulerWatch.timed_calls(events) > 0, "the watch timed none of the caller's plugboard calls"
    SchedulerWatch.counted(events)
  end

  describe "a client opened with a store" do
    for {label, path} <- Plugboard.TestSupport.cpu_plugins() do
      test "is created on #{label}; node_id/num_nodes reach the plugin", %{cluster: c} do
        {:ok, kv} = KeyValueStore.open("single-#{unquote(label)}", cluster: c)
        assert {:ok, client} = Plugboard.open(unquote(path), [], kv_store: kv, timeout: 60_000)
        assert {:ok, [_ | _]} = Plugboard.devices(client)
        # node_id / num_nodes are the CUDA plugin's option names: 0.81 and 0.106 take any name,
        # 0.115's CPU client checks names and refuses them (tests/key_value_store_test.cpp).
        case Plugboard.open(unquote(path), [], kv_store: kv, node_id: 0, num_nodes: 1, timeout: 60_000) do
          {:ok, single} -> assert unquote(label) != "xla_cpu_115" and match?({:ok, [_ | _]}, Plugboard.devices(single))
          {:error, %Error{code: :invalid_argument, message: m}} -> assert unquote(label) == "xla_cpu_115" and m =~ ~r/node_id|num_nodes/, m
        end

        assert {:error, %Error{code: :invalid_argument, message: m}} = Plugboard.open(unquote(path), [], node_id: 1, num_nodes: 1)
        assert m =~ "node_id 1"
        assert {:error, %Error{code: :invalid_argument, message: m2}} = Plugboard.open(unquote(path), [], kv_store: :nope)
        assert m2 =~ "kv_store"
      end
    end
  end
end
