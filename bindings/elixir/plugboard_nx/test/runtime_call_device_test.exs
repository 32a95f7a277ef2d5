defmodule Plugboard.Nx.RuntimeCallDeviceTest do
  # What a runtime_call's function gets and what device work inside it does. The program here is
  # large enough (a 256x256 dot before the call) that XLA's CPU client runs it asynchronously, in
  # order with the device's other executions: device work started inside the function would queue
  # behind the very execution that waits for the function's answer.
  use ExUnit.Case, async: true
  import Plugboard.Nx.Case
  import Nx.Defn

  defn dot_then_call(x, fun_opts) do
    y = Nx.dot(x, x)
    Nx.runtime_call(y, y, fun_opts, &__MODULE__.apply_fun/2)
  end

  def apply_fun(t, opts), do: opts[:fun].(t)

  # A hook before a runtime call: the program waits for the call's answer, which the calling process
  # gives only after it has run the hook.
  defn hook_then_call(x) do
    y = hook(Nx.dot(x, x), :probe)
    Nx.runtime_call(y, y, [], &__MODULE__.identity/2)
  end

  def identity(t, _opts), do: t

  defp run(c, args), do: Nx.Defn.jit_apply(&dot_then_call/2, args, compiler: Plugboard.Nx, client: c)

  defp input(c, i), do: Nx.iota({256, 256}, type: :f32, backend: {Plugboard.Nx.Backend, client: c}) |> Nx.divide(65_536 * i)

  for {label, path} <- cpu_plugins() do
    describe "on #{label}" do
      setup do
        %{c: client(unquote(path))}
      end

      test "the function gets Nx.BinaryBackend tensors and Nx.BinaryBackend is its default backend", %{c: c} do
        me = self()
        Nx.default_backend({Plugboard.Nx.Backend, client: c})

        fun = fn t ->
          send(me, {:got, t.data.__struct__, Nx.default_backend(), Nx.iota({2}).data.__struct__})
          t
        end

        run(c, [input(c, 1), [fun: fun]])
        assert_received {:got, Nx.BinaryBackend, {Nx.BinaryBackend, _}, Nx.BinaryBackend}
        # Restored afterwards.
        assert Nx.default_backend() == {Plugboard.Nx.Backend, client: c}
      end

      test "eager Nx work in the function (default backend Plugboard.Nx.Backend), 8 callers at once", %{c: c} do
        started = System.monotonic_time(:millisecond)

        results =
          1..8
          |> Task.async_stream(
            fn i ->
              Nx.default_backend({Plugboard.Nx.Backend, client: c})
              fun = fn t -> t |> Nx.add(Nx.sum(Nx.iota({4}, type: :f32))) |> Nx.multiply(Nx.tensor(2.0)) end
              x = input(c, i)
              out = run(c, [x, [fun: fun]])
              # Outside the function, eager work runs on the device (the process's default backend).
              expected = x |> Nx.dot(x) |> Nx.add(6.0) |> Nx.multiply(2.0)
              Nx.all_close(out, expected, rtol: 1.0e-4) |> Nx.to_number()
            end,
            max_concurrency: 8,
            timeout: 20_000,
            on_timeout: :kill_task
          )
          |> Enum.to_list()

        assert results == List.duplicate({:ok, 1}, 8)
        assert System.monotonic_time(:millisecond) - started < 20_000
      end

      test "a function that does not answer holds up another process's run only until callback_timeout", %{c: c} do
        me = self()
        x = input(c, 1)
        y = Nx.tensor([1.0, 2.0], backend: {Plugboard.Nx.Backend, client: c})
        other = &Nx.Defn.jit_apply(fn t -> Nx.add(t, 1) end, [&1], compiler: Plugboard.Nx, client: c)

        spawn(fn ->
          fun = fn t -> send(me, :inside); Process.sleep(6_000); t end
          opts = [compiler: Plugboard.Nx, client: c, callback_timeout: 1_000]
          send(me, {:stuck, (try do: Nx.Defn.jit_apply(&dot_then_call/2, [x, [fun: fun]], opts), rescue: (e -> e))})
        end)

        assert_receive :inside, 10_000
        # A compile and a run of another program, from another process, while the function is stuck:
        # the run waits behind the stuck execution (XLA's in-order device queue) until its time limit.
        {micros, out} = :timer.tc(fn -> Task.await(Task.async(fn -> other.(y) |> Nx.backend_copy(Nx.BinaryBackend) end), 30_000) end)
        assert Nx.to_flat_list(out) == [2.0, 3.0]
        assert micros < 4_000_000, "the other run took #{div(micros, 1000)} ms"
        # The stuck call failed at its limit, naming the callback.
        assert_receive {:stuck, %Plugboard.Error{} = e}, 20_000
        assert Exception.message(e) =~ "host callback plugboard.nx.runtime_call.0 got no answer within 1000 ms"
      end

      test "in a program that waits for a runtime call, a hook is on the host too", %{c: c} do
        me = self()
        Nx.default_backend({Plugboard.Nx.Backend, client: c})
        opts = [compiler: Plugboard.Nx, client: c, callback_timeout: 8_000]
        on_host = fn t -> send(me, {:hooked, Nx.add(Nx.iota({2}), t[0][0]).data.__struct__}) end
        Nx.Defn.jit_apply(&hook_then_call/1, [input(c, 1)], Keyword.put(opts, :hooks, %{probe: on_host}))
        assert_received {:hooked, Nx.BinaryBackend}

        on_device = fn t -> t |> Nx.backend_transfer({Plugboard.Nx.Backend, client: c}) |> Nx.add(1) |> Nx.to_number() end
        {micros, error} =
          :timer.tc(fn ->
            assert_raise Plugboard.Error, fn ->
              Nx.Defn.jit_apply(&hook_then_call/1, [input(c, 1)], Keyword.put(opts, :hooks, %{probe: on_device}))
            end
          end)

        assert Exception.message(error) =~ "would wait for itself"
        assert micros < 6_000_000
      end

      test "on a client with 2 devices, a hook of a program on device 0 waiting for a runtime call may run on device 1; a shard_jit over both fails at once" do
        {:ok, c} = Plugboard.open(unquote(path), [{"cpu_device_count", 2}])
        me = self()
        opts = [compiler: Plugboard.Nx, client: c, callback_timeout: 8_000]

        on_device_1 = fn t ->
          out = Nx.Defn.jit_apply(&Nx.add(&1, 1), [t[0][0..1]], compiler: Plugboard.Nx, client: c, device_id: 1, output_backend: Nx.BinaryBackend)
          send(me, {:device_1, Nx.to_flat_list(out)})
        end

        Nx.Defn.jit_apply(&hook_then_call/1, [input(c, 1)], Keyword.put(opts, :hooks, %{probe: on_device_1}))
        assert_received {:device_1, [_, _]}

        mesh = %Nx.Mesh{name: "rows", shape: {2}}
        sharded = fn t ->
          args = for k <- 0..1, do: [Nx.slice_along_axis(t[0..3], 2 * k, 2)]
          Nx.Defn.shard_jit(&Nx.add(&1, 1), mesh, compiler: Plugboard.Nx, client: c, input_shardings: [%{0 => [0]}]).(args)
        end

        {micros, error} =
          :timer.tc(fn ->
            assert_raise Plugboard.Error, fn -> Nx.Defn.jit_apply(&hook_then_call/1, [input(c, 1)], Keyword.put(opts, :hooks, %{probe: sharded})) end
          end)

        # Refused by Plugboard.Nx before the run: the NIF knows of a blocking call only once the
        # program has reached it, after the hook's message went out.
        assert Exception.message(error) =~ "Plugboard.Nx: device work on device 0"
        assert Exception.message(error) =~ "would wait for itself"
        assert micros < 6_000_000
      end

      test "device work on the same client inside the function fails at once, naming the call", %{c: c} do
        pb = {Plugboard.Nx.Backend, client: c}
        fun = fn t -> t |> Nx.backend_transfer(pb) |> Nx.add(1) |> Nx.backend_transfer(Nx.BinaryBackend) end
        {micros, error} = :timer.tc(fn -> assert_raise Plugboard.Error, fn -> run(c, [input(c, 1), [fun: fun]]) end end)
        assert Exception.message(error) =~ "would wait for itself"
        assert Exception.message(error) =~ "runtime_call"
        assert micros < 10_000_000
        # The client goes on working.
        assert Nx.to_number(Nx.sum(run(c, [input(c, 1), [fun: &Nx.negate/1]]))) < 0
      end
    end
  end
end
