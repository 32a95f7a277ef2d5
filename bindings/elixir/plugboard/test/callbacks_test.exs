defmodule Plugboard.CallbacksTest do
  use ExUnit.Case, async: true
  import Plugboard.TestSupport
  import ExUnit.CaptureLog
  alias Plugboard.{Call, Error, OrderedCall}

  for {label, plugin} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        {:ok, client} = Plugboard.open(unquote(plugin))
        exe = Plugboard.compile!(client, callback_program(), callbacks: ["plugboard.print", "host_scale"])
        x = Plugboard.buffer!(client, f32s(Enum.to_list(1..8)), :f32, {2, 4})
        %{client: client, exe: exe, x: x}
      end

      test "a blocking callback runs in the caller and its results go into the program", %{exe: exe, x: x} do
        assert exe.callbacks |> Enum.sort() == ["host_scale", "plugboard.print"]
        scale = fn [%Plugboard.HostTensor{dtype: :f32, shape: {2, 4}} = t] -> f32s(Enum.map(to_f32s(t.data), &(&1 * 10))) end
        [out] = Plugboard.run!(exe, [x], callbacks: %{"host_scale" => scale}, ordered: %{"plugboard.print" => fn _ -> :ok end})
        assert to_f32s(Plugboard.to_binary!(out)) == Enum.map(1..8, &(&1 * 11.0))
      end

      test "print hooks are logged, in order, by default", %{exe: exe, x: x} do
        log =
          capture_log(fn ->
            Plugboard.run!(exe, [x], callbacks: %{"host_scale" => fn [t] -> t end})
            Process.sleep(100)
          end)

        assert log =~ "plugboard.print x: f32[2,4] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]"
        assert log =~ "plugboard.print scaled: f32[2,4] [1.0, 2.0"
        {a, _} = :binary.match(log, "print x:")
        {b, _} = :binary.match(log, "print scaled:")
        assert a < b
      end

      test "a handler process answers calls sent to it", %{exe: exe, x: x} do
        handler =
          spawn_link(fn ->
            receive do
              {:plugboard_call, _ref, %Call{name: "host_scale", operands: [t], results: [{:f32, {2, 4}}]} = call} ->
                :ok = Plugboard.reply(call, [t])
            end
          end)

        me = self()
        [out] = Plugboard.run!(exe, [x], callbacks: %{"host_scale" => handler}, ordered: %{"plugboard.print" => me})
        assert to_f32s(Plugboard.to_binary!(out)) == Enum.map(1..8, &(&1 * 2.0))
        assert_received {:plugboard_ordered, _, %OrderedCall{name: "plugboard.print", sequence: 0, attributes: %{"label" => "x"}}}
        assert_received {:plugboard_ordered, _, %OrderedCall{sequence: 1, attributes: %{"label" => "scaled"}}}
      end

      test "a callback that raises fails the execution with its message", %{exe: exe, x: x} do
        assert {:error, %Error{message: m}} =
                 Plugboard.run(exe, [x], callbacks: %{"host_scale" => fn _ -> raise "no scale today" end})
        assert m =~ "host_scale" and m =~ "no scale today"
      end

      test "an answer of the wrong type fails the execution, naming it", %{exe: exe, x: x} do
        assert {:error, %Error{code: :invalid_argument, message: m}} =
                 Plugboard.run(exe, [x], callbacks: %{"host_scale" => fn _ -> <<1, 2, 3>> end})
        assert m =~ "result 0 of host callback host_scale" and m =~ "32 bytes"
        wrong = %Plugboard.HostTensor{data: <<0::256>>, dtype: :i32, shape: {2, 4}}
        assert {:error, %Error{message: m}} = Plugboard.run(exe, [x], callbacks: %{"host_scale" => fn _ -> wrong end})
        assert m =~ "must be f32[2,4]"
      end

      test "an unbound callback is named before anything runs", %{exe: exe, x: x} do
        assert {:error, %Error{code: :not_found, message: m}} = Plugboard.run(exe, [x])
        assert m =~ "host_scale"
      end

      test "a handler that dies mid-call fails the call and hangs nothing", %{exe: exe, x: x} do
        handler =
          spawn(fn ->
            receive do
              {:plugboard_call, _, _} -> exit(:boom)
            end
          end)

        assert {:error, %Error{code: :aborted, message: m}} =
                 Plugboard.run(exe, [x], callbacks: %{"host_scale" => handler}, timeout: 10_000)
        assert m =~ "exited before answering"
      end

      test "a caller killed mid-callback leaves nothing waiting", %{exe: exe, x: x} do
        me = self()

        caller =
          spawn(fn ->
            Plugboard.run(exe, [x], callbacks: %{"host_scale" => fn _ -> send(me, :in_callback); Process.sleep(:infinity) end})
          end)

        assert_receive :in_callback, 5_000
        # The callback runs in the caller: killing it drops the pending call (its message and the
        # monitor); the execution fails on its own and the plugin thread is released.
        Process.exit(caller, :kill)
        # The same program still runs afterwards (a stuck plugin thread would hold it on 2 cores).
        for _ <- 1..4 do
          [out] = Plugboard.run!(exe, [x], callbacks: %{"host_scale" => fn [t] -> t end}, timeout: 10_000)
          assert to_f32s(Plugboard.to_binary!(out)) == Enum.map(1..8, &(&1 * 2.0))
        end
      end

      test "a dropped call fails instead of waiting", %{exe: exe, x: x} do
        handler = spawn(fn -> receive do: ({:plugboard_call, _, _} -> Process.sleep(:infinity)) end)
        assert {:error, %Error{code: :deadline_exceeded, message: m}} =
                 Plugboard.run(exe, [x], callbacks: %{"host_scale" => handler}, callback_timeout: 200)
        assert m =~ "no answer within 200 ms"
        Process.exit(handler, :kill)
      end

      test "a wait that gives up cancels: the call fails, no message follows, a second await is :cancelled", %{exe: exe, x: x} do
        me = self()
        handler = spawn(fn -> receive do: ({:plugboard_call, _, call} -> send(me, {:call, call}) && Process.sleep(:infinity)) end)
        quiet = %{"plugboard.print" => fn _ -> :ok end}
        {:ok, run} = Plugboard.run_async(exe, [x], callbacks: %{"host_scale" => handler}, ordered: quiet, callback_timeout: :infinity)
        assert_receive {:call, call}, 5_000
        assert {:error, %Error{code: :deadline_exceeded}} = Plugboard.await(run, 50)
        # The pending call failed (the handler's answer is refused), and the run is over for good.
        assert {:error, %Error{code: :failed_precondition}} = Plugboard.reply(call, [f32s(Enum.to_list(1..8))])
        assert {:error, %Error{code: :cancelled}} = Plugboard.await(run, :infinity)
        ref = run.ref
        refute_receive {_, ^ref, _}, 300
        Process.exit(handler, :kill)
      end
    end
  end

  test "a donated argument of a launch that fails on a thread is given back, even when its term is gone" do
    {:ok, c} = Plugboard.open(first_plugin())
    n = 32_768
    exe = Plugboard.compile!(c, add_program(:f32, [n]))
    assert exe.launch == :thread
    data = f32s(List.duplicate(1.0, n))
    y = Plugboard.buffer!(c, data, :f32, {n}, copy: true)
    # Device 3 does not exist: the launch fails on the pool thread, after the NIF call returned.
    x = Plugboard.buffer!(c, data, :f32, {n}, copy: true)
    assert {:ok, run} = Plugboard.run_async(exe, [x, y], donate: [0], device: 3)
    assert {:error, %Error{}} = Plugboard.await(run, 5_000)
    assert Plugboard.valid?(x)
    # The same from processes that exit at once: their x is garbage while the launch is still queued
    # (under ASan a write into the freed resource is reported).
    for _ <- 1..50 do
      spawn(fn ->
        x = Plugboard.buffer!(c, data, :f32, {n}, copy: true)
        {:ok, _} = Plugboard.run_async(exe, [x, y], donate: [0], device: 3)
      end)
    end

    Process.sleep(500)
    :erlang.garbage_collect()
    assert Plugboard.valid?(y)
  end

  test "100 processes running one executable at once each get their own calls, in order" do
    {:ok, c} = Plugboard.open(first_plugin())
    exe = Plugboard.compile!(c, callback_program([4]), callbacks: ["plugboard.print", "host_scale"])
    chain = Plugboard.compile!(c, ordered_chain_program("step", 20), callbacks: ["step"])
    parent = self()

    tasks =
      for i <- 1..100 do
        Task.async(fn ->
          x = Plugboard.buffer!(c, f32s([i, i, i, i]), :f32, {4})
          scale = fn [t] -> f32s(Enum.map(to_f32s(t.data), &(&1 * i))) end
          prints = fn %OrderedCall{operands: [t]} -> send(self(), {:printed, to_f32s(t.data)}) end
          [out] = Plugboard.run!(exe, [x], callbacks: %{"host_scale" => scale}, ordered: %{"plugboard.print" => prints})
          steps = for _ <- 1..3, do: run_chain(chain, c)
          send(parent, {:done, i})
          {to_f32s(Plugboard.to_binary!(out)), collect_prints(), steps}
        end)
      end

    for {task, i} <- Enum.with_index(tasks, 1) do
      {out, prints, steps} = Task.await(task, 60_000)
      assert out == List.duplicate(i * i + i * 1.0, 4)
      assert prints == [List.duplicate(i * 1.0, 4), List.duplicate(i * i * 1.0, 4)]
      assert Enum.all?(steps, &(&1 == Enum.to_list(1..20)))
    end
  end

  defp run_chain(chain, c) do
    me = self()
    [_] = Plugboard.run!(chain, [Plugboard.buffer!(c, <<0::32>>, :i32, {})], ordered: %{"step" => me})
    collect_steps([])
  end

  defp collect_steps(acc) do
    receive do
      {:plugboard_ordered, _, %OrderedCall{name: "step", sequence: s, operands: [t]}} ->
        assert s == length(acc)
        <<v::signed-little-32>> = t.data
        collect_steps([v | acc])
    after
      0 -> Enum.reverse(acc)
    end
  end

  defp collect_prints(acc \\ []) do
    receive do
      {:printed, v} -> collect_prints([v | acc])
    after
      0 -> Enum.reverse(acc)
    end
  end
end
