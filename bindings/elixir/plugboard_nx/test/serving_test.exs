defmodule Plugboard.ServingTest do
  # Plugboard.Serving on one node (the cluster itself — several OS nodes, a node killed, a partition —
  # is tests/elixir_cluster_test.sh): the serving starts on a client with the weight its devices give,
  # answers through run/3 with where it ran, refuses to start without a target, keeps the serving's
  # own errors as answers (not retried), retries only idempotent servings, and the router's choice
  # follows load per weight (or weight alone for :weighted).
  use ExUnit.Case, async: false
  import Plugboard.Nx.Case
  import Bitwise
  alias Plugboard.Serving
  alias Plugboard.Serving.Router

  defmodule Model do
    @moduledoc false
    import Nx.Defn
    defn affine(x), do: x * 2 + 1

    # A serving whose every batch takes 300 ms more.
    def slow_serving(client) do
      Nx.Serving.new(fn opts ->
        run = Nx.Defn.jit(&affine/1, opts)
        fn batch -> Process.sleep(300) && run.(batch) end
      end, compiler: Plugboard.Nx, client: client)
    end
  end

  {label, path} = hd(cpu_plugins())
  @label label
  @path path

  defp serving(fun, client), do: Nx.Serving.new(fn opts -> Nx.Defn.jit(fun, opts) end, compiler: Plugboard.Nx, client: client)

  setup do
    name = :"serving_#{System.unique_integer([:positive])}"
    Application.put_env(:plugboard_nx, :clients, [{name, plugin: @path, create_options: [{"cpu_device_count", 2}]}])
    on_exit(fn -> Application.delete_env(:plugboard_nx, :clients) end)
    %{name: name, client: Plugboard.Nx.client!(client: name)}
  end

  test "#{@label}: run/3 answers with where the batch ran; weight is devices x 1 on cpu", %{name: name, client: client} do
    start_supervised!({Serving, serving: serving(&Model.affine/1, name), name: name, client: client, batch_size: 4, idempotent: true})

    # Learned by the router in the background (run/3 waits for a first member meanwhile).
    assert eventually(fn -> Router.members(name) != [] end)
    assert [%{weight: 2, devices: 2, device_kind: "cpu", idempotent: true, node: node, target: target}] =
             Router.members(name) |> Enum.map(& &1.info)
    assert node == node()
    assert target == Path.basename(@path)

    input = Nx.Batch.stack([Nx.tensor([1.0, 2.0, 3.0])])
    test = self()
    events = [[:plugboard, :serving, :route], [:plugboard, :serving, :run, :start], [:plugboard, :serving, :run, :stop]]
    :telemetry.attach_many({__MODULE__, name}, events, fn event, measurements, meta, _ -> send(test, {event, measurements, meta}) end, nil)
    on_exit(fn -> :telemetry.detach({__MODULE__, name}) end)
    assert {:ok, out, info} = Serving.run(name, input, info: true)
    assert_received {[:plugboard, :serving, :run, :start], _, %{name: ^name, routing: :load}}
    assert_received {[:plugboard, :serving, :route], %{load: 0, weight: 2}, %{name: ^name, node: n, routing: :load}} when n == node()
    assert_received {[:plugboard, :serving, :run, :stop], %{duration: d}, %{name: ^name, node: n, target: t, attempts: 1, result: :ok}}
                    when n == node() and is_binary(t) and d > 0
    assert Nx.to_flat_list(out) == [3.0, 5.0, 7.0]
    assert out.data.__struct__ == Nx.BinaryBackend
    assert info == %{node: node(), target: target, attempts: 1, lost: []}
    assert {:ok, out2} = Serving.run(name, input, routing: :weighted)
    assert Nx.to_flat_list(out2) == [3.0, 5.0, 7.0]

    # Many at once: every answer right, the published load back to 0 after.
    results = Task.async_stream(1..64, fn i -> Serving.run(name, Nx.Batch.stack([Nx.tensor([i * 1.0, 1.0, 2.0])])) end, max_concurrency: 16) |> Enum.to_list()
    assert Enum.map(results, fn {:ok, {:ok, t}} -> Nx.to_flat_list(t) end) == Enum.map(1..64, &[2.0 * &1 + 1, 3.0, 5.0])
    assert GenServer.call(hd(Router.members(name)).pid, :info).load == 0

    cluster = Plugboard.cluster_report()
    assert [%{node: ^node, servings: [%{name: ^name, weight: 2}]}] = Enum.filter(cluster, &(&1.node == node()))
  end

  test "errors as values: no member, a serving's own error (not retried), bad options", %{name: name, client: client} do
    t0 = System.monotonic_time(:millisecond)
    assert Serving.run(:no_such_serving, Nx.Batch.stack([Nx.tensor([1.0])]), wait: 200) == {:error, {:no_member, :no_such_serving}}
    # It waited for a member to join, for as long as asked.
    assert System.monotonic_time(:millisecond) - t0 in 200..1_000

    start_supervised!({Serving, serving: serving(&Model.affine/1, name), name: name, client: client, batch_size: 2, idempotent: true})
    # Not a batch: the serving's own error is the answer, not a reason to try elsewhere.
    assert {:error, {:serving, node, message}} = Serving.run(name, :not_a_batch)
    assert node == node()
    assert message =~ "Nx.Batch"

    assert {:error, %Plugboard.Error{code: :invalid_argument, message: "Plugboard.Serving: weight: must be a positive integer, got 0"}} =
             Serving.start_link(serving: serving(&Model.affine/1, name), name: :other, client: client, weight: 0)
    assert {:error, %Plugboard.Error{message: "Plugboard.Serving: name: must be an atom" <> _}} = Serving.start_link(serving: serving(&Model.affine/1, name), name: "x")
    assert {:error, %Plugboard.Error{code: :invalid_argument, message: "Plugboard.Serving: run/3: routing: :fastest is not :load or :weighted"}} =
             Serving.run(name, 1, routing: :fastest)
    assert {:error, %Plugboard.Error{message: "Plugboard.Serving: run/3: wait: :infinity is not a non-negative integer (ms)"}} = Serving.run(name, 1, wait: :infinity)
    assert {:error, %Plugboard.Error{message: "Plugboard.Serving: run/3: unknown option {:retry, 1}" <> _}} = Serving.run(name, 1, retry: 1)
  end

  test "a node without a booted target does not start the serving" do
    assert {:error, _} = Plugboard.client()
    assert {:error, %Plugboard.Error{code: :failed_precondition, message: message}} = Serving.start_link(serving: Nx.Serving.new(fn _ -> & &1 end), name: :no_target)
    assert message =~ "Plugboard.Serving :no_target not started: no target booted on #{node()}"
    assert Router.members(:no_target) == []
  end

  test "a request that times out is retried only for an idempotent serving", %{name: name, client: client} do
    slow = Model.slow_serving(client)
    start_supervised!({Serving, serving: slow, name: name, client: client, batch_size: 1})
    input = Nx.Batch.stack([Nx.tensor([1.0])])
    # Not idempotent: lost once, not tried again.
    assert {:error, {:lost, [{node, :timeout}]}} = Serving.run(name, input, timeout: 100, wait: 100)
    assert node == node()
    stop_supervised!({Serving, name})

    start_supervised!({Serving, serving: slow, name: name, client: client, batch_size: 1, idempotent: true})
    # Idempotent, but only one node: tried there, then no other node is left (one retry event).
    test = self()
    :telemetry.attach({__MODULE__, :retry}, [:plugboard, :serving, :retry], fn _, m, meta, _ -> send(test, {:retry, m, meta}) end, nil)
    on_exit(fn -> :telemetry.detach({__MODULE__, :retry}) end)
    assert {:error, {:lost, [{^node, :timeout}]}} = Serving.run(name, input, timeout: 100, wait: 100)
    assert_received {:retry, %{attempt: 2}, %{name: ^name, node: ^node, reason: :timeout}}
    assert {:ok, _} = Serving.run(name, input, timeout: 5_000)
    # The timed-out requests finished on the node (the caller only stopped waiting): no load is left.
    assert eventually(fn -> match?([%{load: 0}], Router.members(name)) end)
  end

  test "a caller killed mid-request leaves no load behind", %{name: name, client: client} do
    start_supervised!({Serving, serving: Model.slow_serving(client), name: name, client: client, batch_size: 1, idempotent: true})
    input = Nx.Batch.stack([Nx.tensor([1.0])])
    callers = for _ <- 1..3, do: spawn(fn -> Serving.run(name, input) end)
    assert eventually(fn -> match?([%{load: 3}], Router.members(name)) end)
    Enum.each(callers, &Process.exit(&1, :kill))
    # Their requests still run on the node; then the node's load and this node's count both reach 0
    # (the count through the router's sweep: a killed caller runs no `after`).
    assert eventually(fn -> match?([%{load: 0}], Router.members(name)) end, 5_000)
  end

  test "without template:, a batching serving answers requests of other shapes sent one after another (as Nx.Serving does)",
       %{name: name, client: client} do
    start_supervised!({Serving, serving: serving(&Model.affine/1, name), name: name, client: client, batch_size: 4})

    for entry <- [[1.0, 2.0, 3.0], [1.0], [1.0, 2.0], [4.0, 5.0, 6.0]] do
      assert {:ok, out} = Serving.run(name, Nx.Batch.stack([Nx.tensor(entry)]))
      assert Nx.to_flat_list(out) == Enum.map(entry, &(2 * &1 + 1))
    end
  end

  test "a request whose shape differs from the serving's template fails alone, naming both; its batch runs", %{name: name, client: client} do
    start_supervised!({Serving, serving: serving(&Model.affine/1, name), name: name, client: client, batch_size: 16, batch_timeout: 300,
                       template: Nx.template({3}, :f32)})
    good = fn i -> Nx.Batch.stack([Nx.tensor([i * 1.0, 0.0, 0.0])]) end

    results =
      1..16
      |> Task.async_stream(fn
        8 -> Serving.run(name, Nx.Batch.stack([Nx.tensor([1.0, 2.0])]))
        i -> Serving.run(name, good.(i))
      end, max_concurrency: 16, timeout: 20_000)
      |> Enum.map(fn {:ok, result} -> result end)

    {bad, goods} = List.pop_at(results, 7)
    assert {:error, {:serving, node, message}} = bad
    assert node == node()
    assert message =~ "expected f32 {3}, given f32 {2}"
    expected = for i <- Enum.reject(1..16, &(&1 == 8)), do: {:ok, [2.0 * i + 1, 1.0, 1.0]}
    assert Enum.map(goods, fn {:ok, t} -> {:ok, Nx.to_flat_list(t)}; other -> other end) == expected

    # The first request is checked too, whatever the batch size.
    other = :"#{name}_template"
    start_supervised!({Serving, serving: serving(&Model.affine/1, name), name: other, client: client, template: Nx.template({3}, :f32)})
    assert {:error, {:serving, _, message}} = Serving.run(other, Nx.Batch.stack([Nx.tensor([1, 2, 3])]))
    assert message =~ "expected f32 {3}, given s32 {3}"
    assert {:ok, _} = Serving.run(other, good.(1))
  end

  test "a remote half killed while it waits leaves no load on its node", %{name: name, client: client} do
    start_supervised!({Serving, serving: Model.slow_serving(client), name: name, client: client, batch_size: 1})
    [member] = :pg.get_members(Plugboard.Cluster.scope(), {:serving, name})
    input = Nx.Batch.stack([Nx.tensor([1.0])])
    halves = for _ <- 1..2, do: spawn(Serving, :__remote_run__, [make_ref(), name, input])
    assert eventually(fn -> GenServer.call(member, :info).load == 2 end)
    Enum.each(halves, &Process.exit(&1, :kill))
    assert eventually(fn -> GenServer.call(member, :info).load == 0 end, 2_000)
  end

  test "requests killed anywhere in track/untrack, many times over, leave the load at 0", %{name: name, client: client} do
    start_supervised!({Serving, serving: serving(&Model.affine/1, name), name: name, client: client})
    [member] = :pg.get_members(Plugboard.Cluster.scope(), {:serving, name})

    # Each process counts itself in and out as fast as it can (up to 2000 times, then waits) and is
    # killed after about 1 ms. A process is killed where it was preempted, at a function call: some
    # between a step of track/1 and the next, or of untrack/1 (e.g. right before its last write).
    loop = fn
      _loop, 0 -> Process.sleep(:infinity)
      loop, n -> {_, token} = Plugboard.Serving.Member.track(name); Plugboard.Serving.Member.untrack(token); loop.(loop, n - 1)
    end

    for _round <- 1..10 do
      pids = for _ <- 1..20, do: spawn(fn -> loop.(loop, 2_000) end)
      Process.sleep(1)
      Enum.each(Enum.shuffle(pids), &Process.exit(&1, :kill))
    end

    # (The member may have many thousands of messages to go through first.)
    load = fn -> GenServer.call(member, :info, 60_000).load end
    assert eventually(fn -> load.() == 0 end, 10_000), "load #{load.()}"
  end

  test "a member failing :info for ages backs off at most 30 s (the shift is bounded, the router lives)", %{name: name} do
    silent = fake_member(name, :silent)
    router = Process.whereis(Router)
    assert Router.members(name) == []
    # Learning started and the member watched; then its answer comes back failed after very many tries.
    assert eventually(fn -> :ets.tab2list(Router) |> Enum.any?(&match?({{:learning, ^name, ^silent}}, &1)) end)
    send(Router, {:learned, name, silent, 1 <<< 40, {:silent, "no :info answer"}})
    assert Router.members(name) == []
    assert Process.whereis(Router) == router and Process.alive?(router)
    _ = :sys.get_state(Router)
    assert Process.whereis(Router) == router and Process.alive?(router)
    assert Router.backoff_ms(1 <<< 40) == 30_000 and Router.backoff_ms(0) == 1_000 and Router.backoff_ms(3) == 8_000
  end

  test "the load driver: closed loop keeps `concurrency` outstanding, open loop sends at `rate`" do
    gauge = :counters.new(2, [:atomics])

    call = fn x ->
      :counters.add(gauge, 1, 1)
      :counters.put(gauge, 2, max(:counters.get(gauge, 2), :counters.get(gauge, 1)))
      Process.sleep(10)
      :counters.sub(gauge, 1, 1)
      {:ok, x * 2}
    end

    closed = Plugboard.Serving.Load.run(call, Enum.to_list(1..40), concurrency: 4)
    assert closed.ok == 40 and Enum.map(closed.results, &elem(&1, 1)) == Enum.map(1..40, &(&1 * 2))
    assert :counters.get(gauge, 2) == 4
    # 40 requests of 10 ms, 4 at a time: at least 100 ms.
    assert closed.wall_ms >= 100

    # 20 requests at 200 per second: the last one sent at 95 ms, whatever the answers.
    open = Plugboard.Serving.Load.run(fn x -> {:ok, x} end, Enum.to_list(1..20), rate: 200, at: {10, fn -> send(self(), :never) end})
    assert open.ok == 20 and open.wall_ms >= 95
    assert {:error, :nope, _} = hd(Plugboard.Serving.Load.run(fn _ -> :nope end, [1]).results)
    assert Plugboard.Serving.Load.percentile(Enum.to_list(1..100), 0.99) == 99
  end

  defp eventually(fun, ms \\ 3_000) do
    deadline = System.monotonic_time(:millisecond) + ms
    Stream.repeatedly(fn -> fun.() || (Process.sleep(20) && false) end)
    |> Enum.find(fn ok -> ok or System.monotonic_time(:millisecond) > deadline end)
  end

  # A process in the serving's :pg group that answers :info with `reply` (or never, for :silent).
  defp fake_member(name, reply) do
    test = self()

    pid =
      spawn(fn ->
        :ok = :pg.join(Plugboard.Cluster.scope(), {:serving, name}, self())
        send(test, :joined)
        fake_loop(reply)
      end)

    assert_receive :joined
    on_exit(fn -> Process.exit(pid, :kill) end)
    pid
  end

  defp fake_loop(reply) do
    receive do
      {:"$gen_call", from, :info} when reply != :silent -> GenServer.reply(from, reply)
      _ -> :ok
    end

    fake_loop(reply)
  end

  test "a member that never answers :info costs run/3 nothing; requests go to the good member", %{name: name, client: client} do
    start_supervised!({Serving, serving: serving(&Model.affine/1, name), name: name, client: client, batch_size: 4})
    input = Nx.Batch.stack([Nx.tensor([1.0])])
    assert {:ok, _} = Serving.run(name, input)
    silent = fake_member(name, :silent)

    # Each call well under the 1 s an :info call to the silent member may take, call after call.
    for _ <- 1..5 do
      {us, {:ok, out, %{node: node}}} = :timer.tc(fn -> Serving.run(name, input, info: true) end)
      assert Nx.to_flat_list(out) == [3.0] and node == node()
      assert us < 500_000, "run/3 took #{div(us, 1000)} ms with a silent member"
    end

    assert [%{pid: good}] = Router.members(name)
    assert good != silent
  end

  test "a member whose :info or published load is malformed is left out (logged once), never raised on", %{name: name, client: client} do
    start_supervised!({Serving, serving: serving(&Model.affine/1, name), name: name, client: client, batch_size: 4})
    input = Nx.Batch.stack([Nx.tensor([1.0])])
    assert {:ok, _} = Serving.run(name, input)

    log =
      ExUnit.CaptureLog.capture_log(fn ->
        bad_weight = fake_member(name, %{weight: "heavy", load: :lots, idempotent: true})
        _no_fields = fake_member(name, %{})
        _not_a_map = fake_member(name, :nonsense)

        for _ <- 1..5, routing <- [:load, :weighted] do
          assert {:ok, out} = Serving.run(name, input, routing: routing)
          assert Nx.to_flat_list(out) == [3.0]
        end

        assert [%{pid: good}] = Router.members(name)
        assert good != bad_weight
        # A published load that is not a count is ignored too.
        send(Router, {:plugboard_serving_load, name, node(), good, :lots})
        assert {:ok, _} = Serving.run(name, input)
        assert [%{load: load}] = Router.members(name)
        assert is_integer(load)
        Process.sleep(200)
      end)

    assert length(String.split(log, "weight: \"heavy\"")) == 2, log
    assert log =~ "malformed :info"
  end

  test "the router's choice: least load per weight, or weight alone" do
    m = fn node, weight, load, rtt -> %{pid: self(), node: node, weight: weight, load: load, rtt: rtt, info: %{}} end
    # rtt x (load + 1) / weight: a: 4, b: 2.5, c: 1 (equal round trips: the queue per weight decides)
    assert Router.pick([m.(:a, 1, 3, 1.0), m.(:b, 2, 4, 1.0), m.(:c, 1, 0, 1.0)], :load).node == :c
    assert Router.pick([m.(:a, 1, 3, 1.0), m.(:b, 2, 4, 1.0)], :load).node == :b
    # A node 20x slower per request: the fast one until its queue is 20x longer.
    assert Router.pick([m.(:slow, 1, 0, 20.0), m.(:fast, 1, 18, 1.0)], :load).node == :fast
    assert Router.pick([m.(:slow, 1, 0, 20.0), m.(:fast, 1, 20, 1.0)], :load).node == :slow
    # Not measured yet: as fast as the fastest measured.
    assert Router.pick([m.(:new, 1, 0, nil), m.(:fast, 1, 1, 1.0)], :load).node == :new
    assert Router.pick([], :load) == nil

    counts = Enum.frequencies(for _ <- 1..6000, do: Router.pick([m.(:a, 1, 0, 1.0), m.(:b, 2, 99, 1.0)], :weighted).node)
    # 1:2 by weight whatever the load: 2000 +- 5 sigma (sigma ~ 37)
    assert_in_delta counts.a, 2000, 185
    assert_in_delta counts.b, 4000, 185
  end
end
