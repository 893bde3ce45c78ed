#!/usr/bin/env bash
# One controller at scale: NODES (12,500 = 100,000 GPUs) simulated 8-GPU nodes register and
# stream 27 fields per GPU at 1 Hz through `gpufleet sim` on the same machine. Reports how long
# until all are `ready`, then over SECONDS (60): the samples stored per second against those
# offered (one a second per series), the controller's cores, RSS and RSS per series; then,
# under the same load, the p50/p99 of what a load balancer and an operator ask for: /healthz,
# GET /api/v1/clusters, GET /api/v1/nodes?limit=100, GET /api/v1/query?metric=gpu_util&pool=h100
# and the dashboard overview's calls (health problems, firing alerts, the clusters' trend).
# Targets (issue 49): every sample stored, /healthz p99 < 50 ms, the reads p99 < 500 ms, at
# most 1 KiB of RSS per series. ROUNDS (100) requests to each path, each counted as at most
# TIMEOUT (30) seconds. Last, how many (live) nodes the heartbeat check declared unreachable.
# BENCH_BIN=path runs another build of gpufleet (a baseline) instead.
# Usage: bench/scale.sh [NODES] [SECONDS] [ROUNDS] [TIMEOUT]
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${1:-12500}
seconds=${2:-60}
rounds=${3:-100}
timeout=${4:-30}
source bench/lib.sh
bench_build gpufleet
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; sleep 1; rm -rf "$dir"' EXIT
bench_controller "$dir"
admin=$(cat "$dir/admin.token")
# An answer slower than 120 s is none (the script goes on: a starved API is what it measures).
get() { curl -s --max-time 120 -H "Authorization: Bearer $admin" "http://$addr$1" || true; }
# The controller's own metrics, without the page's 2.7 million GPU lines (no pool is named so).
metric() { get "/metrics?pool=-" | awk -v m="$1" '$1 == m {print $2}'; }

start=$(now)
$bin sim --controller "$addr" --join-token "$token" --nodes "$nodes" --prefix n --workload off >"$dir/sim.log" 2>&1 &
sim=$!
ready=0
while [[ "$ready" != "$nodes" ]]; do
  if (( $(echo "$(now) - $start > 1200" | bc) )); then echo "only $ready of $nodes ready after 1200 s" >&2; exit 1; fi
  sleep 1
  ready=$(get "/api/v1/nodes?state=ready&limit=1" | sed -nE 's/.*"total":([0-9]+).*/\1/p')
done
echo "nodes=$nodes gpus=$((nodes * 8)) registered_s=$(echo "$(now) - $start" | bc)"
sleep 15  # the first batches of the last nodes in, the first chunks cut

n0=$(metric gpufleet_tsdb_samples_ingested_total)
c0=$(cpu_ticks $ctl); s0=$(cpu_ticks $sim); t0=$(now)
sleep "$seconds"
n1=$(metric gpufleet_tsdb_samples_ingested_total)
c1=$(cpu_ticks $ctl); s1=$(cpu_ticks $sim); t1=$(now)
series=$(metric gpufleet_tsdb_series)
hz=$(getconf CLK_TCK)
el=$(echo "$t1 - $t0" | bc)
rss_kb=$(kb $ctl VmRSS)
echo "series=$series samples_per_s=$(echo "($n1 - $n0) / $el" | bc) offered_per_s=$series"
echo "controller_cores=$(echo "scale=3; ($c1 - $c0) / $hz / $el" | bc) simulator_cores=$(echo "scale=3; ($s1 - $s0) / $hz / $el" | bc)"
echo "controller_rss_mib=$((rss_kb / 1024)) rss_bytes_per_series=$((rss_kb * 1024 / series))"

python3 bench/probe.py "$addr" "$admin" "$rounds" "$timeout" /healthz /api/v1/clusters \
  "/api/v1/nodes?limit=100" "/api/v1/query?metric=gpu_util&pool=h100" \
  "/api/v1/health?show=problems&limit=1" "/api/v1/alerts?state=firing&limit=5000" \
  "/api/v1/query_range?metric=gpu_util&by=cluster&start=-1h&step=1m"
n2=$(metric gpufleet_tsdb_samples_ingested_total); t2=$(now)
echo "samples_per_s_during_probes=$(echo "($n2 - $n1) / ($t2 - $t1)" | bc)"
# Nodes the heartbeat check declared unreachable over the whole run (the agents are all alive:
# each is a false alarm), and the checks that spared nodes whose frames waited to be handled.
lost=$(sed -nE 's/.* ([0-9]+) node\(s\) stopped sending heartbeats.*/\1/p' "$dir/serve.log" | paste -sd+ | bc)
spared=$(grep -c "have a frame waiting to be handled" "$dir/serve.log" || true)
echo "nodes_declared_unreachable=${lost:-0} checks_that_spared_waiting_nodes=$spared"
