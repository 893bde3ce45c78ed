#!/usr/bin/env bash
# The store's load run, SQLite against PostgreSQL in one run, on this machine:
#   - N simulated nodes x 8 GPUs register from cold (default 1000): seconds until all are ready;
#   - mutating API calls at 50 a second: job submissions, and a node's cordon and uncordon in
#     turn (each a node write with its event, and an audit record): p50/p99 latency.
# PostgreSQL 15 runs in a temporary directory on a Unix socket only, as the `postgres` user when
# run as root (scripts/deps.sh --test installs it), with its defaults (synchronous_commit=on: a
# commit waits for its WAL to be flushed; PG_SYNCHRONOUS_COMMIT=off measures without that).
# Usage: bench/store.sh [NODES] [RUNS] [CALLS].
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${1:-1000}
runs=${2:-3}
calls=${3:-1000}
source bench/lib.sh
bench_build gpufleet api_latency
work=$(mktemp -d)
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as=()
if [[ $(id -u) == 0 ]]; then
  chown postgres "$work"
  as=(runuser -u postgres --)
fi
pgport=$((50000 + $$ % 10000))
"${as[@]}" "$pgbin/initdb" -D "$work/pg" -A trust -U gpufleet -E UTF8 --locale=C >"$work/initdb.log"
# A server as one would run it, fsync on; only the socket, in $work.
"${as[@]}" "$pgbin/pg_ctl" -D "$work/pg" -w -l "$work/pg.log" \
  -o "-k $work -p $pgport -c listen_addresses= -c max_connections=100 -c synchronous_commit=${PG_SYNCHRONOUS_COMMIT:-on}" start >/dev/null
trap 'kill $(jobs -p) 2>/dev/null || true; sleep 1; "${as[@]}" "$pgbin/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
psql_() { "$pgbin/psql" -X -q -h "$work" -p "$pgport" -U gpufleet -d postgres -c "$1"; }

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
field() { sed -E "s/.*$1=([0-9.]+).*/\1/" <<<"$2"; }

declare -A reg submit99 submit50 cordon99 cordon50
for run in $(seq 1 "$runs"); do
  for backend in sqlite postgresql; do
    dir=$work/$backend-$run
    url=""
    if [[ $backend == postgresql ]]; then
      psql_ "CREATE DATABASE bench_$run"
      url="postgresql://gpufleet@/bench_$run?host=$work&port=$pgport"
    fi
    bench_controller "$dir" "$url"
    admin=$(cat "$dir/admin.token")
    start=$(now)
    $bin sim --controller "$addr" --join-token "$token" --nodes "$nodes" --prefix n --workload off >"$dir/sim.log" 2>&1 &
    sim=$!
    while true; do
      ready=$(curl -s -H "Authorization: Bearer $admin" "http://$addr/api/v1/nodes?state=ready&limit=1" | sed -E 's/.*"total":([0-9]+).*/\1/')
      [[ "$ready" == "$nodes" ]] && break
      sleep 0.05
    done
    took=$(echo "$(now) - $start" | bc)
    sleep 2
    s=$($build/bench/api_latency "$addr" "$admin" /api/v1/jobs "$calls" POST \
      '{"team": "bench", "pool": "h100", "gpus": 1, "duration": "2s"}' 50)
    c=$($build/bench/api_latency "$addr" "$admin" \
      "/api/v1/nodes/n-0000/cordon|/api/v1/nodes/n-0000/uncordon" "$calls" POST '{}' 50)
    echo "run $run $backend: $nodes nodes ready in ${took}s; job submit $s; cordon/uncordon $c"
    reg[$backend]+="$took "
    submit50[$backend]+="$(field p50_ms "$s") "; submit99[$backend]+="$(field p99_ms "$s") "
    cordon50[$backend]+="$(field p50_ms "$c") "; cordon99[$backend]+="$(field p99_ms "$c") "
    kill $sim; wait $sim 2>/dev/null || true
    kill $ctl; wait $ctl 2>/dev/null || true
  done
done
for backend in sqlite postgresql; do
  # shellcheck disable=SC2086
  echo "median over $runs runs, $backend: registration $(median ${reg[$backend]}) s; job submit p50 $(median ${submit50[$backend]}) ms p99 $(median ${submit99[$backend]}) ms; cordon/uncordon p50 $(median ${cordon50[$backend]}) ms p99 $(median ${cordon99[$backend]}) ms"
done
# shellcheck disable=SC2086
echo "registration, PostgreSQL / SQLite: $(echo "scale=2; $(median ${reg[postgresql]}) / $(median ${reg[sqlite]})" | bc)"
