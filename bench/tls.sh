#!/usr/bin/env bash
# What TLS costs, in one run on this machine:
#   - the telemetry load of bench/ingest.sh (NODES simulated 8-GPU nodes, default 1250 = 10,000
#     GPUs, 27 fields at 1 Hz) for SECONDS (default 60) against a plain controller, then the same
#     against one serving TLS: the controller's CPU (cores) for each, and the ratio;
#   - AGENTS (default 1000) agents connected over TLS when their controller restarts: the time
#     from the new controller listening until every agent is connected again.
# Usage: bench/tls.sh [NODES] [SECONDS] [AGENTS]
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${1:-1250}
seconds=${2:-60}
agents=${3:-1000}
source bench/lib.sh
bench_build gpufleet
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; sleep 1; rm -rf "$work"' EXIT
hz=$(getconf CLK_TCK)

# metric DIR NAME: a value from the controller's /metrics (https with DIR's CA when it has one).
metric() {
  local ca=()
  [[ -f $1/tls/ca.pem ]] && ca=(--cacert "$1/tls/ca.pem")
  curl -s "${ca[@]}" -H "Authorization: Bearer $(cat "$1/admin.token")" "$addr/metrics" |
    awk -v m="$2" '$1 == m {print $2}'
}
wait_connected() {  # wait_connected DIR N TIMEOUT_S
  local until=$(($(date +%s) + $3))
  while [[ "$(metric "$1" gpufleet_agents_connected)" != "$2" ]]; do
    (($(date +%s) < until)) || { echo "timed out: $(metric "$1" gpufleet_agents_connected)/$2 connected"; return 1; }
    sleep 0.05
  done
}

declare -A cores
for mode in plain tls; do
  dir=$work/$mode
  BENCH_TLS=$([[ $mode == tls ]] && echo 1 || true) bench_controller "$dir"
  [[ $addr == http* ]] || addr=http://$addr
  ca=()
  [[ $mode == tls ]] && ca=(--ca-file "$dir/tls/ca.pem")
  $bin "${ca[@]}" sim --controller "$addr" --join-token "$token" --nodes "$nodes" --prefix n --workload off >"$dir/sim.log" 2>&1 &
  sim=$!
  wait_connected "$dir" "$nodes" 120
  sleep 20  # the first chunks
  c0=$(cpu_ticks $ctl); n0=$(metric "$dir" gpufleet_tsdb_samples_ingested_total); t0=$(now)
  sleep "$seconds"
  c1=$(cpu_ticks $ctl); n1=$(metric "$dir" gpufleet_tsdb_samples_ingested_total); t1=$(now)
  el=$(echo "$t1 - $t0" | bc)
  cores[$mode]=$(echo "scale=3; ($c1 - $c0) / $hz / $el" | bc)
  echo "$mode: gpus=$((nodes * 8)) samples_per_s=$(echo "($n1 - $n0) / $el" | bc) controller_cores=${cores[$mode]} controller_rss_mib=$(( $(kb $ctl VmRSS) / 1024 ))"
  kill $sim; wait $sim 2>/dev/null || true
  kill $ctl; wait $ctl 2>/dev/null || true
done
echo "tls_over_plain_cpu=$(echo "scale=2; ${cores[tls]} / ${cores[plain]}" | bc)"

# Reconnection: AGENTS agents on a TLS controller, which then restarts on the same port.
dir=$work/reconnect
BENCH_TLS=1 bench_controller "$dir"
$bin --ca-file "$dir/tls/ca.pem" sim --controller "$addr" --join-token "$token" --nodes "$agents" --prefix r --workload off >"$dir/sim.log" 2>&1 &
sim=$!
wait_connected "$dir" "$agents" 120
kill $ctl; wait $ctl 2>/dev/null || true
rm -f "$dir/controller.addr"
$bin --data-dir "$dir" serve --listen "${addr#https://}" --log-level warn \
  --tls-cert "$dir/tls/controller.pem" --tls-key "$dir/tls/controller.key" >>"$dir/serve.log" 2>&1 &
ctl=$!
for _ in $(seq 200); do [[ -s $dir/controller.addr ]] && break; sleep 0.05; done
t0=$(now)
wait_connected "$dir" "$agents" 60
echo "reconnect_tls: $agents agents connected again $(echo "$(now) - $t0" | bc) s after the controller restarted"
