#!/usr/bin/env bash
# Side by side with Prometheus (Debian's package): NODES simulated 8-GPU nodes report to one
# controller at 1 Hz, and Prometheus scrapes the controller's /metrics (the same GPUs, the same
# fields, under dcgm-exporter's names) every second. Over the same SECONDS it reports, for
# each: samples stored, CPU seconds per million samples, compressed bytes per sample and
# write-ahead-log bytes per sample. gpufleet's figure is its raw tier in memory (chunks and
# their bookkeeping); Prometheus's is the chunk files of a snapshot of its head (the same
# samples compacted to a block: meta.json's numSamples over the size of chunks/). The
# controller's CPU includes rendering /metrics for Prometheus every second.
# Usage: bench/vs-prometheus.sh [NODES] [SECONDS]   (defaults 125 nodes = 1,000 GPUs, 120 s)
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${1:-125}
seconds=${2:-120}
command -v prometheus >/dev/null || { echo "needs prometheus (apt-get install prometheus)" >&2; exit 1; }
source bench/lib.sh
bench_build gpufleet
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; sleep 1; rm -rf "$dir"' EXIT
bench_controller "$dir"
admin=$(cat "$dir/admin.token")
$bin sim --controller "$addr" --join-token "$token" --nodes "$nodes" --prefix n --workload off >"$dir/sim.log" 2>&1 &

# Prometheus on a free loopback port, scraping /metrics with the admin token.
pport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 19090)
cat >"$dir/prometheus.yml" <<YAML
global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: gpufleet
    metrics_path: /metrics
    authorization: {credentials_file: $dir/admin.token}
    static_configs: [{targets: ['$addr']}]
YAML
prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/prom" \
  --web.listen-address="127.0.0.1:$pport" --web.enable-admin-api --log.level=warn \
  >"$dir/prometheus.log" 2>&1 &
prom=$!

own() { curl -s -H "Authorization: Bearer $admin" "http://$addr/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
pm() { curl -s "http://127.0.0.1:$pport/metrics" | awk -v m="$1" '$1 == m {print $2}' | head -1; }
# Prometheus prints large counters as 1.44e+06, which bc cannot read.
psamples() { printf '%.0f' "$(pm 'prometheus_tsdb_head_samples_appended_total{type="float"}')"; }
sleep 20  # registration, the first scrapes, the first chunks
g0=$(own gpufleet_tsdb_samples_ingested_total); gw0=$(own gpufleet_wal_bytes)
p0=$(psamples); pw0=$(du -sb "$dir/prom/wal" | cut -f1)
gc0=$(cpu_ticks $ctl); pc0=$(cpu_ticks $prom); t0=$(now)
sleep "$seconds"
g1=$(own gpufleet_tsdb_samples_ingested_total); gw1=$(own gpufleet_wal_bytes)
p1=$(psamples); pw1=$(du -sb "$dir/prom/wal" | cut -f1)
gc1=$(cpu_ticks $ctl); pc1=$(cpu_ticks $prom); t1=$(now)
hz=$(getconf CLK_TCK)
el=$(echo "$t1 - $t0" | bc)
gs=$(echo "$g1 - $g0" | bc); ps=$((p1 - p0))
gcpu=$(echo "scale=3; ($gc1 - $gc0) / $hz" | bc); pcpu=$(echo "scale=3; ($pc1 - $pc0) / $hz" | bc)
series=$(pm prometheus_tsdb_head_series)
snap=$(curl -s -XPOST "http://127.0.0.1:$pport/api/v1/admin/tsdb/snapshot" | sed -E 's/.*"name":"([^"]+)".*/\1/')
meta=$(cat "$dir"/prom/snapshots/"$snap"/*/meta.json)
snap_samples=$(grep -o '"numSamples": *[0-9]*' <<<"$meta" | grep -o '[0-9]*$')
snap_bytes=$(du -sb "$dir"/prom/snapshots/"$snap"/*/chunks | cut -f1)
echo "gpus=$((nodes * 8)) seconds=$seconds scrape_interval=1s"
echo "gpufleet:   samples=$gs cpu_s=$gcpu cpu_s_per_million=$(echo "scale=3; $gcpu * 1000000 / $gs" | bc) bytes_per_sample_memory=$(own gpufleet_tsdb_bytes_per_sample) wal_bytes_per_sample=$(echo "scale=2; ($gw1 - $gw0) / $gs" | bc) rss_mib=$(( $(kb $ctl VmRSS) / 1024 ))"
echo "prometheus: samples=$ps cpu_s=$pcpu cpu_s_per_million=$(echo "scale=3; $pcpu * 1000000 / $ps" | bc) head_series=$series chunk_bytes_per_sample=$(echo "scale=2; $snap_bytes / $snap_samples" | bc) wal_bytes_per_sample=$(echo "scale=2; ($pw1 - $pw0) / $ps" | bc) rss_mib=$(( $(kb $prom VmRSS) / 1024 ))"
