defmodule Plugboard.Cluster.DirectoryTest do
  # The directory's protocol on one node (Plugboard.Serving speaks it across real nodes in
  # plugboard_nx's tests and tests/elixir_cluster_test.sh): members joined and listed, :info asked
  # and checked, loads published to routers and read back, and this node's report built from it.
  # Not async: the members it joins would show in the reports that the other tests expect empty.
  use ExUnit.Case, async: false
  alias Plugboard.Cluster.Directory

  doctest Directory

  # A member that answers :info with `answer` (or never, for :silent) until told to stop.
  defp member(name, answer) do
    test = self()

    pid =
      spawn_link(fn ->
        :ok = Directory.join_member(name)
        send(test, {:joined, self()})
        serve(answer)
      end)

    assert_receive {:joined, ^pid}
    on_exit(fn -> Process.exit(pid, :kill) end)
    pid
  end

  defp serve(answer) do
    receive do
      {:"$gen_call", from, :info} when answer != :silent -> GenServer.reply(from, answer)
      _ -> :ok
    end

    serve(answer)
  end

  test "members of a name, and only of that name" do
    a = member(:dir_a, %{weight: 1, load: 0, idempotent: false})
    b = member(:dir_b, %{weight: 1, load: 0, idempotent: false})
    assert Directory.members(:dir_a) == [a]
    assert Directory.member?(:dir_a, a) and not Directory.member?(:dir_a, b)
    assert a in Directory.local_members() and b in Directory.local_members()
    assert Directory.members(:dir_none) == []
  end

  test "asking for :info: an answer, a malformed one, none" do
    good = member(:dir_info, %{weight: 4, load: 2, idempotent: true, target: "cpu"})
    assert {:ok, %{weight: 4, load: 2, target: "cpu"}} = Directory.ask_info(good, 500)

    for bad <- [%{weight: 0, load: 0, idempotent: true}, %{weight: 1, load: -1, idempotent: true},
                %{weight: 1, load: 0, idempotent: "yes"}, %{}, :nonsense] do
      pid = member(:dir_info_bad, bad)
      assert {:error, why} = Directory.ask_info(pid, 500)
      assert why =~ "malformed :info"
    end

    silent = member(:dir_info_silent, :silent)
    started = System.monotonic_time(:millisecond)
    assert {:silent, why} = Directory.ask_info(silent, 100)
    assert why =~ "no :info answer"
    assert System.monotonic_time(:millisecond) - started < 1_000
  end

  test "a published load reaches every router, and a router reads it back" do
    :ok = Directory.join_router()
    test = self()

    publisher =
      spawn_link(fn ->
        :ok = Directory.publish_load(:dir_load, 3)
        send(test, :published)
      end)

    assert_receive :published
    assert_receive message
    assert Directory.load_update(message) == {:ok, :dir_load, publisher, 3}
    assert Directory.load_update({:plugboard_serving_load, :dir_load, node(), publisher, :lots}) == :error
    assert Directory.load_update(:other) == :error
    assert_raise FunctionClauseError, fn -> Directory.publish_load(:dir_load, -1) end
  end

  test "this node's report lists the members that answer, and only those" do
    member(:dir_report, %{weight: 2, load: 1, idempotent: true, name: :dir_report})
    member(:dir_report_bad, %{weight: "heavy"})
    member(:dir_report_silent, :silent)
    started = System.monotonic_time(:millisecond)
    report = Plugboard.Cluster.node_report()
    assert System.monotonic_time(:millisecond) - started < 2_000
    assert [%{name: :dir_report, weight: 2, load: 1}] = report.servings
  end
end
