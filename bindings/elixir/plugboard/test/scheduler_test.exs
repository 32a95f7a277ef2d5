defmodule Plugboard.SchedulerTest do
  # Issue 24, item 1: no plugboard NIF holds a normal scheduler for long, whatever the program.
  #
  #   mix test --only scheduler        (or: mix test test/scheduler_test.exs)
  #
  # Each workload runs in processes of its own (workers) that do nothing but the plugboard calls
  # under test, while `:erlang.system_monitor(self(), [{:long_schedule, 5}])` reports every time a
  # process kept a normal scheduler 5 ms or more (dirty schedulers are not watched: that is what they
  # are for). The VM names where such a process was scheduled in and out, not which call held it: a
  # NIF that runs long on the calling scheduler shows as a long schedule of the process that called
  # it, `out` usually in the Elixir code that ran after the NIF returned. So an event counts against
  # plugboard when its `in` or `out` is a Plugboard.Native function or when it belongs to a worker;
  # events of other processes (this test process preparing data, the VM's own) are printed, marked
  # "other", and not counted.
  #
  # A worker can also be charged for a long schedule that the OS caused (the scheduler thread
  # descheduled while the plugin's threads compete for the cores, as when an execution wakes them):
  # a workload whose run has counted events is run again, up to three runs, and fails only when
  # every run had counted events (a NIF that holds the scheduler holds it every time).
  use ExUnit.Case, async: false
  import Plugboard.TestSupport

  @moduletag :scheduler
  @moduletag timeout: 300_000

  @limit_ms 5
  @mib 1_048_576

  # ------------------------------------------------------------------------------------------------
  # Programs

  # An i64 counter loop whose trip count is an argument, with a multiply-add recurrence XLA cannot
  # fold: the plugin's cost model counts the body once, so XLA's CPU client thinks it cheap and runs
  # it inline, inside PJRT_LoadedExecutable_Execute.
  @loop_program counter_loop_program()

  @matmul_program """
  func.func public @main(%a: tensor<256x256xf32>, %b: tensor<256x256xf32>) -> tensor<256x256xf32> {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
    return %0 : tensor<256x256xf32>
  }
  """

  # A blocking host callback whose one result is 64 MiB (f32[16777216]); the program returns 4
  # elements of it.
  @big_reply_elements div(64 * @mib, 4)
  @big_reply_program """
  func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %t0 = stablehlo.after_all : !stablehlo.token
    %t1, %big = stablehlo.custom_call @host_big(%t0, %x) {api_version = 4 : i32, has_side_effect = true} : (!stablehlo.token, tensor<4xf32>) -> (!stablehlo.token, tensor<#{div(64 * 1_048_576, 4)}xf32>)
    %head = stablehlo.slice %big [0:4] : (tensor<#{div(64 * 1_048_576, 4)}xf32>) -> tensor<4xf32>
    %out = stablehlo.add %head, %x : tensor<4xf32>
    return %out : tensor<4xf32>
  }
  """

  # About 100 MB of MLIR text: a dense f32 constant of `elements` (rounded down to a multiple of
  # 1024) written in hex (8 characters per element; not all equal, so the parser cannot keep it as a
  # splat), added to the argument.
  defp big_program(elements) do
    block = for i <- 0..1023, into: <<>>, do: <<i * 1.0 + 0.5::float-32-little>>
    blocks = div(elements, 1024)
    hex = :binary.copy(Base.encode16(block), blocks)
    t = "tensor<#{blocks * 1024}xf32>"

    IO.iodata_to_binary([
      "func.func public @main(%x: #{t}) -> #{t} {\n",
      "  %k = stablehlo.constant dense<\"0x", hex, "\"> : #{t}\n",
      "  %0 = stablehlo.add %x, %k : #{t}\n",
      "  return %0 : #{t}\n}\n"
    ])
  end

  defp i64(v), do: <<v::signed-little-64>>

  # ------------------------------------------------------------------------------------------------
  # Watching

  # Runs `funs` at once, one worker process each, and returns their results in order. A worker does
  # nothing but its function (and a garbage collection after it, so that what the function let go
  # of is destroyed by the worker itself), then waits to be stopped.
  defp in_workers(funs, timeout \\ 60_000) do
    me = self()

    pids =
      for fun <- funs do
        pid =
          spawn(fn ->
            result =
              try do
                {:ok, fun.()}
              catch
                kind, value -> {:crashed, Exception.format(kind, value, __STACKTRACE__)}
              end

            :erlang.garbage_collect()
            send(me, {:worker_done, self(), result})

            receive do
              :stop -> :ok
            end
          end)

        Process.put(:workers, MapSet.put(Process.get(:workers, MapSet.new()), pid))
        pid
      end

    for pid <- pids do
      receive do
        {:worker_done, ^pid, {:ok, result}} -> result
        {:worker_done, ^pid, {:crashed, text}} -> flunk("a worker crashed: " <> text)
      after
        timeout -> flunk("a worker did not finish within #{timeout} ms")
      end
    end
  end

  defp in_worker(fun, timeout \\ 60_000), do: hd(in_workers([fun], timeout))

  # One run of `workload` (a function of no arguments that calls in_worker/in_workers) under the
  # system monitor: {its result, [event]}.
  defp watched_run(workload) do
    flush_monitor()
    Process.put(:workers, MapSet.new())
    previous = :erlang.system_monitor(self(), [{:long_schedule, @limit_ms}])

    result =
      try do
        workload.()
      after
        # Long-schedule notices are sent when the process is scheduled out: give the last ones time
        # to arrive before the monitor is switched off.
        Process.sleep(100)
        restore_monitor(previous)
      end

    workers = Process.get(:workers, MapSet.new())
    for pid <- workers, do: send(pid, :stop)
    {result, Enum.map(collect_monitor([]), &classify(&1, workers))}
  end

  defp restore_monitor(:undefined), do: :erlang.system_monitor(:undefined)
  defp restore_monitor({pid, options}), do: :erlang.system_monitor(pid, options)

  defp flush_monitor do
    receive do
      {:monitor, _, :long_schedule, _} -> flush_monitor()
    after
      0 -> :ok
    end
  end

  defp collect_monitor(acc) do
    receive do
      {:monitor, who, :long_schedule, info} -> collect_monitor([{who, Map.new(info)} | acc])
    after
      0 -> Enum.reverse(acc)
    end
  end

  defp classify({who, info}, workers) do
    native = native_mfa?(info[:in]) or native_mfa?(info[:out])

    kind =
      cond do
        native -> :nif
        is_pid(who) and MapSet.member?(workers, who) -> :worker
        true -> :other
      end

    %{who: who, ms: info[:timeout], in: info[:in], out: info[:out], kind: kind}
  end

  defp native_mfa?({Plugboard.Native, _, _}), do: true
  defp native_mfa?(_), do: false

  defp counted(events), do: Enum.filter(events, &(&1.kind in [:nif, :worker]))

  defp describe_events([]), do: "none"

  defp describe_events(events) do
    Enum.map_join(events, "\n", fn e ->
      "    #{e.kind} #{inspect(e.who)} #{e.ms} ms in=#{inspect(e.in)} out=#{inspect(e.out)}"
    end)
  end

  defp summary(events) do
    c = counted(events)
    max = c |> Enum.map(& &1.ms) |> Enum.max(fn -> 0 end)
    others = Enum.count(events, &(&1.kind == :other))
    "#{length(c)} counted (max #{max} ms; #{Enum.count(c, &(&1.kind == :nif))} in Plugboard.Native), #{others} other"
  end

  # Runs `workload` under the monitor and asserts that plugboard held no normal scheduler for
  # @limit_ms or more: a run with counted events is followed by another, up to @runs, and the
  # workload fails when every run had some. Returns the first run's result.
  @runs 3
  defp assert_holds_no_scheduler(label, workload) do
    {result, events} = watched_run(workload)
    IO.puts("\n[scheduler] #{label}: long_schedule >= #{@limit_ms} ms: #{summary(events)}")
    if events != [], do: IO.puts(describe_events(events))
    runs = confirm(label, workload, [events])

    if Enum.all?(runs, &(counted(&1) != [])) do
      flunk(
        "#{label}: plugboard held a normal scheduler for #{@limit_ms} ms or more, in each of #{length(runs)} runs:\n" <>
          (runs |> Enum.with_index(1) |> Enum.map_join("\n", fn {e, i} -> "  run #{i}:\n" <> describe_events(counted(e)) end))
      )
    end

    result
  end

  defp confirm(label, workload, [last | _] = runs) do
    if counted(last) == [] or length(runs) == @runs do
      Enum.reverse(runs)
    else
      {_, events} = watched_run(workload)
      IO.puts("[scheduler] #{label}, run #{length(runs) + 1}: #{summary(events)}")
      if events != [], do: IO.puts(describe_events(events))
      confirm(label, workload, [events | runs])
    end
  end

  # ------------------------------------------------------------------------------------------------
  # Tests

  for {label, plugin} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        {:ok, client} = Plugboard.open(unquote(plugin))
        %{client: client, label: unquote(label)}
      end

      test "a 2 s while loop (which XLA runs inline) holds no scheduler", %{client: c, label: label} do
        exe = Plugboard.compile!(c, @loop_program, name: "loop")
        seed = Plugboard.buffer!(c, i64(7), :i64, {})
        run_loop = fn n -> Plugboard.run!(exe, [Plugboard.buffer!(c, i64(n), :i64, {}), seed]) |> hd() |> Plugboard.to_binary!() end

        # Sized here, on this machine and plugin, to about 2 s (outside the monitor's watch).
        calibration = 50_000_000
        ns_per_iteration =
          Enum.min(for _ <- 1..2, do: elem(:timer.tc(fn -> run_loop.(calibration) end), 0)) * 1000 / calibration

        n = max(round(2.0e9 / ns_per_iteration), calibration)

        {us, <<_::64>>} =
          assert_holds_no_scheduler("#{label}: #{n} loop iterations (#{Float.round(ns_per_iteration, 2)} ns each)", fn ->
            in_worker(fn -> :timer.tc(fn -> run_loop.(n) end) end)
          end)

        IO.puts("[scheduler] #{label}: the loop ran #{Float.round(us / 1.0e6, 2)} s")
        assert us >= 500_000, "the loop meant to run ~2 s ran #{us} us: it no longer tests a long program"
      end

      test "compiling a ~100 MB program holds no scheduler", %{client: c, label: label} do
        elements = div(100_000_000, 8)
        program = big_program(elements)
        assert byte_size(program) > 99_000_000

        outcome =
          assert_holds_no_scheduler("#{label}: compiling #{div(byte_size(program), 1_000_000)} MB of MLIR", fn ->
            in_worker(fn ->
              case Plugboard.compile(c, program, name: "big_constant", compile_cache: false, timeout: 120_000) do
                {:ok, exe} -> {:compiled, exe.compile_ms}
                {:error, e} -> {:error, e.code, String.slice(e.message, 0, 200)}
              end
            end, 150_000)
          end)

        # Either outcome will do: this is about the scheduler; but it must have come back.
        IO.puts("[scheduler] #{label}: the 100 MB compile: #{inspect(outcome)}")
        assert match?({:compiled, _}, outcome) or match?({:error, _, _}, outcome)
      end

      test "40 concurrent 256x256 matmuls from 40 processes hold no scheduler", %{client: c, label: label} do
        exe = Plugboard.compile!(c, @matmul_program, name: "matmul")
        data = for i <- 0..(256 * 256 - 1), into: <<>>, do: <<rem(i, 7) * 0.25::float-32-little>>
        a = Plugboard.buffer!(c, data, :f32, {256, 256})
        b = Plugboard.buffer!(c, data, :f32, {256, 256})
        [warm] = Plugboard.run!(exe, [a, b])
        expected = Plugboard.to_binary!(warm)

        outs =
          assert_holds_no_scheduler("#{label}: 40 matmuls from 40 processes", fn ->
            in_workers(for _ <- 1..40, do: fn -> Plugboard.run!(exe, [a, b]) |> hd() |> Plugboard.to_binary!() end)
          end)

        assert length(outs) == 40 and Enum.all?(outs, &(&1 == expected))
      end

      test "a 64 MiB reply to a blocking host callback holds no scheduler", %{client: c, label: label} do
        exe = Plugboard.compile!(c, @big_reply_program, name: "big_reply", callbacks: ["host_big"])
        x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4})
        big = :binary.copy(f32s([10, 20, 30, 40]), div(@big_reply_elements, 4))
        assert byte_size(big) == 64 * @mib
        callbacks = %{"host_big" => fn [_x] -> big end}
        # Once outside the watch: the callback path is warm.
        [out] = Plugboard.run!(exe, [x], callbacks: callbacks)
        assert to_f32s(Plugboard.to_binary!(out)) == [11.0, 22.0, 33.0, 44.0]

        out =
          assert_holds_no_scheduler("#{label}: a 64 MiB callback reply", fn ->
            in_worker(fn -> Plugboard.run!(exe, [x], callbacks: callbacks) |> hd() |> Plugboard.to_binary!() end)
          end)

        assert to_f32s(out) == [11.0, 22.0, 33.0, 44.0]
      end

      test "reading a 64 MiB buffer back and making one from a 64 MiB binary hold no scheduler", %{client: c, label: label} do
        data = :binary.copy(f32s(Enum.to_list(1..1024)), div(64 * @mib, 4096))
        source = Plugboard.buffer!(c, data, :f32, {div(64 * @mib, 4)})

        {read, made} =
          assert_holds_no_scheduler("#{label}: 64 MiB to_binary and buffer", fn ->
            in_worker(fn ->
              read = Plugboard.to_binary!(source)
              made = Plugboard.buffer!(c, data, :f32, {div(64 * @mib, 4)})
              {read, made}
            end)
          end)

        assert read == data
        assert Plugboard.to_binary!(made) == data
      end

      test "closing a client with live buffers and executables, and the GC destroying the last reference, hold no scheduler",
           %{label: label} do
        plugin = unquote(plugin)
        before = Plugboard.native_objects()
        # Four 16 MiB buffers per client; the program itself is tiny (this is about the teardown, not
        # the executions).
        big = :binary.copy(<<1.0::float-32-little>>, 4 * @mib)
        small = f32s([1, 2, 3, 4])

        # A client with an executable, four 16 MiB buffers and a small one.
        open_with_objects = fn ->
          {:ok, c} = Plugboard.open(plugin)
          exe = Plugboard.compile!(c, add_program(), name: "add")
          bigs = for _ <- 1..4, do: Plugboard.buffer!(c, big, :f32, {4 * @mib})
          {c, exe, bigs, Plugboard.buffer!(c, small, :f32, {4})}
        end

        assert_holds_no_scheduler("#{label}: close with live objects; GC of the last client reference", fn ->
          in_worker(fn ->
            # close/1 with buffers and an executable alive (they hold the client and still work);
            # then the worker lets go of them all and its garbage collection destroys the client.
            {c, exe, bigs, x} = open_with_objects.()
            [y] = Plugboard.run!(exe, [x, x])
            :ok = Plugboard.close(c)
            [_] = Plugboard.run!(exe, [x, y])
            length(bigs)
          end)

          in_worker(fn ->
            # The last reference dropped without close/1: the GC destroys the client.
            {_c, exe, bigs, x} = open_with_objects.()
            [_] = Plugboard.run!(exe, [x, x])
            length(bigs)
          end)

          in_worker(fn ->
            # close/1 of a client nothing else holds: the close itself destroys it.
            {:ok, c} = Plugboard.open(plugin)
            :ok = Plugboard.close(c)
          end)
        end)

        assert eventually(fn -> Plugboard.native_objects().client <= before.client end),
               "clients left: #{inspect(Plugboard.native_objects())} (before: #{inspect(before)})"
      end
    end
  end
end
