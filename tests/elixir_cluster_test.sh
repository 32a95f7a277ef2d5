#!/usr/bin/env bash
# One release, one cluster (issue 27), end to end with real OS processes on 127.0.0.1: the sample's
# `compute` release (built with an extra target, cpu115 = the 0.115 CPU plugin with
# cpu_device_count=2) booted twice — compute1 on `cpu` (the 0.81 plugin), compute2 on `cpu115` — and
# the `web` release, joined by Erlang distribution from config/runtime.exs (CLUSTER_PEERS); web sends
# requests through Plugboard.Serving.run/3 (Web.Cluster.load/2) and checks every answer exactly.
#   - the cluster report, from web: each compute node's target, devices and weight (devices x 1 on cpu);
#   - 2000 requests at concurrency 32, routed by weight: all right, shares following the weights;
#   - the same routed by load; then with compute2 SIGKILLed after request 1000: every request answered
#     and right, the lost ones retried (logged on web), wall time within 2x of the run without a kill;
#   - compute2 restarted, then disconnected from web mid-run: calls fail over, and once the connector
#     reconnects it takes requests again;
#   - a compute node whose explicit target is missing does not boot (non-zero exit) and never joins.
# With --figures it also measures (no checks on time): one compute node against two, the serving
# called locally on a compute node, Nx.Serving.batched_run/2 itself, and a slower node (a delay per
# batch on compute1) routed by weight against by load, closed-loop (32 outstanding) and open-loop (RATE
# requests per second, default 2000): p50/p99, batch fill.
#
#   elixir_cluster_test.sh [--figures] WORKDIR   (env: PLUGBOARD_PREFIX, PLUGBOARD_DEPS_DIR,
#                                                  MIX_HOME with Hex pointed at a repository that has
#                                                  Nx and Axon; MIX_BUILD_ROOT to reuse a build)
set -uo pipefail
figures=0
[ "${1:-}" = "--figures" ] && { figures=1; shift; }
work=${1:?usage: elixir_cluster_test.sh [--figures] WORKDIR}
: "${PLUGBOARD_PREFIX:?an installed plugboard (cmake --install BUILD --prefix P)}"
: "${PLUGBOARD_DEPS_DIR:?the deps folder scripts/setup.sh fills}"
repo=$(cd "$(dirname "$0")/.." && pwd)
sample=$repo/bindings/elixir/sample
plugin115=$PLUGBOARD_DEPS_DIR/files/xla_cpu_115/pjrt_c_api_cpu_plugin.so
[ -f "$plugin115" ] || { echo "FAIL: $plugin115 is missing (run scripts/setup.sh)"; exit 1; }

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
field() { sed -n "s/.*\b$2=\([^ ]*\).*/\1/p" <<< "$1" | head -n 1; }   # field LINE NAME

mkdir -p "$work" && work=$(cd "$work" && pwd)
rm -rf "$work/nodes" && mkdir -p "$work/nodes"
# Absolute: mix runs from the sample's folder.
export MIX_ENV=prod MIX_BUILD_ROOT=$(realpath -m "${MIX_BUILD_ROOT:-$work/_build}") XDG_CACHE_HOME=$(realpath -m "${XDG_CACHE_HOME:-$work/cache}")
export PLUGBOARD_WHEELS=$PLUGBOARD_DEPS_DIR/wheels ERL_CRASH_DUMP_SECONDS=0
unset PLUGBOARD_TARGET PLUGBOARD_TARGETS PLUGBOARD_PLUGIN_PATH PJRT_NAMES_AND_LIBRARY_PATHS COMPUTE_DEMO
if compgen -G "/dev/nvidia[0-9]*" > /dev/null || [ -e /dev/kfd ]; then
  export CUDA_VISIBLE_DEVICES="" HIP_VISIBLE_DEVICES="" ROCR_VISIBLE_DEVICES=""
fi

