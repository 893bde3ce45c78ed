# Shared by the load runs in bench/: an optimised build, and a controller on a fresh data
# directory with one pool of 8-GPU H100 nodes. Source it; it sets `bin`.
build=build-bench
bin=${BENCH_BIN:-$build/gpufleet}  # BENCH_BIN: another build (a baseline) to run instead

bench_build() {  # bench_build TARGET... (with BENCH_BIN set, gpufleet itself is not built)
  local targets=()
  for t in "$@"; do [[ -n "${BENCH_BIN:-}" && $t == gpufleet ]] || targets+=("$t"); done
  set -- "${targets[@]}"
  [[ $# -gt 0 ]] || return 0
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUFLEET_BENCH=ON \
    -DGPUFLEET_TESTS=OFF >/dev/null
  cmake --build $build --target "$@" >/dev/null
}

# bench_synthetic_traces DIR [JOBS_PER_DAY] [SHAPE]: the replay benches' synthetic traces, 14
# days of 2,000 jobs a day (or JOBS_PER_DAY) from seeds 42 to 46, with the daily SHAPE (cosine,
# or business), as DIR/synthetic-SEED.csv.
bench_synthetic_traces() {
  for seed in 42 43 44 45 46; do
    python3 bench/synthetic-trace.py 14 "${2:-2000}" "$seed" "${3:-cosine}" >"$1/synthetic-$seed.csv"
  done
}

# bench_controller DIR [STORE_URL]: starts `gpufleet serve` on DIR (its store: SQLite in DIR, or
# STORE_URL) and applies the bench fleet; sets `ctl` (its pid), `addr` and `token` (a join token
# for pool h100). With BENCH_TLS=1 it serves HTTPS with a CA made in DIR/tls (`addr` is then
# https://…; the CLI with --data-dir trusts it). BENCH_SERVE_FLAGS: more flags of `serve`.
bench_controller() {
  local dir=$1
  local store=() tls=()
  [[ -n "${2:-}" ]] && store=(--store "$2")
  mkdir -p "$dir"
  if [[ -n "${BENCH_TLS:-}" ]]; then
    $bin tls init --dir "$dir/tls" --host 127.0.0.1 >/dev/null
    tls=(--tls-cert "$dir/tls/controller.pem" --tls-key "$dir/tls/controller.key")
  fi
  # shellcheck disable=SC2086
  $bin --data-dir "$dir" serve --listen 127.0.0.1:0 --log-level warn "${store[@]}" "${tls[@]}" ${BENCH_SERVE_FLAGS:-} >>"$dir/serve.log" 2>&1 &
  ctl=$!
  for _ in $(seq 100); do [[ -s $dir/controller.addr ]] && break; sleep 0.1; done
  addr=$(cat "$dir/controller.addr")
  printf 'apiVersion: gpufleet/v1\nkind: Fleet\nclusters:\n  - name: bench\n    type: training\n    site: lab\n    pools:\n      - {name: h100, gpu_model: H100-SXM5-80GB, gpus_per_node: 8}\n' >"$dir/fleet.yaml"
  $bin --data-dir "$dir" apply -f "$dir/fleet.yaml" >/dev/null
  token=$($bin --data-dir "$dir" tokens create --pool h100 2>/dev/null)
}

kb() { awk -v k="$2:" '$1 == k {print $2}' /proc/"$1"/status; }
cpu_ticks() { awk '{print $14 + $15}' /proc/"$1"/stat; }
now() { date +%s.%N; }
