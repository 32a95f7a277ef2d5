Code.require_file("../../trace_checks.exs", __DIR__)

defmodule Plugboard.Nx.TraceJitTest do
  # Traces of Plugboard.Nx, loaded and checked: an MLP's SGD step jitted twice (a compile, then a
  # cache hit) gives a `jit` span per call with `cache_lookup`, `compile` (on the miss, `emit` in
  # it), `arguments` (what was copied to the device, in bytes) and `run` inside it in that order, the
  # library's own compile and execution spans inside them, every span closed, each track nested, all
  # within the time the test measured; a program with io_call/hook and Nx.runtime_call callbacks gives
  # their spans (the plugin thread's wait, the function's time in Elixir) inside its `run`.
  # PLUGBOARD_TRACE_OUT=dir keeps the traces (training_step.trace.json, io_call_runtime_call.trace.json).
  use ExUnit.Case, async: false
  import Plugboard.Nx.Case
  import Plugboard.TraceChecks
  alias Plugboard.Trace

  defmodule MLP do
    @moduledoc false
    import Nx.Defn

    defn loss({w1, b1, w2, b2}, x, y) do
      h = Nx.max(Nx.dot(x, w1) + b1, 0)
      out = Nx.dot(h, w2) + b2
      Nx.mean((out - y) ** 2)
    end

    # One step of SGD: the loss and the parameters moved against its gradient.
    defn step(params, x, y) do
      {loss, {g1, gb1, g2, gb2}} = value_and_grad(params, &loss(&1, x, y))
      {w1, b1, w2, b2} = params
      {{w1 - 0.01 * g1, b1 - 0.01 * gb1, w2 - 0.01 * g2, b2 - 0.01 * gb2}, loss}
    end
  end

  {label, path} = hd(cpu_plugins())
  @label label
  @path path

  setup do
    on_exit(fn -> if Trace.enabled?(), do: Trace.stop() end)
    %{client: client(@path)}
  end

  defp host(shape, scale), do: shape |> Nx.iota(type: :f32, backend: Nx.BinaryBackend) |> Nx.multiply(scale) |> Nx.sin()

  test "#{@label}: an MLP's SGD step, compiled then cached: jit, cache_lookup, compile, arguments, run", %{client: client} do
    # A fresh cache: the first call compiles (a shape no other test uses would do as well).
    Plugboard.Nx.Cache.clear()
    params = {host({8, 16}, 0.3), host({16}, 0.1), host({16, 1}, 0.7), host({1}, 0.2)}
    {x, y} = {host({32, 8}, 0.05), host({32, 1}, 0.11)}
    step = Nx.Defn.jit(&MLP.step/3, compiler: Plugboard.Nx, client: client)
    host_bytes = [params, x, y] |> Nx.Defn.Composite.flatten_list() |> Enum.map(&Nx.byte_size/1) |> Enum.sum()

    :ok = Trace.start()
    t0 = Trace.now()
    {params1, loss1} = step.(params, x, y)
    {_params2, loss2} = step.(params1, x, y)
    t1 = Trace.now()
    {:ok, trace} = Trace.stop()
    save(trace, "training_step")

    # It trained: the loss went down.
    assert Nx.to_number(loss2) < Nx.to_number(loss1)
    well_formed!(trace)
    track = "elixir " <> inspect(self())
    stack!(trace, track)
    assert [miss, hit] = named(trace, "jit", track)
    for jit <- [miss, hit], do: assert(jit.start_ns >= t0 and jit.end_ns <= t1, "#{describe(jit)} outside [#{t0}, #{t1}]")
    assert miss.end_ns <= hit.start_ns
    assert miss.args["function"] =~ "MLP.step"

    # The compile happens in the first call's cache miss; the second call hits.
    assert Enum.map(children(trace, miss), & &1.name) == ["cache_lookup", "compile", "arguments", "run"]
    assert Enum.map(children(trace, hit), & &1.name) == ["cache_lookup", "arguments", "run"]
    [lookup_miss, compile, arguments_miss, run_miss] = children(trace, miss)
    [lookup_hit, arguments_hit, run_hit] = children(trace, hit)
    assert lookup_miss.args["outcome"] == "miss" and lookup_hit.args["outcome"] == "hit"
    assert Enum.map(children(trace, compile), & &1.name) == ["emit"]

    # Arguments: every one copied from the host the first time; the second time the parameters are
    # the first call's results, already on the device, and only x and y are copied.
    assert %{"buffers" => 6, "copied" => 6, "bytes" => ^host_bytes} = arguments_miss.args
    assert %{"buffers" => 6, "copied" => 2, "bytes" => xy} = arguments_hit.args
    assert xy == Nx.byte_size(x) + Nx.byte_size(y)

    # The library's own spans inside the Elixir ones (on the threads that ran them): the plugin's
    # compile inside the compile, each run's launch (and its device-track execution's start) inside
    # its run, copies to the device inside the arguments.
    assert [lib_compile] = Enum.filter(named(trace, "compile"), &(&1.category == "compile"))
    assert inside?(lib_compile, compile)

    for {run, arguments} <- [{run_miss, arguments_miss}, {run_hit, arguments_hit}] do
      assert [_launch] = Enum.filter(named(trace, "launch"), &inside?(&1, run)), "no launch inside #{describe(run)}"
      device = Enum.filter(named(trace, "execute"), &(&1.category == "device" and &1.start_ns >= run.start_ns and &1.start_ns <= run.end_ns))
      assert [_] = device, "no device execution starting inside #{describe(run)}"
      copies = Enum.filter(named(trace, "copy_to_device"), &(&1.category == "transfer" and inside?(&1, arguments)))
      assert length(copies) == arguments.args["copied"]
    end
  end

  test "#{@label}: a function compiled ahead (Nx.Defn.compile) records arguments and run per call while tracing is on", %{client: client} do
    params = {host({8, 16}, 0.3), host({16}, 0.1), host({16, 1}, 0.7), host({1}, 0.2)}
    {x, y} = {host({32, 8}, 0.05), host({32, 1}, 0.11)}
    templates = Enum.map([params, x, y], &Nx.Defn.Composite.traverse(&1, fn t -> Nx.to_template(t) end))
    loss = Nx.Defn.compile(&MLP.loss/3, templates, compiler: Plugboard.Nx, client: client)
    untraced = loss.(params, x, y)

    :ok = Trace.start()
    traced = loss.(params, x, y)
    {:ok, trace} = Trace.stop()
    assert Nx.to_number(traced) == Nx.to_number(untraced)
    well_formed!(trace)
    track = "elixir " <> inspect(self())
    assert named(trace, "jit", track) == [] and named(trace, "cache_lookup", track) == []
    assert [arguments] = named(trace, "arguments", track)
    assert [run] = trace |> named("run", track) |> Enum.filter(&(&1.category == "nx"))
    assert arguments.end_ns <= run.start_ns
    assert %{"copied" => 6} = arguments.args
  end

  test "#{@label}: io_call/hook and runtime_call callbacks inside the run", %{client: client} do
    Plugboard.Nx.Cache.clear()
    :ok = Trace.start()
    t0 = Trace.now()
    result = Nx.Defn.jit_apply(&Plugboard.Nx.RuntimeCallFixtures.ordered/1, [Nx.tensor(10)], compiler: Plugboard.Nx, client: client)
    t1 = Trace.now()
    {:ok, trace} = Trace.stop()
    save(trace, "io_call_runtime_call")
    assert {:messages, [{:first, 11}, {:runtime_call, 12}, {:last, 13}]} = Process.info(self(), :messages)
    assert {_, _, last} = result
    assert Nx.to_number(last) == 13

    well_formed!(trace)
    track = "elixir " <> inspect(self())
    stack!(trace, track)
    assert [jit] = named(trace, "jit", track)
    assert jit.start_ns >= t0 and jit.end_ns <= t1
    assert [run] = trace |> named("run", track) |> Enum.filter(&(&1.category == "nx"))
    assert [_] = Enum.filter(children(trace, jit), &(&1 == run))

    # In Elixir, on this process's track inside the run: the two hooks' functions and the runtime
    # call's between them, in program order.
    callbacks = trace.spans |> Enum.filter(&(&1.category == "callback" and track(trace, &1) == track)) |> Enum.sort_by(& &1.start_ns)
    assert Enum.map(callbacks, &{&1.name, &1.args["name"]}) == [{"io_call", ":first"}, {"runtime_call", nil}, {"io_call", ":last"}]
    assert Enum.all?(callbacks, &inside?(&1, run))
    # On the plugin's thread: the wait for the runtime call's answer, inside the run, around the
    # function's time in Elixir.
    assert [wait] = named(trace, "blocking_callback")
    assert inside?(wait, run)
    assert inside?(Enum.at(callbacks, 1), wait)
    # The ordered calls, queued on the plugin's thread during the run.
    queued = named(trace, "ordered_callback_queued")
    assert length(queued) == 2 and Enum.all?(queued, &inside?(&1, run))
  end
end
