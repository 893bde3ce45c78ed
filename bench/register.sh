#!/usr/bin/env bash
# End-to-end load run for the foundation's targets, on this machine:
#   - N simulated nodes x 8 GPUs register from cold (default 1000), controller RSS;
#   - GET /api/v1/nodes over those nodes: p50/p99 latency;
#   - one idle sim-backend agent: RSS and CPU share.
# Usage: bench/register.sh [NODES] [RUNS]. Prints one line per run and the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${1:-1000}
runs=${2:-3}
source bench/lib.sh
bench_build gpufleet api_latency micro_bench
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; sleep 1; rm -rf "$work"' EXIT

reg_times=(); rss=(); hwm=(); p50s=(); p99s=()
for run in $(seq 1 "$runs"); do
  dir=$work/run$run
  bench_controller "$dir"
  start=$(now)
  $bin sim --controller "$addr" --join-token "$token" --nodes "$nodes" --prefix n --workload off >"$dir/sim.log" 2>&1 &
  sim=$!
  while true; do
    ready=$(curl -s -H "Authorization: Bearer $(cat "$dir/admin.token")" "http://$addr/api/v1/nodes?state=ready&limit=1" | sed -E 's/.*"total":([0-9]+).*/\1/')
    [[ "$ready" == "$nodes" ]] && break
    sleep 0.05
  done
  took=$(echo "$(now) - $start" | bc)
  sleep 1
  r=$(kb $ctl VmRSS); h=$(kb $ctl VmHWM)
  lat=$($build/bench/api_latency "$addr" "$(cat "$dir/admin.token")" "/api/v1/nodes?limit=5000" 500)
  p50=$(sed -E 's/.*p50_ms=([0-9.]+).*/\1/' <<<"$lat"); p99=$(sed -E 's/.*p99_ms=([0-9.]+).*/\1/' <<<"$lat")
  echo "run $run: $nodes nodes ready in ${took}s; controller RSS $((r / 1024)) MiB (peak $((h / 1024)) MiB); GET /api/v1/nodes $lat"
  reg_times+=("$took"); rss+=("$r"); hwm+=("$h"); p50s+=("$p50"); p99s+=("$p99")
  kill $sim; wait $sim 2>/dev/null || true
  kill $ctl; wait $ctl 2>/dev/null || true
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
echo "median over $runs runs: registration $(median "${reg_times[@]}") s, controller RSS $(( $(median "${rss[@]}") / 1024 )) MiB (peak $(( $(median "${hwm[@]}") / 1024 )) MiB), GET /api/v1/nodes p50 $(median "${p50s[@]}") ms p99 $(median "${p99s[@]}") ms"

# One idle agent with the sim backend.
dir=$work/agent
bench_controller "$dir"
$bin agent --controller "$addr" --join-token "$token" --backend sim --hostname idle-agent --log-level warn >"$dir/agent.log" 2>&1 &
agent=$!
sleep 5
t0=$(cpu_ticks $agent); s0=$(now)
sleep 30
t1=$(cpu_ticks $agent); s1=$(now)
hz=$(getconf CLK_TCK)
share=$(echo "scale=3; 100 * ($t1 - $t0) / $hz / ($s1 - $s0)" | bc)
echo "idle sim agent: RSS $(( $(kb $agent VmRSS) / 1024 )) MiB ($(kb $agent VmRSS) kB), CPU ${share}% of one core over 30 s"
