defmodule Plugboard.Serving.Load do
  @moduledoc """
  Drives a serving with many concurrent requests and measures them: the load generator of the cluster
  test and benchmark (`tests/elixir_cluster_test.sh`), usable against any call.

      Plugboard.Serving.Load.run(fn input -> Plugboard.Serving.run(MyModel, input) end, inputs, concurrency: 32)

  `call` is a function of one input or `{module, function, args}` (called with the input appended;
  the form to use across nodes). It returns `{:ok, output}`, `{:ok, output, info}` or anything else
  (an error). `at: {n, fun}` calls `fun.()` once, from its own process, when the `n`-th request has
  been sent (to kill or disconnect a node halfway). `transfer: true` moves each output to
  `Nx.BinaryBackend` inside the timed call (what a remote caller's answer costs; for calls made on the
  serving's own node whose results are sent elsewhere). `rate: n` sends the requests open-loop, n per
  second whatever the answers (instead of `concurrency:` outstanding at a time): how users' requests
  arrive, so a node that cannot keep up queues them. Returns
  `%{requests, ok, errors, wall_ms, rps, p50_ms, p99_ms, max_ms, results}` — `results` in input order,
  each `{:ok, output, info_or_nil, latency_us}` or `{:error, term, latency_us}`.
  """

  @spec run((term() -> term()) | mfa(), [term()], keyword()) :: map()
  def run(call, inputs, opts \\ []) do
    concurrency = Keyword.get(opts, :concurrency, 32)
    timeout = Keyword.get(opts, :timeout, 120_000)
    {at, action} = Keyword.get(opts, :at, {nil, nil})
    call = to_fun(call, Keyword.get(opts, :transfer, false))
    t0 = System.monotonic_time()

    sent =
      inputs
      |> Stream.with_index(1)
      |> Stream.map(fn {input, i} ->
        if i == at, do: spawn(action)
        input
      end)

    results =
      case Keyword.get(opts, :rate) do
        nil -> closed_loop(sent, call, concurrency, timeout)
        rate -> open_loop(sent, call, rate, timeout)
      end

    wall_us = System.convert_time_unit(System.monotonic_time() - t0, :native, :microsecond)
    latencies = results |> Enum.map(&elem(&1, tuple_size(&1) - 1)) |> Enum.sort()
    ok = Enum.count(results, &(elem(&1, 0) == :ok))

    %{requests: length(results), ok: ok, errors: length(results) - ok, wall_ms: wall_us / 1000,
      rps: length(results) / max(wall_us, 1) * 1_000_000, p50_ms: percentile(latencies, 0.50) / 1000,
      p99_ms: percentile(latencies, 0.99) / 1000, max_ms: List.last(latencies, 0) / 1000, results: results}
  end

  # `concurrency` requests outstanding at all times: a new one as soon as one is answered.
  defp closed_loop(inputs, call, concurrency, timeout) do
    inputs
    |> Task.async_stream(&timed(call, &1), max_concurrency: concurrency, ordered: true, timeout: timeout, on_timeout: :kill_task)
    |> Enum.map(fn
      {:ok, result} -> result
      {:exit, reason} -> {:error, {:exit, reason}, timeout * 1000}
    end)
  end

  # Request i sent at i / rate seconds, answered or not (arrivals that do not wait for the service, as
  # users' requests do not): a node that cannot keep up builds a queue, and its latency shows it.
  defp open_loop(inputs, call, rate, timeout) do
    start = System.monotonic_time(:microsecond)

    inputs
    |> Stream.with_index()
    |> Enum.map(fn {input, i} ->
      due = start + div(i * 1_000_000, rate)
      # Rounded up: never sent before it is due.
      wait_us = due - System.monotonic_time(:microsecond)
      if wait_us > 0, do: Process.sleep(div(wait_us + 999, 1000))
      Task.async(fn -> timed(call, input) end)
    end)
    |> Enum.map(fn task ->
      case Task.yield(task, timeout) || Task.shutdown(task, :brutal_kill) do
        {:ok, result} -> result
        _ -> {:error, {:exit, :timeout}, timeout * 1000}
      end
    end)
  end

  defp to_fun({m, f, a}, transfer), do: to_fun(fn input -> apply(m, f, a ++ [input]) end, transfer)
  defp to_fun(fun, false) when is_function(fun, 1), do: fun
  defp to_fun(fun, true) when is_function(fun, 1), do: fn input -> Nx.backend_transfer(fun.(input), Nx.BinaryBackend) end

  defp timed(call, input) do
    t = System.monotonic_time()

    outcome =
      try do
        call.(input)
      catch
        kind, reason -> {:error, {kind, reason}}
      end

    us = System.convert_time_unit(System.monotonic_time() - t, :native, :microsecond)

    case outcome do
      {:ok, output} -> {:ok, output, nil, us}
      {:ok, output, info} -> {:ok, output, info, us}
      %Nx.Tensor{} = output -> {:ok, output, nil, us}
      other -> {:error, other, us}
    end
  end

  @doc "The `q` quantile (nearest rank) of sorted `values`; 0 for none."
  @spec percentile([number()], float()) :: number()
  def percentile([], _q), do: 0
  def percentile(sorted, q), do: Enum.at(sorted, max(ceil(q * length(sorted)) - 1, 0))
end
