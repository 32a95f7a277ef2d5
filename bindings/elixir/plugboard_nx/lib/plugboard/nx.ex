defmodule Plugboard.Nx do
  @moduledoc """
  An `Nx.Defn` compiler that runs numerical definitions on the target plugboard booted: CPU here,
  CUDA or ROCm elsewhere, with no per-target build.

      iex> softmax = fn x -> Nx.exp(x) |> Nx.divide(Nx.sum(Nx.exp(x))) end
      iex> y = Nx.Defn.jit(softmax, compiler: Plugboard.Nx).(Nx.tensor([0.0, 0.0, 0.0, 0.0]))
      iex> Nx.to_flat_list(y)
      [0.25, 0.25, 0.25, 0.25]
      iex> y.data.__struct__
      Plugboard.Nx.Backend

  (`Nx.Defn.global_default_options(compiler: Plugboard.Nx)` makes it every jit's compiler.)

  Each function is lowered to StableHLO text (`Plugboard.Nx.Emitter`), compiled once per argument
  template and cached (in memory, then in plugboard's persistent compile cache), and run through
  `Plugboard.run/3`; results are `Plugboard.Nx.Backend` tensors that stay on the device.

  Options:
    * `client:` — a `%Plugboard.Client{}` to run on, or the name of one configured under
      `config :plugboard_nx, :clients` (below; default: `config :plugboard_nx, :default_client`,
      else the client the `:plugboard` application booted, `Plugboard.client/0`);
    * `target:` — a target name of the booted bundle to boot and use instead;
    * `device_id:` — the device of the client to run on (default 0; the program is then compiled
      portable, and arguments on another device are copied to it);
    * `debug: true` — print the MLIR module when it is compiled;
    * `callback_timeout:` — how long the program waits for a `Nx.runtime_call/4` function's answer
      (ms or `:infinity`; default 60_000, `Plugboard.run/3`'s) before that call fails. While it waits,
      the later executions on its device (any process's, any program) wait behind it: XLA's CPU
      client runs a device's asynchronous executions in order. Nothing else waits: compiles (the
      host-callback self-test ran when the client was opened), copies to the device, reads of
      computed tensors, other devices and other clients go on. This bounds what a stuck function
      costs everyone else; a client with several CPU devices (`cpu_device_count`) confines it to one;
    * `max_concurrency:` — `Nx.Serving` partitions sharing one device (default: one partition per
      device of the client, each with its `device_id:`, as EXLA's);
    * `output_backend:` — a backend (`Nx.BinaryBackend`, or `{module, options}`) the results are
      transferred to, for code that reads them in Elixir (default: they stay on the device).

  `Nx.Defn.shard_jit/3` splits one program over the devices of an `Nx.Mesh` (`input_shardings:`,
  `partitioner:`, `devices:`): see `Plugboard.Nx.Shard`.

  `Nx.runtime_call/4`'s function runs in the calling process while the program waits for its answer.
  It gets host tensors (`Nx.BinaryBackend`, as EXLA's) and runs with `Nx.BinaryBackend` as its
  default backend (restored afterwards), so eager Nx work in it stays on the host. Device work it
  starts on the program's own device (a jit, or a `shard_jit` including it) fails at once with a
  `Plugboard.Error` (`:failed_precondition`): the device would run that work only after the execution
  waiting for the function, so it would wait for itself. Another device of the client is fine. Hooks and `runtime_cast/3` are not waited for and may do device work, except in a
  program that also makes a runtime call: there the program may be waiting for a later call's answer,
  which this process gives only after the hook, so a hook's function is held to the same rule.

  Side effects (`Nx.io_call/2,3` and `print_value` on Nx 1.0, `hook` on Nx 0.13; see
  `Plugboard.Nx.Features`) are ordered host calls run in the calling process, in program order, inside
  `while` and `cond` too. `hooks: %{name => fun}` (Nx 1.0 passes the option on every call, a map;
  each value a function of one argument, or nil) overrides the named ones; a named one without a
  callback that `hooks:` does not bind is left out of the program. A callback that raises, throws or
  exits makes the call fail with that same exception once the execution is over; the side effects
  after it in the program are not called.

  ## Traces

  With `Plugboard.Trace` on, each jitted call records a `jit` span (category `nx`, argument
  `function`) on the calling process's track with, inside it, `cache_lookup` (`outcome`: `hit` or
  `miss`), `compile` on a miss (`emit` in it; the library's own compile spans on its thread),
  `arguments` (`buffers`, `copied`, `bytes`: what was copied to the device) and `run` (`device`);
  a side effect's and a runtime call's function record `io_call` / `runtime_call` (category
  `callback`, `target`) inside the run. Off, a call pays one `Plugboard.Trace.enabled?/0`.

      :ok = Plugboard.Trace.start()
      step = Nx.Defn.jit(&MyModel.train_step/3, compiler: Plugboard.Nx)
      {params, loss} = step.(params, x, y)
      {:ok, trace} = Plugboard.Trace.stop()
      Plugboard.Trace.write(trace, "step.trace.json")   # Perfetto opens it
  """
  @behaviour Nx.Defn.Compiler
  @inside_runtime_call {__MODULE__, :inside_runtime_call}
  @side_effect_failure {__MODULE__, :side_effect_failure}
  @compiled_here {__MODULE__, :compiled_here}
  import Nx.Defn, only: [deftransform: 2]
  alias Nx.Defn.Composite
  alias Plugboard.Nx.{Arguments, Backend, BufferPressure, Cache, Donation, Emitter}
  alias Plugboard.Trace

  @impl true
  # Nx.Serving runs one partition per entry, each in its own process: one per device of the client
  # (each with its `device_id:`, as EXLA does), or `max_concurrency:` of them sharing the device the
  # options name (executions on one client run concurrently, each on its own thread).
  def __partitions_options__(opts) do
    case Keyword.fetch(opts, :max_concurrency) do
      {:ok, n} ->
        List.duplicate(opts, n)

      :error ->
        {:ok, devices} = Plugboard.devices(client!(opts))
        for i <- 0..(max(length(devices), 1) - 1), do: Keyword.put(opts, :device_id, i)
    end
  end

  @impl true
  def __to_backend__(opts), do: {Backend, client: client!(opts)}

  @impl true
  # Nx.Defn.shard_jit/3: one program split over the devices of a mesh (Plugboard.Nx.Shard).
  def __shard_jit__(key, mesh, vars, fun, args_list, opts) do
    Donation.refuse_split!(vars)
    Plugboard.Nx.Shard.shard_jit(key, mesh, vars, fun, args_list, opts)
  end

  @impl true
  # Traced (Plugboard.Trace on): a `jit` span around the call, with `cache_lookup`, `compile` (on a
  # miss), `arguments` and `run` inside. Off, the one enabled?/0 check is all it adds.
  def __jit__(key, vars, fun, args_list, opts) do
    if Trace.enabled?() do
      Trace.span("jit", "nx", %{function: name_of(key)}, fn -> prepare(key, vars, fun, opts, true).(args_list, true) end)
    else
      prepare(key, vars, fun, opts, false).(args_list, false)
    end
  end

  @impl true
  def __compile__(key, vars, fun, opts) do
    run_all = prepare(key, vars, fun, opts, Trace.enabled?())
    fn args_list -> run_all.(args_list, Trace.enabled?()) end
  end

  # The compiled program for `vars` (from the cache, or compiled now), as the function that runs it on
  # a list of argument lists (`traced`: record the `arguments` and `run` spans). A closure over what
  # the runs need, not a map of it: a cached jit builds this on every call (dispatch_budget.exs).
  defp prepare(key, vars, fun, opts, traced) do
    client = client!(opts)
    bound_hooks = bound_hooks(opts)
    # A program for a chosen device is compiled portable (runs on any device of the client).
    device = opts[:device_id]
    cache_key = Cache.key(client, function_key(key), vars, {:jit, bound_hooks, device != nil, debug?(opts)})
    # Nx.donatable/1's marks (Plugboard.Nx.Donation); the cache key holds them (Cache.key/4).
    donated = vars |> Composite.flatten_list() |> Donation.donated()

    compile = fn ->
        params = vars |> Composite.flatten_list() |> Enum.map(&Nx.devectorize/1)
        {expr, output} = devectorized_output(fun.(vars))
        # Nx.LinAlg's eigh and svd call LAPACK on a CPU client (Plugboard.Nx.LinAlg).
        aliased = Donation.pairs(params, donated, Composite.flatten_list([expr]))
        annotations = %{lapack: Plugboard.Nx.LinAlg.lapack?(client), args: Donation.aliases(aliased)}
        {text, _, used, hooks, constants} = Trace.span("emit", "nx", %{}, fn -> Emitter.to_mlir(params, expr, bound_hooks, annotations) end)
        # Only the parameters the program reads become buffers: an unread sub-byte one is fine.
        Backend.check_types!(for(i <- used, do: {Enum.at(params, i), Arguments.name(vars, i)}))
        Backend.check_types!(for({t, i} <- Enum.with_index(Composite.flatten_list([expr])), do: {t, "result #{i}"}))
        if opts[:debug], do: IO.puts(text)
        targets = Enum.map(hooks, &elem(&1, 1))
        exe = Plugboard.compile!(client, text, name: name_of(key), callbacks: targets, portable: device != nil)
        # Large constants live on the device with the executable, sent once.
        # An output written into a donated argument's memory is not new memory (BufferPressure).
        bytes = {BufferPressure.bytes(output), Donation.reused_bytes(aliased, used, Composite.flatten_list([expr]))}
        {exe, output, used, hooks, Enum.map(constants, &Backend.to_buffer(client, &1, device || 0)), bytes}
      end

    {exe, output, used, hooks, constants, {output_bytes, reused}} =
      if traced, do: traced_lookup(client, cache_key, compile), else: Cache.get_or_compile(client, cache_key, compile)

    # The run's options: none at all (plugboard's fast path) for a program without host calls on
    # device 0, the common case.
    run_opts =
      case {hooks, device} do
        {[], nil} ->
          []

        _ ->
          {ordered, blocking} = host_callbacks(hooks, hooks!(opts), {client, device || 0})
          [ordered: ordered, callbacks: blocking, device: device || 0] ++ Keyword.take(opts, [:callback_timeout])
      end

    device = device || 0
    output_backend = opts[:output_backend]
    donated = Donation.positions(donated, used)

    fn args_list, traced ->
      for args <- args_list do
        # Only the arguments the program reads are computed (lazy containers) and sent.
        args = if length(args) == length(used), do: args, else: for({a, i} <- Enum.with_index(args), i in used, do: a)
        started = if traced, do: Trace.now()
        tensors = Enum.map(args, & &1.())
        buffers = Enum.map(tensors, &Backend.to_buffer(client, &1, device)) ++ on_device(client, constants, device)
        if traced, do: Trace.record("arguments", "nx", started, Trace.now(), arguments_args(tensors, buffers, client, device))
        refuse_inside_runtime_call(client, [device])
        donate = Donation.run_donate(donated, tensors, buffers)
        name_of = &argument_name(vars, used, &1)

        {outputs, donate} =
          if traced,
            do: Trace.span("run", "nx", %{device: device}, fn -> run!(exe, buffers, donate, run_opts, name_of) end),
            else: run!(exe, buffers, donate, run_opts, name_of)

        BufferPressure.received(output_bytes - reused_bytes(donate, reused))
        results(output, outputs, client, output_backend)
      end
    end
  end

  # The bytes of donated arguments' memory that outputs reused (not new memory).
  defp reused_bytes([], _reused), do: 0
  defp reused_bytes(donate, reused), do: Enum.reduce(donate, 0, &(Map.get(reused, &1, 0) + &2))

  # The outputs' buffers as tensors of the program's output container (one tensor, the common case,
  # without a traversal).
  defp results(%Nx.Tensor{} = template, [buffer], client, output_backend),
    do: result(template, buffer, client, output_backend)

  defp results(output, outputs, client, output_backend) do
    {result, []} =
      Composite.traverse(output, outputs, fn template, [buffer | rest] ->
        {result(template, buffer, client, output_backend), rest}
      end)

    result
  end

  # Inlined: the common one-output call pays no call for it (dispatch_budget.exs).
  @compile {:inline, result: 4}
  defp result(template, buffer, client, output_backend),
    do: template |> Backend.from_buffer(buffer, client) |> transfer(output_backend)

  # Cache.get_or_compile/3 traced: a `cache_lookup` span (`outcome`: hit or miss; up to where this
  # process starts compiling) and, on a miss, a `compile` span (with `emit` and the library's own
  # compile spans inside). A lookup that waited for another process's compile is a hit here.
  defp traced_lookup(client, cache_key, compile) do
    start = Trace.now()
    previous = Process.put(@compiled_here, false)

    try do
      value =
        Cache.get_or_compile(client, cache_key, fn ->
          Trace.record("cache_lookup", "nx", start, Trace.now(), %{outcome: "miss"})
          Process.put(@compiled_here, true)
          Trace.span("compile", "nx", %{}, compile)
        end)

      if Process.get(@compiled_here) == false, do: Trace.record("cache_lookup", "nx", start, Trace.now(), %{outcome: "hit"})
      value
    after
      if previous == nil, do: Process.delete(@compiled_here), else: Process.put(@compiled_here, previous)
    end
  end

  # The `arguments` span's arguments: how many buffers the run takes, and how many of them (and how
  # many bytes) were copied to the device for it (the rest were there already).
  defp arguments_args(tensors, buffers, client, device) do
    copied = for t <- tensors, not resident?(t, client, device), do: Nx.byte_size(t)
    %{buffers: length(buffers), copied: length(copied), bytes: Enum.sum(copied)}
  end

  # A tensor Backend.to_buffer/3 passes as it is: a buffer of this client on this device.
  defp resident?(%Nx.Tensor{data: %Backend{buffer: %{device: device}, client: %{resource: r}}}, client, device), do: r == client.resource
  defp resident?(_tensor, _client, _device), do: false

  defp with_donate([], run_opts), do: run_opts
  defp with_donate(donate, run_opts), do: [{:donate, donate} | run_opts]

  @doc false
  # Whether `debug:` asks for the module to be printed (any true value, as the compile reads it): a
  # cache key's part, so that a debug call compiles (and prints) its own program.
  def debug?(opts), do: opts[:debug] not in [nil, false]

  # The names of the io_calls `hooks:` binds, sorted (a cache key's part).
  defp bound_hooks(opts) do
    case hooks!(opts) do
      hooks when hooks == %{} -> []
      hooks -> hooks |> Map.keys() |> Enum.sort()
    end
  end

  # `hooks:` (Nx 1.0 always passes it; Nx 0.13 only when the caller does): the named side effects'
  # callbacks, by name, each a function of one argument (or nil: the expression's own callback).
  defp hooks!(opts) do
    case Keyword.get(opts, :hooks, %{}) do
      # The common call binds none: nothing to check (on every jit call).
      hooks when hooks == %{} ->
        hooks

      hooks when is_map(hooks) ->
        for {name, fun} <- hooks, not (is_nil(fun) or is_function(fun, 1)) do
          raise ArgumentError,
                "Plugboard.Nx: hooks: binds #{inspect(name)} to #{inspect(fun)}; each io_call name takes a function of one argument (or nil)"
        end

        hooks

      other ->
        raise ArgumentError, "Plugboard.Nx: hooks: expects a map of io_call names to functions of one argument, got #{inspect(other)}"
    end
  end

  # The key Nx gives (usually the function) as a cache key. A closure over an expression (Nx's
  # Graph.run jits `fn _ -> expr end`) would make the key the whole expression: hashing it for the
  # table visits every path of a DAG (a chain of 45 `acc + acc` has 2^45), which never finished and
  # held a scheduler. Expressions in a closure's environment stand in the key by their ids.
  @doc false
  def function_key(key) when is_function(key) do
    case Function.info(key, :env) do
      {:env, []} -> key
      {:env, env} -> if Enum.any?(env, &holds_expr?/1), do: {:closure, Function.info(key, :module), Function.info(key, :new_uniq), Enum.map(env, &expr_ids/1)}, else: key
    end
  end

  def function_key(key), do: key

  defp holds_expr?(%Nx.Tensor{data: %Nx.Defn.Expr{}}), do: true
  defp holds_expr?(%Nx.Tensor{}), do: false
  defp holds_expr?(tuple) when is_tuple(tuple), do: tuple |> Tuple.to_list() |> Enum.any?(&holds_expr?/1)
  defp holds_expr?([head | tail]), do: holds_expr?(head) or holds_expr?(tail)
  defp holds_expr?(%_{}), do: false
  defp holds_expr?(map) when is_map(map), do: Enum.any?(map, fn {k, v} -> holds_expr?(k) or holds_expr?(v) end)
  defp holds_expr?(_), do: false

  defp expr_ids(%Nx.Tensor{data: %Nx.Defn.Expr{id: id}}), do: {:expr, id}
  defp expr_ids(tuple) when is_tuple(tuple), do: tuple |> Tuple.to_list() |> Enum.map(&expr_ids/1) |> List.to_tuple()
  defp expr_ids(list) when is_list(list), do: Enum.map(list, &expr_ids/1)
  defp expr_ids(%Nx.Tensor{} = t), do: t
  defp expr_ids(%_{} = struct), do: struct
  defp expr_ids(map) when is_map(map), do: Map.new(map, fn {k, v} -> {expr_ids(k), expr_ids(v)} end)
  defp expr_ids(other), do: other

  # The constants' buffers, copied to `device` when the program runs elsewhere than where they were
  # made (a portable program with several device_ids).
  defp on_device(_client, [], _device), do: []

  defp on_device(client, buffers, device) do
    Enum.map(buffers, fn
      %Plugboard.Buffer{device: ^device} = b -> b
      b -> Plugboard.buffer!(client, Plugboard.to_binary!(b), b.dtype, b.shape, device: device)
    end)
  end

  defp transfer(tensor, nil), do: tensor
  defp transfer(tensor, backend), do: Nx.backend_transfer(tensor, backend)

  @doc """
  Calls `fun.(tensors, opts)` in the calling process for its side effects, without the program
  waiting for it: the non-blocking form of `Nx.runtime_call/4`, for calls whose results the program
  does not need (logging, metrics, progress). Returns `tensor_or_container` unchanged: go on with
  the returned value, as with `Nx.io_call/2` (`hook/2` on Nx 0.13; a cast whose result nothing uses
  is dropped from the program, as Nx drops such side effects).

  Inside `defn` it is an ordered host call, in program order with the hooks and runtime calls around
  it (an `Nx.io_call/2` whose function also gets `opts`); the tensors arrive as
  `Nx.BinaryBackend` tensors. Outside `defn`, `fun` runs at once.

      defn step(x) do
        y = Plugboard.Nx.runtime_cast(x * 2, [label: "y"], &MyApp.Metrics.record/2)
        y + 1
      end
  """
  deftransform runtime_cast(tensor_or_container, opts \\ [], fun) when is_function(fun, 2) and is_list(opts) do
    if Enum.any?(Composite.flatten_list([tensor_or_container]), &match?(%Nx.Tensor{data: %Nx.Defn.Expr{}}, &1)) do
      side_effect(tensor_or_container, fn value -> fun.(value, opts) end)
    else
      fun.(tensor_or_container, opts)
      tensor_or_container
    end
  end

  # The side-effect node of the Nx in use: io_call (Nx 1.0), else hook (Nx 0.13).
  if Plugboard.Nx.Features.io_call?() do
    defp side_effect(container, fun), do: Nx.io_call(container, fun)
  else
    defp side_effect(container, fun), do: Nx.Defn.Kernel.hook(container, fun)
  end

  @doc """
  The StableHLO module `fun` compiles to for `args` (tensors or templates, as `Nx.Defn.jit` takes
  them): for reading, debugging, or `plugboard run`.

      iex> mlir = Plugboard.Nx.to_mlir(&Nx.add(&1, 1), [Nx.template({4}, :f32)])
      iex> mlir =~ "func.func public @main(%arg0: tensor<4xf32>)"
      true
      iex> mlir =~ "stablehlo.add"
      true
  """
  def to_mlir(fun, args) do
    {expr, _output} = devectorized_output(Nx.Defn.debug_expr_apply(fun, args))
    params = args |> Composite.flatten_list() |> Enum.map(&(&1 |> Nx.to_template() |> Nx.devectorize()))
    # As the jit compiles it: Nx.donatable/1 arguments aliased to their outputs.
    aliases = Donation.aliases(Donation.pairs(params, Donation.donated(params), Composite.flatten_list([expr])))
    {text, _, _, _, _} = Emitter.to_mlir(params, expr, [], %{args: aliases})
    text
  end

  # The program's host calls, bound for one run: each hook an ordered call run in the calling process
  # in program order (the tensors it carries put back into the hook's container and given to the
  # callback bound by `hooks:` or the expression's); each runtime call a blocking call, run in the
  # calling process too, whose answer the program goes on with. In a program with a runtime call, a
  # hook's callback runs on the host as a runtime call's function does (on_host/3): the program may
  # be waiting for a later runtime call's answer, which this process gives only after the hook.
  defp host_callbacks(hooks, bound, place) do
    waits = Enum.any?(hooks, &(elem(&1, 0) == :runtime_call))

    Enum.reduce(hooks, {%{}, %{}}, fn
      {:hook, target, name, default, template}, {ordered, blocking} ->
        callback = Map.get(bound, name) || default

        fun = fn %Plugboard.OrderedCall{operands: operands} ->
          # Traced: an `io_call` span (category callback) for the time in the callback.
          Trace.span("io_call", "callback", %{target: target, name: inspect(name)}, fn ->
            cond do
              callback == nil -> :ok
              waits -> guarded(fn -> on_host(place, target, fn -> callback.(from_host(template, operands)) end) end)
              true -> guarded(fn -> callback.(from_host(template, operands)) end)
            end
          end)

          :ok
        end

        {Map.put(ordered, target, fun), blocking}

      {:runtime_call, target, fun, opts, in_template, out_template}, {ordered, blocking} ->
        {ordered, Map.put(blocking, target, &runtime_call(&1, fun, opts, in_template, out_template, {target, place}))}
    end)
  end

  # A run with host calls. A side effect's callback that raises (or throws, or exits) fails the call
  # as it fails under Nx.Defn.Evaluator: the caller gets that very exception, with its stacktrace,
  # once the execution is over, and the side effects after it in the program are not called (the
  # program itself runs to its end: it cannot be stopped halfway). The first failure is kept for the
  # run in the calling process (where the callbacks run); a run made inside a callback keeps its own.
  # Plugboard.Execution.run/3 itself, not Plugboard.run/3's delegate: one call less on every jit.
  defp run(exe, buffers, []), do: Plugboard.Execution.run(exe, buffers, [])

  defp run(exe, buffers, run_opts) do
    outer = Process.put(@side_effect_failure, :none)

    try do
      result = Plugboard.Execution.run(exe, buffers, run_opts)

      case Process.get(@side_effect_failure) do
        {kind, reason, stacktrace} -> :erlang.raise(kind, reason, stacktrace)
        :none -> result
      end
    after
      if outer == nil, do: Process.delete(@side_effect_failure), else: Process.put(@side_effect_failure, outer)
    end
  end

  # One run giving up the arguments at run positions `donate`: {outputs, the positions given up}. An
  # argument another process is using at that moment (reading it, or an execution of it still
  # starting) cannot be given up: plugboard refuses the run before it starts (:aborted, "in use"), and
  # it runs again with nothing donated, each argument passed as is, as a view is (Plugboard.Nx.Donation).
  # An error about an argument names the caller's argument (`name_of.(run position)`), not the
  # program's parameter.
  defp run!(exe, buffers, donate, run_opts, name_of) do
    case run(exe, buffers, with_donate(donate, run_opts)) do
      {:ok, outputs} ->
        {outputs, donate}

      {:error, %Plugboard.Error{code: :aborted, message: message} = error} ->
        if donate != [] and message =~ "in use", do: run!(exe, buffers, [], run_opts, name_of), else: raise(caller_named(error, name_of))

      {:error, error} ->
        raise caller_named(error, name_of)
    end
  end

  # plugboard's errors about an argument begin "argument N" (its run position).
  defp caller_named(%Plugboard.Error{message: message} = error, name_of) do
    with [prefix, n] <- Regex.run(~r/^argument (\d+)\b/, message),
         name when is_binary(name) <- name_of.(String.to_integer(n)) do
      %{error | message: name <> binary_part(message, byte_size(prefix), byte_size(message) - byte_size(prefix))}
    else
      _ -> error
    end
  end

  # The caller's name for run position `pos` (a parameter the program reads); nil for a constant.
  defp argument_name(vars, used, pos) do
    case Enum.at(used, pos) do
      nil -> nil
      i -> Arguments.name(vars, i)
    end
  end

  # One side effect's callback, unless one of this run failed before it.
  defp guarded(call) do
    if Process.get(@side_effect_failure, :none) == :none do
      try do
        call.()
      catch
        kind, reason -> Process.put(@side_effect_failure, {kind, reason, __STACKTRACE__})
      end
    end
  end

  defp runtime_call(operands, fun, opts, in_template, out_template, {target, place}) do
    # Traced: a `runtime_call` span (category callback) for the time in the function.
    result = Trace.span("runtime_call", "callback", %{target: target}, fn -> on_host(place, target, fn -> fun.(from_host(in_template, operands), opts) end) end)

    unless Nx.compatible?(out_template, result) do
      raise ArgumentError,
            "expected the runtime_call function to match the given output template #{inspect(out_template)}, got: #{inspect(result)}"
    end

    [result] |> Composite.flatten_list() |> Enum.map(&(&1 |> Nx.devectorize(keep_names: false) |> Nx.to_binary()))
  end

  # A runtime call's function runs while its execution waits on the device for the answer. Its
  # tensors are Nx.BinaryBackend tensors and Nx.BinaryBackend is its default backend, so eager work
  # there stays on the host (as EXLA's host tensors do). Device work on the same device of the same
  # client is refused at once (refuse_inside_runtime_call/2): XLA's CPU client runs a device's
  # asynchronous executions in order, so a new one would queue behind the execution that waits for
  # this very function; another device has its own queue. The NIF refuses a run from inside a
  # blocking call the same way, but it knows only of blocking calls: a hook (an ordered call) of a
  # program that will wait for a runtime call is marked here only.
  defp on_host({client, device}, target, fun) do
    previous = Process.put(@inside_runtime_call, {Plugboard.client_id(client), device, target})

    try do
      Nx.with_default_backend(Nx.BinaryBackend, fun)
    after
      if previous, do: Process.put(@inside_runtime_call, previous), else: Process.delete(@inside_runtime_call)
    end
  end

  # Before a run of Plugboard.Nx (jit, and shard_jit over its `devices`) on `client`.
  @doc false
  def refuse_inside_runtime_call(client, devices) do
    with {id, device, target} <- Process.get(@inside_runtime_call),
         true <- id == Plugboard.client_id(client) and device in devices do
      raise Plugboard.Error,
        code: :failed_precondition,
        message:
          "Plugboard.Nx: device work on device #{device} of client #{client.target} inside a host callback (#{target}) of a " <>
            "program running on that device: the program waits on the device for the function's answer and the device " <>
            "would run this work only after it, so it would wait for itself. The function gets Nx.BinaryBackend tensors " <>
            "(its default backend too): compute on the host there, or on another device or client"
    else
      _ -> :ok
    end
  end

  defp from_host(template, operands) do
    {value, []} = Composite.traverse(template, operands, fn t, [host | rest] -> {Backend.from_host(t, host), rest} end)
    value
  end

  # The result's tensors, devectorized for the program, and the templates (vectorized as the result
  # is) that the outputs are put back into.
  @doc false
  def devectorized_output(expr) do
    {expr, output} = Composite.traverse(expr, [], &{Nx.devectorize(&1), [&1 | &2]})
    {expr, output |> Enum.reverse() |> then(&rebuild(expr, &1))}
  end

  defp rebuild(expr, templates) do
    # A result is never donatable, not even a donated argument returned as is (Nx.donatable/1).
    {container, []} = Composite.traverse(expr, templates, fn _, [t | rest] -> {t |> Nx.to_template() |> Donation.unmark(), rest} end)
    container
  end

  @doc false
  def name_of(key) when is_function(key) do
    info = Function.info(key)
    "#{inspect(info[:module])}.#{info[:name]}"
  end

  def name_of(_), do: "defn"

  @doc """
  Makes `client` the one compilations and the backend use when no `client:`/`target:` is given
  (instead of the client the `:plugboard` application booted).
  """
  def put_default_client(%Plugboard.Client{} = client), do: :persistent_term.put({__MODULE__, :default}, client)

  @doc false
  # The client `opts` name: `client:` (a %Plugboard.Client{} or the name of one configured under
  # `config :plugboard_nx, :clients`), `target:`, `config :plugboard_nx, :default_client`, the default
  # client put by put_default_client/1, or the one the :plugboard application booted.
  def client!(opts) do
    cond do
      match?(%Plugboard.Client{}, opts[:client]) ->
        opts[:client]

      name = opts[:client] ->
        named_client!(name)

      target = opts[:target] ->
        started({:target, target}, fn -> boot_target(target) end)

      client = :persistent_term.get({__MODULE__, :default}, nil) ->
        client

      name = Application.get_env(:plugboard_nx, :default_client) ->
        named_client!(name)

      true ->
        Plugboard.client!()
    end
  end

  # A client started once per VM, whoever asks first (the others wait for it).
  defp started(key, start) do
    case :persistent_term.get({__MODULE__, key}, nil) do
      nil ->
        :global.trans({{__MODULE__, key}, self()}, fn ->
          case :persistent_term.get({__MODULE__, key}, nil) do
            nil ->
              client = start.()
              :persistent_term.put({__MODULE__, key}, client)
              client

            client ->
              client
          end
        end, [node()])

      client ->
        client
    end
  end

  defp boot_target(target) do
    opts = Plugboard.Application.boot_options(Application.get_all_env(:plugboard))
    # The release's bundle and settings, with this target in place of the configured policy.
    opts = Keyword.drop(opts, [:target, :targets, :policy_source])

    case Plugboard.boot([{:target, to_string(target)} | opts]) do
      {:ok, client, _report} -> client
      {:error, error, _report} -> raise ArgumentError, "Plugboard.Nx: target #{target} cannot start: #{Exception.message(error)}"
    end
  end

  # `config :plugboard_nx, :clients, name: [target: "cuda13"]` (a target of the booted bundle, with
  # the bundle's create options) or `name: [plugin: "/path/plugin.so", create_options: [{"k", v}]]`.
  defp named_client!(name) when is_atom(name) do
    config = Application.get_env(:plugboard_nx, :clients, [])

    case Keyword.fetch(config, name) do
      {:ok, client_opts} ->
        started({:client, name}, fn -> start_named(name, client_opts) end)

      :error ->
        raise ArgumentError,
              "Plugboard.Nx: no client named #{inspect(name)} in config :plugboard_nx, :clients (configured: #{inspect(Keyword.keys(config))})"
    end
  end

  defp named_client!(other),
    do: raise(ArgumentError, "Plugboard.Nx: client: expects a %Plugboard.Client{} or a configured name (an atom), got #{inspect(other)}")

  defp start_named(name, client_opts) do
    {known, unknown} = Keyword.split(client_opts, [:target, :plugin, :create_options])
    bad = fn message -> raise ArgumentError, "Plugboard.Nx: client #{inspect(name)}: #{message} (config :plugboard_nx, :clients)" end

    cond do
      unknown != [] -> bad.("unknown option(s) #{inspect(Keyword.keys(unknown))}; known: :target, :plugin, :create_options")
      known[:target] && known[:plugin] -> bad.("give target: or plugin:, not both")
      known[:target] && known[:create_options] -> bad.("create_options: go with plugin:; a target takes its bundle's")
      known[:target] -> boot_target(known[:target])
      is_binary(known[:plugin]) -> open_plugin(name, known[:plugin], Keyword.get(known, :create_options, []))
      true -> bad.("needs target: or plugin:, got #{inspect(client_opts)}")
    end
  end

  defp open_plugin(name, plugin, create_options) do
    case Plugboard.open(plugin, create_options) do
      {:ok, client} -> client
      {:error, error} -> raise ArgumentError, "Plugboard.Nx: client #{inspect(name)} (#{plugin}) cannot start: #{Exception.message(error)}"
    end
  end
end
