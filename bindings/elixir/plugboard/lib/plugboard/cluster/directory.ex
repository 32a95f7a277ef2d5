defmodule Plugboard.Cluster.Directory do
  @moduledoc """
  The cluster's directory: who serves what, on which node, and how busy it is. The whole protocol is
  here; `Plugboard.Serving` (in `:plugboard_nx`) speaks it, and `Plugboard.Cluster.node_report/0`
  reads it. It is built on `:pg` (the scope `Plugboard.Cluster.scope/0`, started on every node by the
  `:plugboard` application), so every node's view of it follows the cluster: a node that goes away
  leaves it, with its members, without anyone acting.

  **Members.** A process that serves `name` on its node joins the group `{:serving, name}`
  (`join_member/2`) and answers `GenServer.call(pid, :info)` with a map about itself, an `t:info/0`:
  at least `weight` (a positive integer: its share of the requests; `Plugboard.Serving` gives the
  node's devices × 1 on CPU, × 8 on an accelerator, unless told otherwise),
  `load` (requests taken and not yet answered) and `idempotent` (whether a request lost with its node
  may be sent again). `members/1` lists a name's members cluster-wide; `ask_info/2` asks one without
  ever waiting past its timeout, and rejects a malformed answer with the reason.

  **Routers.** A process that chooses among members joins the routers' group (`join_router/1`) and
  is sent every member's load when it changes (`publish_load/2`), as a message `load_update/1` reads.

      iex> alias Plugboard.Cluster.Directory
      iex> member = spawn_link(fn -> receive do: (:stop -> :ok) end)
      iex> :ok = Directory.join_member(:doc_model, member)
      iex> Directory.members(:doc_model) == [member]
      true
      iex> Directory.validate_info(%{weight: 2, load: 0, idempotent: true})
      {:ok, %{weight: 2, load: 0, idempotent: true}}
      iex> {:error, why} = Directory.validate_info(%{weight: 0})
      iex> why =~ "weight: a positive integer"
      true
      iex> send(member, :stop)
      :stop
  """

  @routers :plugboard_serving_routers

  @typedoc """
  What a member answers to `:info`: `weight`, `load` and `idempotent` are required (`validate_info/1`);
  `Plugboard.Serving`'s members add `name`, `node`, `target`, `platform`, `devices` and `device_kind`.
  """
  @type info :: %{
          required(:weight) => pos_integer(),
          required(:load) => non_neg_integer(),
          required(:idempotent) => boolean(),
          optional(atom()) => term()
        }

  @doc "Makes `pid` (default: the caller) a member of `name`'s group, until it exits."
  @spec join_member(atom(), pid()) :: :ok
  def join_member(name, pid \\ self()), do: :pg.join(scope(), {:serving, name}, pid)

  @doc "The members of `name` on every connected node."
  @spec members(atom()) :: [pid()]
  def members(name), do: :pg.get_members(scope(), {:serving, name})

  @doc "Whether `pid` is a member of `name` now."
  @spec member?(atom(), pid()) :: boolean()
  def member?(name, pid), do: pid in members(name)

  @doc "The members of every name on this node (empty when the directory is not running)."
  @spec local_members() :: [pid()]
  def local_members do
    if Process.whereis(scope()),
      do: for({:serving, _} = group <- :pg.which_groups(scope()), pid <- :pg.get_local_members(scope(), group), do: pid),
      else: []
  end

  @doc """
  Asks member `pid` for its `t:info/0`, waiting at most `timeout` ms: `{:ok, info}`; `{:error, why}`
  for a malformed answer; `{:silent, why}` for none (timed out, or the member is gone).
  """
  @spec ask_info(pid(), timeout()) :: {:ok, info()} | {:error, String.t()} | {:silent, String.t()}
  def ask_info(pid, timeout) do
    validate_info(GenServer.call(pid, :info, timeout))
  catch
    :exit, reason -> {:silent, "no :info answer (#{inspect(reason, limit: 5)})"}
  end

  @doc "`{:ok, info}` when `info` is a member's `t:info/0`, else `{:error, why}`."
  @spec validate_info(term()) :: {:ok, info()} | {:error, String.t()}
  def validate_info(%{weight: w, load: l, idempotent: i} = info)
      when is_integer(w) and w > 0 and is_integer(l) and l >= 0 and is_boolean(i),
      do: {:ok, info}

  def validate_info(other),
    do: {:error, "malformed :info #{inspect(other, limit: 10, printable_limit: 100)} (expected a map with weight: a positive integer, " <>
                 "load: a non-negative integer, idempotent: a boolean)"}

  @doc "Makes `pid` (default: the caller) a router: it is sent every member's `publish_load/2`."
  @spec join_router(pid()) :: :ok
  def join_router(pid \\ self()), do: :pg.join(scope(), @routers, pid)

  @doc "Sends the calling member's `load` for `name` to every router in the cluster (one message each)."
  @spec publish_load(atom(), non_neg_integer()) :: :ok
  def publish_load(name, load) when is_integer(load) and load >= 0 do
    message = {:plugboard_serving_load, name, node(), self(), load}
    for router <- :pg.get_members(scope(), @routers), do: send(router, message)
    :ok
  end

  @doc """
  What a router received, read: `{:ok, name, member, load}` for a member's `publish_load/2`, `:error`
  for anything else (a malformed load included).
  """
  @spec load_update(term()) :: {:ok, atom(), pid(), non_neg_integer()} | :error
  def load_update({:plugboard_serving_load, name, _node, pid, load}) when is_pid(pid) and is_integer(load) and load >= 0,
    do: {:ok, name, pid, load}

  def load_update(_other), do: :error

  defp scope, do: Plugboard.Cluster.scope()
end
