#!/usr/bin/env bash
# What remote write costs the controller: NODES simulated 8-GPU nodes (default 1250 = 10,000
# GPUs) send 27 fields per GPU at 1 Hz to a controller without remote write, then to one that
# writes every sample to Debian's VictoriaMetrics on loopback, RUNS times each, alternating.
# After a 20 s warm-up, over SECONDS (default 60): the controller's cores, samples stored per
# second, and with remote write the samples VictoriaMetrics took per second, those pending at the
# end, the queue's bytes per sample, and VictoriaMetrics's own cores. Prints each run, the medians
# and the ratio of the controller's cores (the issue asks at most 1.25).
# Usage: bench/remote-write.sh [NODES] [SECONDS] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${1:-1250}
seconds=${2:-60}
runs=${3:-3}
source bench/lib.sh
bench_build gpufleet
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; sleep 1; rm -rf "$work"' EXIT
hz=$(getconf CLK_TCK)
metric() {
  curl -s -H "Authorization: Bearer $(cat "$dir/admin.token")" "http://$addr/metrics" |
    awk -v m="$1" 'index($1, m) == 1 && !done {print $2; done = 1}'
}
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
: >"$work/off" && : >"$work/on"
for run in $(seq "$runs"); do
  for mode in off on; do
    dir=$work/$mode-$run
    mkdir -p "$dir"
    vm=""
    BENCH_SERVE_FLAGS=""
    if [[ $mode == on ]]; then
      port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
      victoria-metrics -httpListenAddr "127.0.0.1:$port" -storageDataPath "$dir/vm" -loggerLevel ERROR >"$dir/vm.log" 2>&1 &
      vm=$!
      BENCH_SERVE_FLAGS="--remote-write http://127.0.0.1:$port/api/v1/write"
    fi
    export BENCH_SERVE_FLAGS
    bench_controller "$dir"
    $bin sim --controller "$addr" --join-token "$token" --nodes "$nodes" --prefix n --workload off >"$dir/sim.log" 2>&1 &
    sim=$!
    sleep 20
    n0=$(metric gpufleet_tsdb_samples_ingested_total); c0=$(cpu_ticks $ctl); t0=$(now)
    [[ -n $vm ]] && { r0=$(metric gpufleet_remote_write_samples_sent_total); v0=$(cpu_ticks $vm); }
    sleep "$seconds"
    n1=$(metric gpufleet_tsdb_samples_ingested_total); c1=$(cpu_ticks $ctl); t1=$(now)
    el=$(echo "$t1 - $t0" | bc)
    cores=$(echo "scale=3; ($c1 - $c0) / $hz / $el" | bc)
    line="run $run $mode: controller_cores=$cores stored_per_s=$(echo "($n1 - $n0) / $el" | bc)"
    if [[ -n $vm ]]; then
      r1=$(metric gpufleet_remote_write_samples_sent_total); v1=$(cpu_ticks $vm)
      pending=$(metric gpufleet_remote_write_samples_pending)
      qbytes=$(metric gpufleet_remote_write_queue_bytes)
      line+=" sent_per_s=$(echo "($r1 - $r0) / $el" | bc) pending_at_end=$pending"
      line+=" queue_bytes_per_sample=$(echo "scale=1; $qbytes / ($n1 + 1)" | bc)"
      line+=" victoriametrics_cores=$(echo "scale=3; ($v1 - $v0) / $hz / $el" | bc)"
    fi
    echo "$line"
    echo "$cores" >>"$work/$mode"
    kill $sim $ctl ${vm:+$vm} 2>/dev/null || true
    wait $sim $ctl ${vm:+$vm} 2>/dev/null || true
    rm -rf "$dir"
  done
done
off=$(median <"$work/off"); on=$(median <"$work/on")
echo "median controller_cores: without=$off with_remote_write=$on ratio=$(echo "scale=2; $on / $off" | bc)"
