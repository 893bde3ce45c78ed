#!/usr/bin/env bash
# End-to-end telemetry load: NODES simulated 8-GPU nodes (default 1250 = 10,000 GPUs) send
# 27 fields per GPU at 1 Hz to one controller for SECONDS (default 300). Reports the samples
# stored per second, the controller's CPU (cores) and memory, the log's growth, and bytes per
# raw sample; then, under the same load, the latency of the reads a dashboard makes over the
# whole fleet: GET /api/v1/query (latest value of one field for every GPU), GET /metrics (every
# GPU's every field) and one GPU's day at a 1-minute step. Usage: bench/ingest.sh [NODES] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${1:-1250}
seconds=${2:-300}
source bench/lib.sh
bench_build gpufleet api_latency
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; sleep 1; rm -rf "$dir"' EXIT
bench_controller "$dir"
$bin sim --controller "$addr" --join-token "$token" --nodes "$nodes" --prefix n --workload off >"$dir/sim.log" 2>&1 &
sim=$!
metric() {
  curl -s -H "Authorization: Bearer $(cat "$dir/admin.token")" "http://$addr/metrics" |
    awk -v m="$1" '$1 == m {print $2}'
}
sleep 20  # registration and the first chunks
n0=$(metric gpufleet_tsdb_samples_ingested_total); w0=$(metric gpufleet_wal_bytes)
c0=$(cpu_ticks $ctl); s0=$(cpu_ticks $sim); t0=$(date +%s.%N)
sleep "$seconds"
n1=$(metric gpufleet_tsdb_samples_ingested_total); w1=$(metric gpufleet_wal_bytes)
c1=$(cpu_ticks $ctl); s1=$(cpu_ticks $sim); t1=$(date +%s.%N)
hz=$(getconf CLK_TCK)
el=$(echo "$t1 - $t0" | bc)
echo "gpus=$((nodes * 8)) seconds=$seconds"
echo "samples_per_s=$(echo "($n1 - $n0) / $el" | bc)"
echo "controller_cores=$(echo "scale=3; ($c1 - $c0) / $hz / $el" | bc) simulator_cores=$(echo "scale=3; ($s1 - $s0) / $hz / $el" | bc)"
echo "controller_rss_mib=$(( $(kb $ctl VmRSS) / 1024 ))"
echo "wal_bytes_per_s=$(echo "($w1 - $w0) / $el" | bc) (checkpoints truncate it; negative means one ran)"
echo "raw_bytes_per_sample=$(metric gpufleet_tsdb_bytes_per_sample)"
rss_kb=$(kb $ctl VmRSS)
echo "controller_kib_per_gpu=$(( rss_kb / (nodes * 8) ))"
admin=$(cat "$dir/admin.token")
gpu=$(curl -s -H "Authorization: Bearer $admin" "http://$addr/api/v1/gpus?limit=1" |
  sed -E 's/.*"uuid":"([^"]+)".*/\1/')
lat() { $build/bench/api_latency "$addr" "$admin" "$1" "$2"; }
echo "query_latest_all_gpus: $(lat '/api/v1/query?metric=gpu_util' 100)"
echo "metrics_page_all_gpus: $(lat /metrics 30)"
# The server's own time for the page (rendering, before the bytes travel), from its histogram.
render=$(curl -s -H "Authorization: Bearer $admin" "http://$addr/metrics" |
  awk '/^gpufleet_http_request_duration_seconds_(sum|count)\{.*route="\/metrics"/ {v[$1 ~ /_sum/] = $2}
       END {printf "%.1f", 1000 * v[1] / v[0]}')
echo "metrics_page_server_ms_mean=$render"
echo "query_range_one_gpu_24h_1m: $(lat "/api/v1/query_range?metric=power_usage&gpu=$gpu&start=-24h&step=1m" 200)"
