defmodule Plugboard.Cluster do
  @moduledoc """
  One release, one cluster: the nodes of a release (each booting the target its machine has) joined
  by Erlang distribution, and what each node booted, readable from any node.

  **Forming the cluster** (`Plugboard.Cluster.Connector`): with

      config :plugboard, cluster: [peers: [:"compute@10.0.0.2", :"compute@10.0.0.3"], reconnect_ms: 2_000]

  (usually in `config/runtime.exs`, from environment variables the deploy sets; the node's own name
  and cookie come from the release's `RELEASE_NODE` / `RELEASE_COOKIE`), the node connects to every
  peer at start and again every `reconnect_ms` while one is unreachable: a peer that starts later, or
  comes back after a partition, joins without anyone acting. Nothing but OTP is used. A team with
  libcluster lets its topology connect the nodes instead and leaves `peers:` out; everything below
  works the same on any connected cluster.

  **The directory** (`Plugboard.Cluster.Directory`): a `:pg` scope, started on every node with the
  `:plugboard` application, where a service of this node joins a group (`Plugboard.Serving` joins
  `{:serving, name}` and answers `:info`), and `:pg` keeps every node's view of the groups in step,
  dropping the members of a node that goes away. The protocol, what a member answers and how loads
  reach the routers, is that module's.

  **The report.** `node_report/0` describes this node: its target (or why it has none), the devices,
  the servings it runs (weight, load) and, when `:telemetry` is loaded, the counts of
  `Plugboard.Telemetry.Summary`. `report/0` gathers every connected node's, in parallel, each bounded
  by a timeout: a node that does not answer is listed with the reason (traced: a `cluster_report`
  span, category `cluster`, with the nodes asked; `Plugboard.Trace.Cluster` traces several nodes).
  """

  @scope __MODULE__

  @doc "The `:pg` scope of the cluster's directory."
  @spec scope() :: atom()
  def scope, do: @scope

  @doc false
  def child_spec(_), do: %{id: @scope, start: {:pg, :start_link, [@scope]}}

  @type node_report :: %{
          required(:node) => node(),
          required(:target) => String.t() | nil,
          required(:devices) => non_neg_integer(),
          required(:servings) => [map()],
          optional(atom()) => term()
        }

  @doc """
  This node: `node`, `target` (the booted target's name, or nil with `error` saying why), `platform`,
  `plugin`, `devices` (how many) and `device_kind`, `servings` (each local serving's `:info` map:
  name, weight, load, idempotent, ...; a member that does not answer within 500 ms, or answers with
  a malformed `:info`, `Plugboard.Cluster.Directory.validate_info/1`, is left out), `telemetry`
  (`Plugboard.Telemetry.Summary.snapshot/0` when that module is loaded).
  """
  @spec node_report() :: node_report()
  def node_report do
    base = %{node: node(), otp_release: to_string(:erlang.system_info(:otp_release))}

    target =
      case Plugboard.client() do
        {:ok, client} ->
          devices = Plugboard.devices(client) |> elem_ok([])
          report = Plugboard.report()

          %{target: report && report.chosen, platform: client.platform, plugin: client.plugin,
            devices: length(devices), device_kind: devices |> List.first(%{}) |> Map.get(:kind)}

        {:error, error} ->
          %{target: nil, devices: 0, error: Exception.message(error)}
      end

    base |> Map.merge(target) |> Map.put(:servings, local_servings()) |> Map.merge(telemetry())
  end

  @doc """
  Every connected node's `node_report/0` (this node first), gathered in parallel; a node that does
  not answer in `timeout` ms (default 2000) or has no `:plugboard` is `%{node: n, error: reason}`.
  """
  @spec report(timeout()) :: [node_report() | %{node: node(), error: String.t()}]
  def report(timeout \\ 2_000) do
    nodes = [node() | Enum.sort(Node.list())]
    # Traced (Plugboard.Trace): one `cluster_report` span around the parallel calls, with the nodes asked.
    answers = Plugboard.Trace.span("cluster_report", "cluster", %{nodes: Enum.join(nodes, " ")}, fn ->
      :erpc.multicall(nodes, __MODULE__, :node_report, [], timeout)
    end)

    answers
    |> Enum.zip(nodes)
    |> Enum.map(fn
      {{:ok, report}, _} -> report
      {{kind, reason}, n} -> %{node: n, error: "#{kind}: #{inspect(reason, limit: 5)}"}
    end)
  end

  # The :info of every serving member on this node, asked all at once (one that does not answer in
  # 500 ms, or answers with a malformed :info, is left out: the report stays within its bound).
  defp local_servings do
    Plugboard.Cluster.Directory.local_members()
    |> Task.async_stream(&Plugboard.Cluster.Directory.ask_info(&1, 500), timeout: 1_000, on_timeout: :kill_task)
    |> Enum.flat_map(fn
      {:ok, {:ok, info}} -> [info]
      _ -> []
    end)
  end

  defp telemetry do
    summary = Module.concat(Plugboard.Telemetry, Summary)
    if Code.ensure_loaded?(summary) and function_exported?(summary, :snapshot, 0),
      do: %{telemetry: apply(summary, :snapshot, [])},
      else: %{}
  end

  defp elem_ok({:ok, value}, _), do: value
  defp elem_ok(_, default), do: default
end