# --- the releases ----------------------------------------------------------------------------------
(cd "$sample" && mix deps.get) > "$work/deps.log" 2>&1 || { echo "FAIL: mix deps.get in the sample (Nx and Axon from Hex)"; tail -n 20 "$work/deps.log"; exit 1; }
(cd "$sample" && PLUGBOARD_EXTRA_TARGETS="cpu115=$plugin115" PLUGBOARD_EXTRA_CREATE_OPTIONS="cpu115:cpu_device_count=2" \
   mix release compute --overwrite) > "$work/build-compute.log" 2>&1 \
  || { echo "FAIL: building the compute release"; tail -n 30 "$work/build-compute.log"; exit 1; }
(cd "$sample" && mix release web --overwrite) > "$work/build-web.log" 2>&1 \
  || { echo "FAIL: building the web release"; tail -n 30 "$work/build-web.log"; exit 1; }
rel=$MIX_BUILD_ROOT/prod/rel
pass "compute (cpu, cpu115 with 2 devices, ...) and web releases built"

# --- the nodes: names unique to this run, one random cookie, the peers from CLUSTER_PEERS
# (config/runtime.exs); distribution and EPMD on 127.0.0.1 only (nothing reachable from the network).
tag=$$
web=web$tag@127.0.0.1 c1=compute1_$tag@127.0.0.1 c2=compute2_$tag@127.0.0.1 c3=compute3_$tag@127.0.0.1
cookie=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
[ ${#cookie} -ge 24 ] || { echo "FAIL: no random cookie from /dev/urandom"; exit 1; }
export RELEASE_DISTRIBUTION=name RELEASE_COOKIE=$cookie CLUSTER_RECONNECT_MS=500
export ELIXIR_ERL_OPTIONS="-kernel inet_dist_use_interface {127,0,0,1}" ERL_EPMD_ADDRESS=127.0.0.1
# The figures: no scheduler busy-waiting (three VMs share the machine's cores, and a spinning
# scheduler would take CPU from the others and count as work in the nodes' CPU time).
[ $figures -eq 1 ] && ELIXIR_ERL_OPTIONS="$ELIXIR_ERL_OPTIONS +sbwt none +sbwtdcpu none +sbwtdio none"
declare -A pids
start_node() {  # start_node NODE RELEASE ENV=VALUE...: a node in the foreground of a background job
  local node=$1 r=$2; shift 2
  (cd "$work/nodes" && exec env RELEASE_NODE=$node RELEASE_TMP="$work/nodes/tmp-${node%@*}" "$@" "$rel/$r/bin/$r" start) \
    >> "$work/nodes/${node%@*}.log" 2>&1 &
  pids[$node]=$!
}
cleanup() { for p in "${pids[@]}"; do pkill -9 -P "$p" 2> /dev/null; kill -9 "$p" 2> /dev/null; done; pkill -9 -f -- "$cookie" 2> /dev/null; true; }
trap cleanup EXIT
webrpc() { RELEASE_NODE=$web timeout "${2:-300}" "$rel/web/bin/web" rpc "$1"; }
members() { webrpc 'IO.puts(length(Plugboard.Serving.Router.members(Compute.Model)))' 20 2> /dev/null | tail -n 1; }
wait_members() {  # wait_members N: until web sees N compute members (60 s at most)
  for _ in $(seq 1 120); do [ "$(members)" = "$1" ] && return 0; sleep 0.5; done
  return 1
}
load() { webrpc "IO.puts(Web.Cluster.load($1))" 600 | tail -n 1; }
compute_env() { echo "CLUSTER_PEERS=$web"; }

start_node "$web" web CLUSTER_PEERS="$c1,$c2"
start_node "$c1" compute PLUGBOARD_TARGET=cpu "$(compute_env)"
if [ $figures -eq 1 ]; then
  wait_members 1 || { fail "compute1 never joined"; exit 1; }
  load "400" > /dev/null
  one=$(load "2000, concurrency: 32"); echo "FIGURE one compute node (routing by load): $one"
fi
start_node "$c2" compute PLUGBOARD_TARGET=cpu115 "$(compute_env)"
if wait_members 2; then pass "web sees both compute nodes' servings"; else
  fail "web does not see two compute members (saw $(members))"; tail -n 20 "$work"/nodes/*.log; exit 1
fi
# Each node's distribution port (from EPMD) listens on 127.0.0.1 and nowhere else.
command -v ss > /dev/null || fail "ss (iproute2) is needed to check where distribution listens"
for n in "$web" "$c1" "$c2"; do
  port=$(webrpc "{:port, p, _} = :erl_epmd.port_please(~c\"${n%@*}\", ~c\"127.0.0.1\"); IO.puts(p)" 20 | tail -n 1)
  addrs=$(ss -Hltn "sport = :${port:-0}" | awk '{print $4}' | sort -u | tr '\n' ' ')
  [ -n "$port" ] && [ "$addrs" = "127.0.0.1:$port " ] && pass "${n%@*}'s distribution listens on 127.0.0.1:$port only" \
    || fail "${n%@*}'s distribution port ${port:-?} listens on: ${addrs:-nothing}"
done

# --- what each node booted, from web ---------------------------------------------------------------
report=$(webrpc 'IO.puts(Web.Cluster.cluster())' 30)
echo "$report" | sed 's/^/    | /'
line1=$(grep "node=$c1 " <<< "$report") line2=$(grep "node=$c2 " <<< "$report")
d1=$(field "$line1" devices) d2=$(field "$line2" devices)
w1=$(grep -o 'weight [0-9]*' <<< "$line1" | cut -d' ' -f2) w2=$(grep -o 'weight [0-9]*' <<< "$line2" | cut -d' ' -f2)
[ "$(field "$line1" target)" = cpu ] && [ "$(field "$line2" target)" = cpu115 ] && pass "cluster report: compute1 booted cpu, compute2 cpu115" || fail "cluster report targets: $line1 / $line2"
[ "$d2" = 2 ] && pass "compute2 has the 2 devices its create option asked for" || fail "compute2 devices: $d2"
[ -n "$w1" ] && [ "$w1" = "$d1" ] && [ "$w2" = "$d2" ] && pass "weights follow devices x 1 on cpu ($w1, $w2)" || fail "weights $w1/$w2 for devices $d1/$d2"
grep -q "node=$web target=none" <<< "$report" && pass "web is in the report with no target" || fail "web's line in the report"

# --- 2000 requests, concurrency 32 ------------------------------------------------------------------
load "400" > /dev/null   # both nodes compile the model for each of their devices
ok_run() {  # ok_run LINE WHAT: every request answered, every answer right
  if [ "$(field "$1" ok)" = "$(field "$1" requests)" ] && [ "$(field "$1" wrong)" = 0 ]; then pass "$2: all $(field "$1" requests) answered and right"; else fail "$2: $1"; fi
}
share() { grep -o "${2}=[0-9]*" <<< "$1" | cut -d= -f2; }   # share LINE NODE: requests NODE answered

weighted=$(load "2000, concurrency: 32, routing: :weighted"); echo "    $weighted"
ok_run "$weighted" "routed by weight"
n2=$(share "$weighted" "${c2%@*}@127.0.0.1")
# compute2's share is w2/(w1+w2) up to chance: 2000 draws, six standard deviations (<= 0.067).
if awk -v n="$n2" -v a="$w1" -v b="$w2" 'BEGIN { p = b / (a + b); exit !(n != "" && (n / 2000 - p) ^ 2 <= (6 * sqrt(p * (1 - p) / 2000)) ^ 2) }'; then
  pass "routed by weight: compute2 took $n2 of 2000 (weights $w1:$w2)"; else fail "routed by weight: compute2 took $n2 of 2000 (weights $w1:$w2)"; fi

steady=$(load "2000, concurrency: 32"); echo "    $steady"
ok_run "$steady" "routed by load"
[ "$(field "$steady" retried)" = 0 ] && pass "no failure, nothing retried" || fail "retries without a failure: $steady"

# --- SIGKILL compute2 after request 1000 ------------------------------------------------------------
# Routed by weight, so that compute2 holds about a third of the 32 requests in flight when it dies
# (routed by load, it may hold none at that instant, and then nothing is lost to retry).
killed=$(load "2000, concurrency: 32, routing: :weighted, at: {1000, {:kill, :\"$c2\"}}"); echo "    $killed"
ok_run "$killed" "compute2 killed halfway"
retried=$(field "$killed" retried)
[ "${retried:-0}" -ge 1 ] && pass "$retried request(s) lost with compute2 were retried on compute1" || fail "no request was retried: $killed"
grep -q "request lost on $c2" "$work/nodes/web$tag.log" && pass "web logged the lost requests with the reason ($(grep -m1 -o "request lost on $c2 ([^)]*)" "$work/nodes/web$tag.log"))" || fail "no retry in web's log"
# The run without a failure: the slower of the two above (same size and concurrency; one alone is at
# the mercy of a GC or a neighbour on 2 cores).
wk=$(field "$killed" wall_ms) ws=$(field "$steady" wall_ms) ww=$(field "$weighted" wall_ms)
[ "$ww" -gt "$ws" ] && ws=$ww
[ "$wk" -le $((2 * ws)) ] && pass "wall time with the kill $wk ms, within 2x of $ws ms without" || fail "wall time with the kill $wk ms > 2 x $ws ms"
wait "${pids[$c2]}" 2> /dev/null
wait_members 1 && pass "compute2's serving left the directory" || fail "compute2 still a member after its death"

# --- compute2 back, then partitioned from web mid-run -------------------------------------------------
start_node "$c2" compute PLUGBOARD_TARGET=cpu115 "$(compute_env)"
wait_members 2 && pass "compute2 restarted and rejoined" || fail "compute2 did not rejoin"
load "400" > /dev/null
parted=$(load "3000, concurrency: 32, at: {600, {:disconnect, :\"$c2\"}}"); echo "    $parted"
ok_run "$parted" "compute2 disconnected from web mid-run"
grep -q "$c2 disconnected (:disconnect)" "$work/nodes/web$tag.log" && pass "web saw compute2 go" || fail "web's log has no disconnection of compute2"
# Back: the connector (or the next request's auto-connect) reconnects it, :pg lists its serving again.
wait_members 2 && grep -q "$c2 connected" <<< "$(grep -A1000 "$c2 disconnected (:disconnect)" "$work/nodes/web$tag.log")" \
  && pass "compute2 reconnected after the partition" || fail "compute2 did not come back after the partition"
after=$(load "1000, concurrency: 32"); echo "    $after"
ok_run "$after" "after the partition"
n2=$(share "$after" "${c2%@*}@127.0.0.1")
[ "${n2:-0}" -ge 1 ] && pass "compute2 takes requests again ($n2 of 1000)" || fail "compute2 takes no request after the partition: $after"

# --- a node whose explicit target is missing -------------------------------------------------------------
start_node "$c3" compute PLUGBOARD_TARGET=nosuch "$(compute_env)"
if timeout 120 tail --pid="${pids[$c3]}" -f /dev/null; then
  wait "${pids[$c3]}"; rc=$?
  [ $rc -ne 0 ] && pass "compute3 (PLUGBOARD_TARGET=nosuch) stopped with exit $rc" || fail "compute3 exited 0"
else
  fail "compute3 (PLUGBOARD_TARGET=nosuch) still running after 120 s"
fi
grep -q "no target started" "$work/nodes/compute3_$tag.log" && pass "compute3's log says no target started" || fail "compute3's log lacks the reason"
[ "$(members)" = 2 ] && ! webrpc 'IO.puts(inspect(Node.list()))' 20 | grep -q "compute3_$tag" && pass "compute3 never joined (web sees 2 members, no compute3 node)" || fail "compute3 joined"

# The CPU time (ms) the three nodes' VMs (web, compute1, compute2) have used so far, from /proc: what
# a load costs the machine, whichever node spends it.
nodes_cpu_ms() {
  local n p ticks=0 hz
  hz=$(getconf CLK_TCK)
  for n in "$web" "$c1" "$c2"; do
    # The node's own VM (started with -name NODE), not an rpc VM that names it as its target.
    for p in $(pgrep -f -- "-name $n( |\$)"); do
      [ "$(cat "/proc/$p/comm" 2> /dev/null)" = beam.smp ] || continue
      ticks=$((ticks + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2> /dev/null || echo 0)))
    done
  done
  echo $((ticks * 1000 / hz))
}
# load_with_cpu ARGS: load's line with the CPU time all three nodes spent on it (cpu_ms) and per
# request (cpu_us_per_request).
load_with_cpu() {
  local before after line requests
  before=$(nodes_cpu_ms); line=$(load "$1"); after=$(nodes_cpu_ms)
  requests=$(field "$line" requests)
  echo "$line cpu_ms=$((after - before)) cpu_us_per_request=$(( (after - before) * 1000 / ${requests:-1} ))"
}

if [ $figures -eq 1 ]; then
  local_run=$(load_with_cpu "2000, concurrency: 32, via: {:local, :\"$c1\"}"); echo "FIGURE the serving called on compute1 itself: $local_run"
  nx_run=$(load_with_cpu "2000, concurrency: 32, via: :nx_serving"); echo "FIGURE Nx.Serving.batched_run/2 from web: $nx_run"
  two=$(load_with_cpu "2000, concurrency: 32"); echo "FIGURE two compute nodes (routing by load): $two"
  # compute1 made slower (every batch SLOW_MS, default 80 ms, longer), restarted; weight against load.
  kill -9 "${pids[$c1]}"; wait "${pids[$c1]}" 2> /dev/null; wait_members 1
  start_node "$c1" compute PLUGBOARD_TARGET=cpu COMPUTE_SERVING_DELAY_MS=${SLOW_MS:-80} "$(compute_env)"; wait_members 2; load "400" > /dev/null
  round=0
  for r in weighted load weighted load; do
    [ "$r" = weighted ] && round=$((round + 1))
    echo "FIGURE slow compute1 (+${SLOW_MS:-80} ms a batch), round $round of 2, routing $r: $(load "2000, concurrency: 32, routing: :$r")"
  done
  # Open loop: requests arrive at a fixed rate whatever the answers (as users' do); by weight the slow
  # node gets more than it can do and queues, by load it does not.
  for r in weighted load; do echo "FIGURE slow compute1 (+${SLOW_MS:-80} ms a batch), ${RATE:-2000} requests/s open-loop, routing $r: $(load "3000, rate: ${RATE:-2000}, routing: :$r")"; done
  awk -v a="$(field "$two" rps)" -v l="$(field "$local_run" rps)" -v o="$(field "${one:-}" rps)" -v n="$(field "$nx_run" rps)" \
    'BEGIN { printf "FIGURE ratios: cluster rps / local rps = %.2f; 2 nodes / 1 node = %.2f; Plugboard.Serving / Nx.Serving rps = %.2f\n", a / l, a / o, a / n }'
  # On a machine with fewer cores than busy VMs, the rate follows the CPU a request costs all nodes.
  awk -v a="$(field "$two" cpu_us_per_request)" -v l="$(field "$local_run" cpu_us_per_request)" -v n="$(field "$nx_run" cpu_us_per_request)" -v cores="$(nproc)" \
    'BEGIN { printf "FIGURE CPU per request, all nodes: local %d us, Nx.Serving from web %d us, cluster %d us (cluster / local %.2f; %d cores)\n", l, n, a, a / l, cores }'
fi

if [ $failures -eq 0 ]; then echo "PASS: cluster end to end"; else echo "FAIL: $failures check(s) failed"; exit 1; fi
