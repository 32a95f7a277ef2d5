defmodule Plugboard.ClusterTest do
  # The cluster pieces of :plugboard that need no second node (the connector joining and rejoining
  # real nodes, and the report across them, are tests/elixir_cluster_test.sh): the connector's
  # configuration refused with the key named, no connector without peers, this node's report and the
  # cluster's report on a node that is not distributed.
  use ExUnit.Case, async: true
  alias Plugboard.Cluster
  alias Plugboard.Cluster.Connector

  test "the connector's configuration" do
    assert Connector.child(nil) == nil
    assert Connector.child(peers: []) == nil
    assert {Connector, peers: [:"a@127.0.0.1", :"b@h"], reconnect_ms: 2_000} = Connector.child(peers: ["a@127.0.0.1", :"b@h", " a@127.0.0.1 "])
    assert {Connector, peers: [:"a@h"], reconnect_ms: 50} = Connector.child(peers: [:"a@h"], reconnect_ms: 50)
    assert_raise ArgumentError, ~r/peer "nohost" is not name@host/, fn -> Connector.child(peers: ["nohost"]) end
    assert_raise ArgumentError, ~r/peer 42 is not name@host/, fn -> Connector.child(peers: [42]) end
    assert_raise ArgumentError, ~r/reconnect_ms must be a positive integer, got 0/, fn -> Connector.child(peers: ["a@h"], reconnect_ms: 0) end
    assert_raise ArgumentError, ~r/cluster: expected a keyword list, got "a@h"/, fn -> Connector.child("a@h") end
  end

  test "the connector does not start on a node that is not distributed" do
    refute Node.alive?()
    assert :ignore = Connector.init(peers: [:"a@h"], reconnect_ms: 10)
  end

  test "this node's report, and the cluster's from it" do
    report = Cluster.node_report()
    assert report.node == node()
    assert is_list(report.servings)
    # The test suite boots no target through the application: the report says why.
    assert report.target == nil and report.devices == 0 and report.error =~ "has not booted a target"
    assert [%{node: n, target: nil, servings: []}] = Plugboard.cluster_report()
    assert n == node()
    assert Process.whereis(Cluster.scope()) != nil
  end
end
