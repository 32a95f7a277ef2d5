# Real OS nodes on 127.0.0.1 for the tests of traces across a cluster (plugboard's
# test/trace_cluster_test.exs, plugboard_nx's test/trace_cluster_test.exs): :peer starts `erl`
# processes with this VM's code paths and the application under test, distributed among themselves
# on 127.0.0.1 only; the test VM drives them over their standard I/O and stays out of their cluster.
defmodule Plugboard.TracePeers do
  @moduledoc false
  import ExUnit.Callbacks, only: [on_exit: 1]

  @doc """
  Starts one node per tag with `app` started, connects the first to the others and stops them all
  (and an epmd this call started) when the test module is done. Call it from `setup_all`.
  Returns [{peer_pid, node}], in the order of the tags.
  """
  def start!(tags, app) do
    cookie = Base.encode32(:crypto.strong_rand_bytes(20), padding: false)
    epmd_ran = match?({_, 0}, System.cmd("epmd", ["-names"], stderr_to_stdout: true))
    peers = Enum.map(tags, &start_peer(&1, cookie, app))

    on_exit(fn ->
      for {pid, _} <- peers, Process.alive?(pid), do: :peer.stop(pid)
      unless epmd_ran, do: System.cmd("epmd", ["-kill"], stderr_to_stdout: true)
    end)

    [first | others] = peers
    for {_, node} <- others, do: true = on(first, Node, :connect, [node])
    peers
  end

  @doc "Calls m.f(a) on the peer (60 s at most)."
  def on({pid, _node}, m, f, a), do: :peer.call(pid, m, f, a, 60_000)

  defp start_peer(tag, cookie, app) do
    name = ~c"trace_#{tag}_#{System.unique_integer([:positive])}"
    paths = Enum.flat_map(:code.get_path(), &[~c"-pa", &1])
    args = [~c"-setcookie", String.to_charlist(cookie), ~c"-kernel", ~c"inet_dist_use_interface", ~c"{127,0,0,1}" | paths]
    {:ok, pid, node} = :peer.start(%{name: name, host: ~c"127.0.0.1", longnames: true, connection: :standard_io, args: args,
                                     env: [{~c"ERL_EPMD_ADDRESS", ~c"127.0.0.1"}]})
    {:ok, _} = :peer.call(pid, Application, :ensure_all_started, [app], 60_000)
    {pid, node}
  end
end
