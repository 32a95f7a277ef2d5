import Config

# Read when a release boots, from the environment a deploy sets. The node's own name and cookie are
# the release's: RELEASE_DISTRIBUTION=name RELEASE_NODE=compute@10.0.0.2 RELEASE_COOKIE=... (see the
# sample's README; docs/cluster.md).

# The peers this node connects to (and reconnects to after a partition): Plugboard.Cluster.Connector.
if peers = System.get_env("CLUSTER_PEERS") do
  config :plugboard,
    cluster: [peers: String.split(peers, ",", trim: true), reconnect_ms: String.to_integer(System.get_env("CLUSTER_RECONNECT_MS", "2000"))]
end

# The compute node's serving (Compute.Model): its weight (default devices × kind) and, for the
# routing benchmark only, a delay added to every batch (a slower machine, simulated).
if weight = System.get_env("COMPUTE_SERVING_WEIGHT"), do: config(:compute, serving_weight: String.to_integer(weight))
if delay = System.get_env("COMPUTE_SERVING_DELAY_MS"), do: config(:compute, serving_delay_ms: String.to_integer(delay))
