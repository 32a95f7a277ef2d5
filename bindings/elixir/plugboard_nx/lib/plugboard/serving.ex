defmodule Plugboard.Serving do
  @moduledoc """
  An `Nx.Serving` per node of a cluster, weighted by the target the node booted, and a call that
  loses nothing when a node dies.

  ## On each compute node

      children = [
        {Plugboard.Serving, serving: Nx.Serving.new(&build/1, compiler: Plugboard.Nx), name: MyApp.Model,
         batch_size: 16, batch_timeout: 20, idempotent: true}
      ]

  starts the node's `Nx.Serving` named `MyApp.Model` on the booted target (`Plugboard.client/0`, or the
  client `client:` gives; a node that booted no target refuses to start it, so it never joins as a
  member; the serving's own `defn_options` should name the same client) with
    * `distribution_weight` = devices × kind weight (`"cpu"` 1, any accelerator 8; `weight:`
      overrides it, e.g. from `config/runtime.exs`), so `Nx.Serving.batched_run/2` from any node
      shares requests by it too;
    * `partitions: true` when the target has more than one device (each device runs batches);
    * replies to `Nx.Serving.batched_run/2` from other nodes on `Nx.BinaryBackend` (when the serving
      keeps Nx's default `distributed_postprocessing`: device tensors cannot cross the wire);
    * a `Plugboard.Serving.Member` in the cluster's directory that tells callers the node's target,
      devices, weight and whether the serving is idempotent, and publishes its load (requests in
      progress) as it changes.
    * with `template:` (an `Nx.template/2` of one entry, or a container of them), each request
      checked against it before it joins a batch: one of another shape or type fails alone, in its
      caller, naming the expected and the given shapes (`Nx.Serving` would merge it into a batch and
      fail every request of that batch). Without `template:` nothing is checked, as in `Nx.Serving`:
      requests of other shapes sent one after another are answered (`Plugboard.Serving.Template`).
  Other options (`batch_size`, `batch_timeout`, `partitions`, ...) go to `Nx.Serving`.

  ## From any node: `run/3`

  `run(name, input, opts)` sends `input` (an `Nx.Batch`, or what the serving's
  `client_preprocessing` takes; tensors on `Nx.BinaryBackend`, as any distributed `Nx.Serving` call
  needs) to one member and returns `{:ok, output}` (tensors in the output moved to
  `Nx.BinaryBackend` on the serving node), or `{:ok, output, info}` with `info: true`
  (`%{node, target, attempts, lost: [{node, reason}]}`: where the batch ran and what was retried).

  **Routing** (`routing:`): `:load` (default) chooses the member with the least expected wait (its
  smoothed round-trip time × (load + 1) / weight: `Plugboard.Serving.Router`); `:weighted` one at
  random by weight, as `Nx.Serving` does. With no member there (none yet, or every one lost this
  request), `run/3` waits up to `wait:` ms (default 5000) for one to join or come back.

  **What is retried.** A request lost with its node — the node killed, crashed, disconnected or
  partitioned away (`:noconnection`) — or not answered within `timeout:` (ms per attempt, default
  30 000, or `:infinity`) is sent to another node, at most `retries:` times (default 2), each time
  with the reason in the log (`warning`) and a `[:plugboard, :serving, :retry]` event, **only when
  the serving was declared `idempotent: true`** where it runs: the request may have run on the lost
  node (after a timeout it may still be running there: `Nx.Serving` cannot take a batch back, so the
  caller only stops waiting), and only an idempotent request may run twice. A serving that was not
  running on the chosen node (`:noproc`: the request never ran) is tried elsewhere up to 3 times,
  whatever the serving and apart from `retries:`. Not retried: errors the serving itself raises (bad
  input, a failed compile or run on the target) and any other exit of the request's process: they
  are the answer, `{:error, {:serving, node, message}}`.

  A node's death reaches only the requests on that node: each request watches only the process that
  runs it. A partition can reach further: OTP keeps the mesh fully connected
  (`prevent_overlapping_partitions`), so when one link drops, other nodes may drop their links to
  the cut-off node too, and their requests come back `:noconnection` (retried when idempotent, an
  error otherwise).

  Errors are values: `{:error, {:no_member, name}}` (no node serves `name`), `{:error, {:lost, [{node,
  reason}, ...]}}` (every attempt lost), `{:error, {:serving, node, message}}`, and for a bad option
  `{:error, %Plugboard.Error{code: :invalid_argument}}`.

  ## Telemetry
  `[:plugboard, :serving, :run, :start | :stop | :exception]` around `run/3` (metadata `name`,
  `routing`; on stop also `result` (`:ok | :error`) and, when answered, `node`, `target`, `attempts`,
  `lost`; when every attempt was lost, `lost`), `[:plugboard, :serving, :route]` for each choice
  (measurements `load`, `weight`; metadata `name`, `node`, `routing`), `[:plugboard, :serving,
  :retry]` (measurements `attempt`; metadata `name`, `node`, `reason`).

  ## Traces
  With `Plugboard.Trace` on: `serving_run` (category `serving`) around `run/3` on the caller, with
  each attempt's `route` (the member chosen: `node`, `target`, `load`, `weight`, `routing`,
  `attempt`) and `remote_call` (category `cluster`: `node`, `target` the serving's name) inside it;
  on the member's node, `serve` (`caller`: the caller's node, `target`) around the request there.
  `Plugboard.Trace.Cluster.start/2` and `stop/2` trace every node at once and merge their traces
  onto the caller's clock:

      nodes = [node() | Node.list()]
      :ok = Plugboard.Trace.Cluster.start(nodes)
      {:ok, _} = Plugboard.Serving.run(MyApp.Model, batch)
      {:ok, traces} = Plugboard.Trace.Cluster.stop(nodes)
      Plugboard.Trace.write(traces, "request.trace.json")
  """
  require Logger
  alias Plugboard.Serving.{Member, Router, Template}
  alias Plugboard.Trace
  alias Plugboard.Trace.Cluster

  # Why a request can be lost with its node (and tried elsewhere); any other exit of the request's
  # process is an error of that request.
  @lost_reasons [:noconnection, :noproc, :timeout]
  @serving_keys [:serving, :name, :idempotent, :weight, :publish_ms, :client, :template]
  @run_option_kinds %{routing: ":load or :weighted", retries: "a non-negative integer", timeout: "a positive integer (ms) or :infinity",
                      wait: "a non-negative integer (ms)", info: "a boolean"}

  @doc false
  def child_spec(opts) do
    %{id: {__MODULE__, Keyword.get(opts, :name)}, start: {__MODULE__, :start_link, [opts]}, type: :supervisor}
  end

  @doc "Starts the node's serving (see the module doc); `{:error, reason}` when no target is booted or an option is wrong."
  @spec start_link(keyword()) :: Supervisor.on_start()
  def start_link(opts) do
    with {:ok, name} <- fetch_name(opts),
         {:ok, %Nx.Serving{} = serving} <- fetch_serving(opts),
         {:ok, client} <- client(name, opts[:client]),
         {:ok, template} <- template(opts),
         {:ok, info} <- node_info(client, opts) do
      serving = serving |> portable_replies() |> Template.checked(name, template)

      nx_opts =
        opts
        |> Keyword.drop(@serving_keys)
        |> Keyword.put_new(:partitions, info.devices > 1)
        |> Keyword.merge(serving: serving, name: name, distribution_weight: info.weight)

      children = [{Nx.Serving, nx_opts}, {Member, name: name, info: info, publish_ms: Keyword.get(opts, :publish_ms, 5)}]
      Supervisor.start_link(children, strategy: :rest_for_one)
    end
  end

  defp fetch_name(opts) do
    case opts[:name] do
      name when is_atom(name) and name not in [nil, true, false] -> {:ok, name}
      other -> invalid("name: must be an atom (the serving's registered name), got #{inspect(other)}")
    end
  end

  defp template(opts) do
    case Template.validate(opts[:template]) do
      {:ok, template} -> {:ok, template}
      {:error, message} -> invalid(message)
    end
  end

  defp fetch_serving(opts) do
    case opts[:serving] do
      %Nx.Serving{} = serving -> {:ok, serving}
      other -> invalid("serving: must be an %Nx.Serving{}, got #{inspect(other, limit: 3)}")
    end
  end

  # The booted target's client, or the one `client:` gives (its plugin file names the target then).
  defp client(_name, %Plugboard.Client{} = client), do: {:ok, client}
  defp client(_name, other) when other != nil, do: invalid("client: must be a %Plugboard.Client{}, got #{inspect(other, limit: 3)}")

  defp client(name, nil) do
    case Plugboard.client() do
      {:ok, client} -> {:ok, client}
      {:error, error} ->
        {:error, Plugboard.Error.new(:failed_precondition,
                   "Plugboard.Serving #{inspect(name)} not started: no target booted on #{node()} (#{Exception.message(error)})")}
    end
  end

  @doc """
  The weight a node gets for `devices` devices of `kind` (the client's device kind): devices × 1 for
  `"cpu"`, devices × 8 for any accelerator.
  """
  @spec default_weight(non_neg_integer(), String.t() | nil) :: pos_integer()
  def default_weight(devices, kind), do: max(devices, 1) * if(kind in ["cpu", nil], do: 1, else: 8)

  defp node_info(client, opts) do
    with {:ok, devices} <- Plugboard.devices(client), do: node_info(client, devices, opts)
  end

  defp node_info(client, devices, opts) do
    kind = devices |> List.first(%{}) |> Map.get(:kind)

    # The booted target's name; for a client from Plugboard.open/2 (its target is the plugin's path),
    # the plugin file's name.
    target = Path.basename(client.target)

    weight =
      case opts[:weight] do
        nil -> {:ok, default_weight(length(devices), kind)}
        w when is_integer(w) and w > 0 -> {:ok, w}
        w -> invalid("weight: must be a positive integer, got #{inspect(w)}")
      end

    with {:ok, weight} <- weight do
      {:ok,
       %{target: target, platform: client.platform, plugin: client.plugin, devices: length(devices),
         device_kind: kind, weight: weight, idempotent: Keyword.get(opts, :idempotent, false) == true}}
    end
  end

  @doc "See the module doc. Options: `routing:`, `retries:`, `timeout:`, `wait:`, `info:`."
  @spec run(atom(), term(), keyword()) :: {:ok, term()} | {:ok, term(), map()} | {:error, term()}
  def run(name, input, opts \\ []) do
    with {:ok, name} <- fetch_name(name: name), {:ok, opts} <- run_options(opts) do
      Plugboard.Telemetry.span([:plugboard, :serving, :run], %{name: name, routing: opts.routing}, fn ->
        outcome = Trace.span("serving_run", "serving", %{name: inspect(name), routing: opts.routing}, fn -> attempt(name, input, opts, 1, []) end)

        meta =
          case outcome do
            {:ok, _, where} -> Map.merge(where, %{name: name, routing: opts.routing, result: :ok})
            {:error, {:lost, lost}} -> %{name: name, routing: opts.routing, result: :error, lost: lost}
            {:error, _} -> %{name: name, routing: opts.routing, result: :error}
          end

        {answer(outcome, opts.info), meta}
      end)
    end
  end

  @run_defaults %{routing: :load, retries: 2, timeout: 30_000, wait: 5_000, info: false}

  defp run_options(opts) do
    Enum.reduce_while(opts, {:ok, @run_defaults}, fn
      {:routing, r}, {:ok, acc} when r in [:load, :weighted] -> {:cont, {:ok, %{acc | routing: r}}}
      {:retries, n}, {:ok, acc} when is_integer(n) and n >= 0 -> {:cont, {:ok, %{acc | retries: n}}}
      {:timeout, t}, {:ok, acc} when (is_integer(t) and t > 0) or t == :infinity -> {:cont, {:ok, %{acc | timeout: t}}}
      {:wait, w}, {:ok, acc} when is_integer(w) and w >= 0 -> {:cont, {:ok, %{acc | wait: w}}}
      {:info, i}, {:ok, acc} when is_boolean(i) -> {:cont, {:ok, %{acc | info: i}}}
      {key, value}, _ when key in [:routing, :retries, :timeout, :wait, :info] ->
        {:halt, invalid("run/3: #{key}: #{inspect(value)} is not #{Map.fetch!(@run_option_kinds, key)}")}
      other, _ ->
        {:halt, invalid("run/3: unknown option #{inspect(other)} (known: routing, retries, timeout, wait, info)")}
    end)
  end

  defp invalid(message), do: {:error, Plugboard.Error.new(:invalid_argument, "Plugboard.Serving: " <> message)}

  @doc "Same as `run/3`, raising (an exit, as `Nx.Serving.batched_run/2` does) when no answer came."
  def run!(name, input, opts \\ []) do
    case run(name, input, Keyword.delete(opts, :info)) do
      {:ok, output} -> output
      {:error, reason} -> exit({reason, {__MODULE__, :run!, [name]}})
    end
  end

  defp answer({:ok, output, _where}, false), do: {:ok, output}
  defp answer(outcome, _), do: outcome

  defp attempt(name, input, opts, attempt, lost) do
    case route(name, opts, lost, attempt) do
      nil when lost == [] ->
        {:error, {:no_member, name}}

      nil ->
        attempt_failed(lost)

      member ->
        Plugboard.Telemetry.execute([:plugboard, :serving, :route], %{load: member.load, weight: member.weight},
                           %{name: name, node: member.node, routing: opts.routing})

        target = inspect(name)

        case Cluster.remote_call(member.node, target, %{attempt: attempt}, fn -> call(name, member, input, opts.timeout) end) do
          {:ok, output, where} ->
            {:ok, output, Map.merge(where, %{attempts: attempt, lost: nodes_lost(lost)})}

          {:error, message} ->
            {:error, {:serving, member.node, message}}

          {:lost, reason} when reason in @lost_reasons ->
            lost = [{member.pid, member.node, reason} | lost]

            if retry?(reason, member.info.idempotent, lost, opts.retries) do
              Logger.warning("plugboard: serving #{inspect(name)}: request lost on #{member.node} (#{inspect(reason)}); " <>
                               "sending it again (attempt #{attempt + 1})")
              Plugboard.Telemetry.execute([:plugboard, :serving, :retry], %{attempt: attempt + 1}, %{name: name, node: member.node, reason: reason})
              attempt(name, input, opts, attempt + 1, lost)
            else
              attempt_failed(lost)
            end

          {:lost, reason} ->
            {:error, {:serving, member.node, "the request's process on #{member.node} exited: #{inspect(reason)}"}}
        end
    end
  end

  # :noproc (the serving was not running there: the request never ran) up to 3 times, apart from the
  # budget; a node lost or a timeout only for an idempotent serving, up to `retries` times.
  defp retry?(:noproc, _idempotent, lost, _retries), do: Enum.count(lost, &(elem(&1, 2) == :noproc)) <= 3
  defp retry?(_reason, idempotent, lost, retries), do: idempotent and Enum.count(lost, &(elem(&1, 2) != :noproc)) <= retries

  defp attempt_failed(lost), do: {:error, {:lost, nodes_lost(lost)}}

  # [{node, reason}], oldest first.
  defp nodes_lost(lost), do: for({_pid, node, reason} <- Enum.reverse(lost), do: {node, reason})

  # choose/3, traced: a `route` span with the member chosen (its node, target, load, weight) or none.
  defp route(name, opts, lost, attempt) do
    traced = Trace.enabled?()
    started = if traced, do: Trace.now()
    member = choose(name, opts, for({pid, _, _} <- lost, do: pid))

    if traced do
      chosen =
        if member,
          do: %{node: Atom.to_string(member.node), target: to_string(member.info[:target]), load: member.load, weight: member.weight},
          else: %{node: "none"}

      Trace.record("route", "serving", started, Trace.now(), Map.merge(chosen, %{name: inspect(name), routing: opts.routing, attempt: attempt}))
    end

    member
  end

  # A member that has not failed this request. While there is none (a node restarting, the cluster
  # reconnecting after a partition), waits up to `wait:` ms for one; a member that failed this request,
  # left the directory and is back (reconnected) may be tried again.
  defp choose(name, opts, failed) do
    deadline = System.monotonic_time(:millisecond) + opts.wait
    choose(name, opts, failed, deadline)
  end

  defp choose(name, opts, failed, deadline) do
    members = Router.members(name)
    present = Enum.map(members, & &1.pid)

    case Enum.reject(members, &(&1.pid in failed)) do
      [] ->
        if System.monotonic_time(:millisecond) < deadline do
          Process.sleep(20)
          choose(name, opts, Enum.filter(failed, &(&1 in present)), deadline)
        end

      fresh ->
        Router.pick(fresh, opts.routing)
    end
  end

  # One request on one member's node: {:ok, output, where} | {:error, message} | {:lost, reason}.
  # After a timeout the caller stops waiting; the request's process on the member's node is left to
  # finish (Nx.Serving has no way to take a batch back), so its node's load stays right. The timeout
  # counts as a round trip of that length.
  defp call(name, member, input, timeout) do
    ref = make_ref()
    started = System.monotonic_time()
    request = Router.begin(name, member.pid)
    {pid, monitor} = Node.spawn_monitor(member.node, __MODULE__, :__remote_run__, [ref, name, input])
    elapsed = fn -> System.convert_time_unit(System.monotonic_time() - started, :native, :microsecond) end

    try do
      receive do
        {:DOWN, ^monitor, :process, ^pid, {^ref, result}} ->
          Router.observe(name, member.pid, elapsed.())
          result

        {:DOWN, ^monitor, :process, ^pid, reason} ->
          {:lost, reason}
      after
        timeout ->
          Process.demonitor(monitor, [:flush])
          Router.observe(name, member.pid, elapsed.())
          {:lost, :timeout}
      end
    after
      Router.finish(request)
    end
  end

  @doc false
  # The remote half, spawned on the member's node: runs the request on the local Nx.Serving and exits
  # with {ref, result}, counted in the node's published load until it has its answer (the member
  # watches it: killed while waiting, it is counted down all the same).
  def __remote_run__(ref, name, input) do
    # The caller made `ref`: its node is the caller's.
    exit(Cluster.serve(node(ref), inspect(name), fn -> remote_run(ref, name, input) end))
  end

  defp remote_run(ref, name, input) do
    {where, token} = Member.track(name) || exit(:noproc)

    result =
      try do
        {:ok, portable(Nx.Serving.batched_run({:local, name}, input)), where}
      catch
        :exit, {:noproc, _} -> exit(:noproc)
        kind, reason -> {:error, Exception.format_banner(kind, reason, __STACKTRACE__)}
      end

    Member.untrack(token)
    {ref, result}
  end

  # A serving left with Nx's default distributed_postprocessing (the identity) would send device
  # tensors to `Nx.Serving.batched_run/2` callers on other nodes, where they are unusable: it sends
  # them on Nx.BinaryBackend instead (run/3 does the same on its own path).
  defp portable_replies(%Nx.Serving{distributed_postprocessing: post} = serving) do
    if post == (&Function.identity/1), do: Nx.Serving.distributed_postprocessing(serving, &portable/1), else: serving
  end

  # Tensors leave the node on Nx.BinaryBackend (device buffers do not cross the wire).
  defp portable(%Nx.Tensor{} = t), do: Nx.backend_transfer(t, Nx.BinaryBackend)
  defp portable(tuple) when is_tuple(tuple), do: tuple |> Tuple.to_list() |> Enum.map(&portable/1) |> List.to_tuple()
  defp portable(list) when is_list(list), do: Enum.map(list, &portable/1)
  defp portable(%_{} = struct), do: struct
  defp portable(map) when is_map(map), do: Map.new(map, fn {k, v} -> {k, portable(v)} end)
  defp portable(other), do: other
end
