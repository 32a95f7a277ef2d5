defmodule Plugboard.Execution do
  @moduledoc """
  Running an executable: `run/3` waits for the outputs, `run_async/3` and `await/2` split the start
  from the wait, `run_partitioned/3` runs a program split over several devices. The process that
  waits answers the program's host calls bound to functions (`Plugboard.HostCalls`). `Plugboard`
  delegates these calls here.
  """
  alias Plugboard.{Buffer, Call, Error, Executable, HostCalls, Native, NativeReply, Options, OrderedCall, Run, Telemetry}

  @doc """
  Runs an executable on buffers and waits for its outputs: `{:ok, [Buffer.t()]}`.

  The execution holds no scheduler: it starts, and its completion arrives as a message. Options:

    * `callbacks: %{name => fun | pid}` — blocking host callbacks. A function (arity 1: the operands
      as `Plugboard.HostTensor`s; arity 2: also the call's attributes) runs in this process and
      returns the results (a list of binaries or `HostTensor`s, or one of them, or `{:error, message}`);
      a pid receives `{:plugboard_call, ref, %Plugboard.Call{}}` and answers with `Plugboard.reply/2`.
    * `ordered: %{name => fun | pid | :logger}` — ordered host calls, in program order: a function
      (arity 1, given the `Plugboard.OrderedCall`) runs in this process, a pid receives
      `{:plugboard_ordered, ref, call}`, `:logger` logs them. `"plugboard.print"` goes to `:logger`
      unless bound here.
    * `donate: [index]` — arguments given up to the execution (they become invalid). One that
      something else is using at that moment (a read, another execution still starting) is refused
      with `:aborted` before anything runs.
    * `device:` — device index (a program compiled `portable: true` for another than 0).
    * `callback_timeout:` — how long a blocking call waits for its answer (ms, default 60_000, or
      `:infinity`); `timeout:` — how long this call waits for the outputs (default `:infinity`).
      A call that gives up cancels the execution's waiting: its pending host calls fail, its thread
      is freed, and no message for it arrives later (a program already running on the device runs
      to its end: PJRT cannot stop it).

  A callback function that raises, throws or exits fails the execution with the reason; a handler
  process that dies fails its pending calls. While a blocking call waits for a process's answer, a
  run that process starts on the same device of the same client fails at once with
  `:failed_precondition`: XLA's CPU client may run the waiting execution in order with the device's
  others, so the new one would wait for it, and it for the answer (compute on the operands, or on
  another device or client). A call that is not answered holds the later executions on its device
  (any process's) until `callback_timeout:`, and nothing else (compiles, transfers, other devices).

  A program that calls back into Elixir: `@twice` is answered by a function run in this process.

      iex> program = """
      ...> func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      ...>   %0 = stablehlo.custom_call @twice(%x) {api_version = 4 : i32, has_side_effect = true} : (tensor<2xf32>) -> tensor<2xf32>
      ...>   return %0 : tensor<2xf32>
      ...> }
      ...> """
      iex> exe = Plugboard.compile!(Plugboard.client!(), program, callbacks: ["twice"])
      iex> x = Plugboard.buffer!(Plugboard.client!(), <<1.0::float-32-little, 2.0::float-32-little>>, :f32, {2})
      iex> twice = fn [t] -> for <<v::float-32-little <- t.data>>, into: <<>>, do: <<2 * v::float-32-little>> end
      iex> {:ok, [y]} = Plugboard.run(exe, [x], callbacks: %{"twice" => twice})
      iex> for <<v::float-32-little <- Plugboard.to_binary!(y)>>, do: v
      [2.0, 4.0]
  """
  @spec run(Executable.t(), [Buffer.t()], keyword()) :: Plugboard.result([Buffer.t()])
  def run(exe, args, opts \\ [])

  # The common call: a program without host callbacks, no options (nothing to check). The run is
  # awaited here, so nobody else can await it (a private Plugboard.Run: `shared?` false).
  def run(%Executable{callbacks: []} = exe, args, []) when is_list(args) do
    with {:ok, run} <- start(exe, args, [], 0, [], nil, %{}, %{}, false), do: await(run, :infinity)
  end

  def run(exe, args, opts) do
    with {:ok, timeout} <- Options.timeout(if(Keyword.keyword?(opts), do: opts, else: []), :timeout, :infinity),
         {:ok, run} <- launch(exe, args, opts, false),
         do: await(run, timeout)
  end

  @doc "Same as `run/3`, raising the error."
  @spec run!(Executable.t(), [Buffer.t()], keyword()) :: [Buffer.t()]
  def run!(exe, args, opts \\ []), do: Error.unwrap!(run(exe, args, opts))

  @doc """
  Runs a program compiled for several devices (`Plugboard.compile/3` with `partitions:`) on all of them at
  once: `args_per_device` has one list of buffers per device in `exe.devices`, in that order, each
  on its device (that device's part of each array). Returns `{:ok, outputs_per_device}`, one list
  of output buffers per device, in the same order, each on its device.

  Options: `donate:` (argument indices given up, in every device's list), `timeout:` (as `run/3`).
  Host callbacks are not carried across devices: a program that calls any is refused.
  """
  @spec run_partitioned(Executable.t(), [[Buffer.t()]], keyword()) :: Plugboard.result([[Buffer.t()]])
  def run_partitioned(exe, args_per_device, opts \\ [])

  def run_partitioned(%Executable{resource: r} = exe, [_ | _] = args_per_device, opts) when is_list(opts) do
    with :ok <- Options.known(opts, [:donate, :timeout], "run_partitioned"),
         {:ok, timeout} <- Options.timeout(opts, :timeout, :infinity),
         {:ok, donate} <- donate(opts),
         true <- Enum.all?(args_per_device, &is_list/1) || Options.invalid("run_partitioned: each device's arguments must be a list of buffers"),
         ref = make_ref(),
         span = Telemetry.run_start(exe.name, exe.target, exe.devices, false) do
      case Native.execute_partitioned(r, args_per_device, donate, self(), ref) do
        {:started, gate} ->
          await(%Run{ref: ref, gate: gate, blocking: %{}, ordered: %{}, executable: exe.name, telemetry: span}, timeout)

        error -> Telemetry.run_stop(span, error)
      end
    end
  end

  def run_partitioned(exe, args, _opts),
    do: Options.invalid("run_partitioned: expected a %Plugboard.Executable{} and a non-empty list of argument lists, got #{inspect(exe, limit: 3)} and #{inspect(args, limit: 3)}")

  @doc "Same as `run_partitioned/3`, raising the error."
  @spec run_partitioned!(Executable.t(), [[Buffer.t()]], keyword()) :: [[Buffer.t()]]
  def run_partitioned!(exe, args_per_device, opts \\ []), do: Error.unwrap!(run_partitioned(exe, args_per_device, opts))

  @doc """
  Starts an execution and returns at once with a `Plugboard.Run`; `await/2` collects the outputs.
  Host callbacks bound to functions run while this process is in `await/2`.

      iex> program = "func.func @main(%x: tensor<3xi32>) -> tensor<3xi32> { %0 = stablehlo.negate %x : tensor<3xi32> return %0 : tensor<3xi32> }"
      iex> exe = Plugboard.compile!(Plugboard.client!(), program)
      iex> x = Plugboard.buffer!(Plugboard.client!(), <<1::32-little, 2::32-little, 3::32-little>>, :i32, {3})
      iex> {:ok, run} = Plugboard.run_async(exe, [x])
      iex> {:ok, [y]} = Plugboard.await(run)
      iex> for <<v::signed-32-little <- Plugboard.to_binary!(y)>>, do: v
      [-1, -2, -3]
  """
  @spec run_async(Executable.t(), [Buffer.t()], keyword()) :: Plugboard.result(Run.t())
  def run_async(exe, args, opts \\ [])

  def run_async(exe, args, opts), do: launch(exe, args, opts, true)

  # run_async/3, and run/3 with options (`shared?` false: run/3 awaits it itself).
  defp launch(%Executable{callbacks: []} = exe, args, [], shared?) when is_list(args),
    do: start(exe, args, [], 0, [], nil, %{}, %{}, shared?)

  defp launch(%Executable{} = exe, args, opts, shared?) when is_list(args) do
    with :ok <- Options.known(opts, [:callbacks, :ordered, :donate, :device, :callback_timeout, :timeout], "run"),
         {:ok, _} <- Options.timeout(opts, :timeout, :infinity),
         {:ok, limit} <- Options.timeout(opts, :callback_timeout, 60_000),
         {:ok, device} <- Options.index(opts, :device, 0),
         {:ok, donate} <- donate(opts),
         {:ok, routes, blocking, ordered} <- HostCalls.bindings(exe, opts) do
      start(exe, args, donate, device, routes, if(limit == :infinity, do: nil, else: limit), blocking, ordered, shared?)
    end
  end

  defp launch(exe, args, _opts, _shared?),
    do: Options.invalid("run: expected a %Plugboard.Executable{} and a list of buffers, got #{inspect(exe, limit: 3)} and #{inspect(args, limit: 3)}")

  defp start(%Executable{resource: r} = exe, args, donate, device, routes, limit, blocking, ordered, shared?) do
    ref = make_ref()
    span = Telemetry.run_start(exe.name, exe.target, device, shared?)

    case Native.execute(r, args, donate, device, routes, limit, self(), ref) do
      {:started, gate} ->
        {:ok, %Run{ref: ref, gate: gate, blocking: blocking, ordered: ordered, executable: exe.name, telemetry: span}}

      # Finished inside the call (a small program on CPU): nothing to wait for.
      {:done, outcome} -> {:ok, %Run{ref: ref, blocking: %{}, ordered: %{}, executable: exe.name, done: outcome, telemetry: span}}
      {:error, _} = error -> Telemetry.run_stop(span, error)
      # A trace is being recorded: the NIF says so with the run's start (Plugboard.Trace), which
      # costs the untraced run nothing (no check of its own).
      {:started, gate, t0} ->
        {:ok, %Run{ref: ref, gate: gate, blocking: blocking, ordered: ordered, executable: exe.name, telemetry: span, trace: t0}}

      {:done, outcome, t0} -> {:ok, %Run{ref: ref, blocking: %{}, ordered: %{}, executable: exe.name, done: outcome, telemetry: span, trace: t0}}
    end
  end

  defp donate(opts) do
    case Keyword.get(opts, :donate, []) do
      list when is_list(list) -> {:ok, list}
      other -> Options.invalid("donate: must be a list of argument indices, got #{inspect(other, limit: 5)}")
    end
  end

  @doc """
  Waits for an execution started by `run_async/3`: its outputs, or its error (the execution's own, a
  failed callback's, or the first error of an ordered callback function run here). `timeout` (ms or
  `:infinity`) bounds the whole wait; when it passes, the execution is cancelled (as `run/3`'s
  `timeout:`) and the result is `{:error, %Plugboard.Error{code: :deadline_exceeded}}`, unless its
  outcome arrived meanwhile. Awaiting a cancelled run again is `:cancelled` at once.
  """
  @spec await(Run.t(), timeout()) :: Plugboard.result([Buffer.t()])
  def await(run, timeout \\ :infinity)

  def await(%Run{done: nil} = run, timeout) do
    with {:ok, timeout} <- Options.timeout([timeout: timeout], :timeout, :infinity) do
      if Native.cancelled?(run.gate) do
        {:error, Error.new(:cancelled, "#{run.executable}: this run was cancelled when an earlier wait for it gave up")}
      else
        deadline = if timeout == :infinity, do: :infinity, else: System.monotonic_time(:millisecond) + timeout
        outcome = Telemetry.run_stop(run.telemetry, await_loop(run, deadline, nil, timeout))
        if run.trace, do: traced(run, outcome), else: outcome
      end
    end
  end

  def await(%Run{done: outcome, telemetry: span, trace: nil}, _timeout), do: Telemetry.run_stop(span, outcome)
  def await(%Run{done: outcome, telemetry: span} = run, _timeout), do: traced(run, Telemetry.run_stop(span, outcome))

  # The run's span in the trace: from the launch (the NIF's start) to the outcome in this process.
  defp traced(%Run{trace: t0, executable: executable}, outcome) do
    Plugboard.Trace.own("run", "elixir", t0, %{executable: executable, result: if(match?({:ok, _}, outcome), do: "ok", else: "error")})
    outcome
  end

  # Only the calls bound to functions are this loop's; those bound to this very process stay in its
  # mailbox for it to read afterwards.
  defp await_loop(%Run{ref: ref, blocking: blocking, ordered: ordered} = run, deadline, ordered_error, timeout) do
    receive do
      {:plugboard_call, ^ref, %Call{name: name} = call} when is_map_key(blocking, name) ->
        # Past the deadline this process has stopped waiting: a call found in its mailbox then is not
        # answered (a run with timeout: 0 never waits on its callbacks), cancel fails it.
        if remaining(deadline) == 0 do
          :ok = Native.cancel(run.gate)
          drain(run, ordered_error, timeout)
        else
          HostCalls.answer(call, Map.get(run.blocking, call.name), run.executable)
          await_loop(run, deadline, ordered_error, timeout)
        end

      {:plugboard_ordered, ^ref, %OrderedCall{name: name} = call} when is_map_key(ordered, name) ->
        error = HostCalls.deliver_ordered(call, Map.get(run.ordered, call.name), run.executable)
        await_loop(run, deadline, ordered_error || error, timeout)

      {:plugboard_done, ^ref, outcome} ->
        finish(outcome, ordered_error)
    after
      remaining(deadline) ->
        :ok = Native.cancel(run.gate)
        drain(run, ordered_error, timeout)
    end
  end

  defp finish({:ok, _}, %Error{} = ordered_error), do: {:error, ordered_error}
  defp finish(outcome, _), do: outcome

  defp remaining(:infinity), do: :infinity
  defp remaining(deadline), do: max(deadline - System.monotonic_time(:millisecond), 0)

  # After cancel/1 nothing more comes for this run. What came already: ordered calls are delivered
  # (they happened, in program order, all before the outcome), blocking calls are dropped (cancel
  # failed them), and an outcome that arrived before the cancel is still the answer.
  defp drain(%Run{ref: ref, ordered: ordered} = run, ordered_error, timeout) do
    receive do
      {:plugboard_ordered, ^ref, %OrderedCall{name: name} = call} when is_map_key(ordered, name) ->
        drain(run, ordered_error || HostCalls.deliver_ordered(call, Map.get(ordered, name), run.executable), timeout)

      {:plugboard_done, ^ref, outcome} ->
        NativeReply.flush(ref)
        finish(outcome, ordered_error)
    after
      0 ->
        NativeReply.flush(ref)
        {:error, Error.new(:deadline_exceeded, "#{run.executable} did not finish in #{timeout} ms (cancelled)")}
    end
  end
end
