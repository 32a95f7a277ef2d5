defmodule Plugboard.TelemetryTest do
  # Not async: the handlers see every event of the VM, and the summary's counts are compared before
  # and after (no other test may compile or run meanwhile).
  use ExUnit.Case, async: false
  alias Plugboard.Telemetry.Summary

  @events [
    [:plugboard, :boot, :start],
    [:plugboard, :boot, :stop],
    [:plugboard, :compile],
    [:plugboard, :run, :start],
    [:plugboard, :run, :stop],
    [:plugboard, :host_callback, :start],
    [:plugboard, :host_callback, :stop],
    [:plugboard, :host_callback, :exception]
  ]

  setup context do
    test_pid = self()
    id = {__MODULE__, context.test}
    :ok = :telemetry.attach_many(id, @events, &__MODULE__.forward/4, test_pid)
    # The per-run events are off by default (the last test checks that): on for these tests.
    assert Plugboard.Telemetry.run_events(true)

    on_exit(fn ->
      :telemetry.detach(id)
      Plugboard.Telemetry.run_events(false)
    end)

    :ok
  end

  def forward(event, measurements, metadata, pid), do: send(pid, {:event, event, measurements, metadata})

  defp cli, do: Path.join([:code.priv_dir(:plugboard), "bin", "plugboard"])
  defp f32s(list), do: for(v <- list, into: <<>>, do: <<v::float-32-little>>)

  # A program no run compiled before (the persistent compile cache outlives the VM).
  defp fresh_program do
    nonce = Base.encode16(:crypto.strong_rand_bytes(8))

    """
    // #{nonce}
    func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %one = stablehlo.constant dense<1.0> : tensor<4xf32>
      %0 = stablehlo.add %x, %one : tensor<4xf32>
      return %0 : tensor<4xf32>
    }
    """
  end

  @callback_program """
  func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %t0 = stablehlo.after_all : !stablehlo.token
    %t1 = stablehlo.custom_call @plugboard.print(%t0, %x) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, tensor<4xf32>) -> !stablehlo.token
    %t2, %s = stablehlo.custom_call @tel_scale(%t1, %x) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, tensor<4xf32>) -> (!stablehlo.token, tensor<4xf32>)
    %out = stablehlo.add %s, %x : tensor<4xf32>
    return %out : tensor<4xf32>
  }
  """

  for {label, plugin} <- Plugboard.Nx.Case.cpu_plugins() do
    @tag timeout: 180_000
    @tag :tmp_dir
    test "boot, compile, run and host callback events on #{label}, and the summary's counts", %{tmp_dir: dir} do
      plugin = unquote(plugin)
      target = "tel_" <> unquote(label)
      program = fresh_program()
      File.write!(Path.join(dir, "add_one.mlir"), program)
      bundle = Path.join(dir, "bundle")
      {out, 0} = System.cmd(cli(), ["bundle", "--target", "#{target}=#{plugin}", "--precompile", Path.join(dir, "add_one.mlir"), "--out", bundle],
                            stderr_to_stdout: true)
      assert out =~ "precompiled for #{target}"
      before = Summary.snapshot()

      # Boot: a span; the stop names the target, the policy and each candidate's stage times.
      assert {:ok, client, report} = Plugboard.boot(bundle: bundle, target: target, use_environment: false)
      assert client.target == target
      assert_received {:event, [:plugboard, :boot, :start], %{system_time: _, monotonic_time: _}, %{}}
      assert_received {:event, [:plugboard, :boot, :stop], %{duration: d}, boot}
      assert is_integer(d) and d > 0
      assert %{result: :ok, error: nil, target: ^target, policy: policy, report: ^report, candidates: candidates} = boot
      assert policy == report.policy and is_binary(policy)
      assert [%{name: ^target, verdict: :chosen, origin: :bundle, failed_stage: nil, stages: stages}] = candidates
      assert {:loaded, ms} = List.keyfind(stages, :loaded, 0)
      assert is_float(ms)
      assert Enum.all?(stages, fn {stage, ms} -> is_atom(stage) and is_float(ms) and ms >= 0 end)

      # Compile: the bundle's precompiled program, then a new program compiled, then the same from
      # the persistent compile cache.
      precompiled = Plugboard.compile!(client, program, name: "add_one")
      assert precompiled.source == :precompiled
      assert_received {:event, [:plugboard, :compile], %{duration: d, compile_ms: ms},
                       %{name: "add_one", source: :precompiled, target: ^target, result: :ok, error: nil}}
      assert is_integer(d) and d > 0 and ms == precompiled.compile_ms

      fresh = fresh_program()
      assert Plugboard.compile!(client, fresh, name: "fresh").source == :compiled
      assert_received {:event, [:plugboard, :compile], _, %{name: "fresh", source: :compiled, target: ^target}}
      exe = Plugboard.compile!(client, fresh, name: "fresh")
      assert exe.source == :compile_cache and exe.target == target
      assert_received {:event, [:plugboard, :compile], _, %{name: "fresh", source: :compile_cache, target: ^target}}

      assert {:error, _} = Plugboard.compile(client, "func.func public @main( this is not MLIR", name: "broken")
      assert_received {:event, [:plugboard, :compile], %{compile_ms: nil}, %{name: "broken", source: nil, result: :error, error: %Plugboard.Error{}}}

      # Run: a span from the call to the outcome, with the target and the device.
      x = Plugboard.buffer!(client, f32s([1, 2, 3, 4]), :f32, {4})
      assert {:ok, [y]} = Plugboard.run(exe, [x])
      assert Plugboard.to_binary!(y) == f32s([2, 3, 4, 5])
      # The executable is named after its function (a cache hit does not keep the name: option).
      assert exe.name == "main"
      meta = %{executable: "main", target: target, device: 0}
      assert_received {:event, [:plugboard, :run, :start], %{system_time: _, monotonic_time: _}, ^meta}
      assert_received {:event, [:plugboard, :run, :stop], %{duration: d, monotonic_time: _}, stop}
      assert is_integer(d) and d > 0 and stop == Map.merge(meta, %{result: :ok, error: nil})

      # run_async: the stop comes with await/2, once.
      {:ok, run} = Plugboard.run_async(exe, [x])
      assert_received {:event, [:plugboard, :run, :start], _, ^meta}
      refute_received {:event, [:plugboard, :run, :stop], _, _}
      assert {:ok, [_]} = Plugboard.await(run)
      assert_received {:event, [:plugboard, :run, :stop], _, %{result: :ok}}
      assert {:ok, [_]} = Plugboard.await(run)
      refute_received {:event, [:plugboard, :run, :stop], _, _}

      # A run that fails (one argument too many) is a stop with the error.
      assert {:error, error} = Plugboard.run(exe, [x, x])
      assert_received {:event, [:plugboard, :run, :stop], _, %{result: :error, error: ^error, executable: "main"}}

      # Host callbacks answered by Elixir functions: a blocking one and the ordered print hook.
      cb = Plugboard.compile!(client, "// #{Base.encode16(:crypto.strong_rand_bytes(8))}\n" <> @callback_program, name: "tel_callbacks", callbacks: ["plugboard.print", "tel_scale"])
      scale = fn [t] -> t.data end
      print = fn _call -> :ok end
      assert {:ok, [z]} = Plugboard.run(cb, [x], callbacks: %{"tel_scale" => scale}, ordered: %{"plugboard.print" => print})
      assert Plugboard.to_binary!(z) == f32s([2, 4, 6, 8])

      for {name, ordered} <- [{"plugboard.print", true}, {"tel_scale", false}] do
        assert_received {:event, [:plugboard, :host_callback, :start], %{monotonic_time: _},
                         %{name: ^name, ordered: ^ordered, executable: "main"}}
        assert_received {:event, [:plugboard, :host_callback, :stop], %{duration: d},
                         %{name: ^name, ordered: ^ordered, executable: "main", result: :ok}}
        assert is_integer(d) and d >= 0
      end

      # A callback that raises: :exception with kind, reason and stacktrace; the run fails.
      raising = fn [_] -> raise ArgumentError, "tel_scale refuses" end
      assert {:error, %Plugboard.Error{message: message}} = Plugboard.run(cb, [x], callbacks: %{"tel_scale" => raising}, ordered: %{"plugboard.print" => print})
      assert message =~ "tel_scale refuses"
      assert_received {:event, [:plugboard, :host_callback, :exception], %{duration: _},
                       %{name: "tel_scale", kind: :error, reason: %ArgumentError{}, stacktrace: [_ | _]}}
      assert_received {:event, [:plugboard, :run, :stop], _, %{executable: "main", result: :error}}

      # The summary counted all of it.
      now = Summary.snapshot()
      assert now.telemetry and now.node == node()
      assert %{target: ^target, result: :ok, policy: ^policy, candidates: ^candidates} = now.boot
      assert is_float(now.boot.duration_ms)
      delta = fn path -> get_in(now, path) - get_in(before, path) end
      assert delta.([:compiles, :precompiled, :count]) == 1
      assert delta.([:compiles, :compiled, :count]) == 2
      assert delta.([:compiles, :compile_cache, :count]) == 1
      assert delta.([:compiles, :errors]) == 1
      assert delta.([:compiles, :compiled, :total_ms]) > 0
      # run, run_async, the failed run, the two callback runs (the NIF counts every run of the VM
      # that came to an outcome meanwhile: an earlier test's abandoned run may finish in between)
      assert delta.([:runs, :count]) >= 5
      assert delta.([:runs, :errors]) >= 2
      assert is_integer(now.runs.in_flight) and now.runs.in_flight >= 0
      assert is_float(now.runs.last_ms) and now.runs.last_ms > 0
      # print and tel_scale twice (the raising one counts as an error)
      assert delta.([:host_callbacks, :count]) == 4
      assert delta.([:host_callbacks, :errors]) == 1
      assert delta.([:errors]) >= 4
    end
  end

  @split """
  module @split attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
    func.func public @main(%x: tensor<4xf32> {mhlo.sharding = "{devices=[2]0,1}"}) -> tensor<4xf32> {
      %two = stablehlo.constant dense<2.0> : tensor<4xf32>
      %y = stablehlo.multiply %x, %two : tensor<4xf32>
      return %y : tensor<4xf32>
    }
  }
  """

  for {label, plugin} <- Plugboard.Nx.Case.cpu_plugins() do
    test "run_partitioned/3: a run span whose device is the executable's devices on #{label}" do
      {:ok, client} = Plugboard.open(unquote(plugin), [{"cpu_device_count", 4}])
      exe = Plugboard.compile!(client, @split, partitions: 2, partitioner: :gspmd, devices: [3, 1])
      x3 = Plugboard.buffer!(client, f32s([1, 2]), :f32, {2}, device: 3)
      x1 = Plugboard.buffer!(client, f32s([3, 4]), :f32, {2}, device: 1)
      assert {:ok, [[y3], [y1]]} = Plugboard.run_partitioned(exe, [[x3], [x1]])
      assert {Plugboard.to_binary!(y3), Plugboard.to_binary!(y1)} == {f32s([2, 4]), f32s([6, 8])}
      meta = %{executable: "split", target: client.target, device: [3, 1]}
      assert_received {:event, [:plugboard, :run, :start], _, ^meta}
      assert_received {:event, [:plugboard, :run, :stop], %{duration: d}, stop}
      assert is_integer(d) and d > 0 and stop == Map.merge(meta, %{result: :ok, error: nil})

      # Refused by the plugin (a buffer on the wrong device): a stop with the error.
      assert {:error, error} = Plugboard.run_partitioned(exe, [[x1], [x3]])
      assert_received {:event, [:plugboard, :run, :stop], _, %{device: [3, 1], result: :error, error: ^error}}
    end
  end

  test "config :plugboard, telemetry: false: nothing is emitted" do
    {_, plugin} = hd(Plugboard.Nx.Case.cpu_plugins())
    client = Plugboard.Nx.Case.client(plugin)
    exe = Plugboard.compile!(client, fresh_program())
    x = Plugboard.buffer!(client, f32s([1, 2, 3, 4]), :f32, {4})
    assert_received {:event, [:plugboard, :compile], _, _}
    Application.put_env(:plugboard, :telemetry, false)

    try do
      refute Plugboard.Telemetry.setup()
      assert {:ok, [_]} = Plugboard.run(exe, [x])
      assert Plugboard.compile!(client, fresh_program()).source == :compiled
      refute_received {:event, _, _, _}
      assert %{telemetry: false} = Summary.snapshot()
    after
      Application.delete_env(:plugboard, :telemetry)
      assert Plugboard.Telemetry.setup()
      refute Plugboard.Telemetry.run_events?()
      assert Plugboard.Telemetry.run_events(true)
    end

    assert {:ok, [_]} = Plugboard.run(exe, [x])
    assert_received {:event, [:plugboard, :run, :stop], _, _}
  end

  test "runs emit no event unless asked for, and the NIF counts them either way" do
    {_, plugin} = hd(Plugboard.Nx.Case.cpu_plugins())
    client = Plugboard.Nx.Case.client(plugin)
    exe = Plugboard.compile!(client, fresh_program())
    x = Plugboard.buffer!(client, f32s([1, 2, 3, 4]), :f32, {4})
    refute Plugboard.Telemetry.run_events(false)
    before = Summary.snapshot().runs
    assert {:ok, [_]} = Plugboard.run(exe, [x])
    {:ok, run} = Plugboard.run_async(exe, [x])
    assert {:ok, [_]} = Plugboard.await(run)
    assert {:error, _} = Plugboard.run(exe, [x, x])
    refute_received {:event, [:plugboard, :run, _], _, _}
    now = Summary.snapshot().runs
    # (>=: the NIF counts every run of the VM, and an earlier test's abandoned run may finish meanwhile)
    assert now.count - before.count >= 3 and now.errors - before.errors >= 1
    assert now.total_ms > before.total_ms and now.last_ms > 0

    # With `config :plugboard, run_events: true` at start.
    Application.put_env(:plugboard, :run_events, true)

    try do
      assert Plugboard.Telemetry.setup() and Plugboard.Telemetry.run_events?()
      assert {:ok, [_]} = Plugboard.run(exe, [x])
      assert_received {:event, [:plugboard, :run, :stop], _, %{result: :ok}}
    after
      Application.delete_env(:plugboard, :run_events)
      Plugboard.Telemetry.setup()
    end

    # A value that is not a boolean is named in the log, and the events stay off.
    Application.put_env(:plugboard, :run_events, "yes")

    try do
      log = ExUnit.CaptureLog.capture_log(fn -> assert Plugboard.Telemetry.setup() end)
      assert log =~ ~s(config :plugboard, run_events: must be true or false, got "yes")
      refute Plugboard.Telemetry.run_events?()
    after
      Application.delete_env(:plugboard, :run_events)
      Plugboard.Telemetry.setup()
    end
  end

  test "a boot that fails is a boot stop with result: :error", %{} do
    assert {:error, error, report} = Plugboard.boot(target: "tel_nowhere", use_environment: false)
    assert_received {:event, [:plugboard, :boot, :stop], _, %{result: :error, error: ^error, target: nil, report: ^report}}
    assert {:error, error, nil} = Plugboard.boot(no_such_option: 1)
    assert_received {:event, [:plugboard, :boot, :stop], _, %{result: :error, error: ^error, report: nil, candidates: []}}
  end

  test "Plugboard.Nx: a compile, then hits of its own cache, each a compile event with the run events on (counted either way)" do
    {_, plugin} = hd(Plugboard.Nx.Case.cpu_plugins())
    client = Plugboard.Nx.Case.client(plugin)
    # The path the plugin was loaded from first in this VM (a bundle's copy, maybe).
    target = client.target
    # A function this test alone jits (its own key in Plugboard.Nx's cache).
    jit = Nx.Defn.jit(fn x -> Nx.multiply(x, 3) end, compiler: Plugboard.Nx, client: client)
    x = Nx.tensor([1.0, 2.0], backend: Nx.BinaryBackend)
    jit.(x)
    assert_received {:event, [:plugboard, :compile], _, %{source: first, target: ^target, result: :ok}}
    # The program's text is the same in every run: the persistent cache may have it already.
    assert first in [:compiled, :compile_cache]
    before = Summary.snapshot().compiles.nx_cache.count

    for _ <- 1..3 do
      assert Nx.to_flat_list(jit.(x)) == [3.0, 6.0]
      assert_received {:event, [:plugboard, :compile], %{duration: d}, %{source: :nx_cache, target: ^target, result: :ok}}
      assert is_integer(d) and d >= 0
    end

    assert Summary.snapshot().compiles.nx_cache.count - before == 3

    # With the run events off (the default), a hit is counted without an event or a clock read.
    refute Plugboard.Telemetry.run_events(false)
    total_ms = Summary.snapshot().compiles.nx_cache.total_ms

    for _ <- 1..2 do
      assert Nx.to_flat_list(jit.(x)) == [3.0, 6.0]
      refute_received {:event, [:plugboard, :compile], _, _}
    end

    assert %{count: count, total_ms: ^total_ms} = Summary.snapshot().compiles.nx_cache
    assert count - before == 5
  end
end
