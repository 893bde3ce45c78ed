#!/usr/bin/env bash
# Reactive, predictive and oracle scaling on two traces, through `gpufleet replay`: the Alibaba
# 2023 GPU trace (data/traces, scaled: it is a sample) and a synthetic trace with daily and
# weekly seasonality (bench/synthetic-trace.py, 14 days). For each trace and lead time it
# prints two tables:
#   1. every policy at the same settings (target share 0.8);
#   2. every policy at its cheapest target share (0.6 ... 1.0) whose p95 queue wait is at most
#      60 s: the idle GPU-hours each needs to keep that wait.
# And one 500,000-job replay's wall time. Usage: bench/replay.sh [BUILD_DIR] (default build-bench)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-bench}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUFLEET_BENCH=ON >/dev/null
cmake --build "$build" --target gpufleet >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 bench/synthetic-trace.py 14 2000 > "$work/synthetic.csv"
python3 bench/synthetic-trace.py 14 40000 > "$work/synthetic-500k.csv"
GPUFLEET="$build/gpufleet" WORK="$work" python3 - <<'PY'
import json, os, subprocess
gf, work = os.environ["GPUFLEET"], os.environ["WORK"]
traces = [
    ("Alibaba 2023 (openb, --time-scale 10 --size-scale 2)",
     ["--trace", "data/traces/openb_pod_list_default.csv", "--format", "openb",
      "--time-scale", "10", "--size-scale", "2"]),
    ("synthetic, daily and weekly seasonality (14 days)", ["--trace", f"{work}/synthetic.csv"]),
]
def run(args, policy, lead, share):
    out = subprocess.run([gf, "-o", "json", "replay", *args, "--pool-gpus-per-node", "8",
                          "--policy", policy, "--lead-time", str(lead), "--target-share", str(share)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)
def row(d, share):
    mape = "-" if d["forecast_mape"] is None else f"{100 * d['forecast_mape']:.1f}%"
    return (f"| {d['policy']} | {share} | {d['gpu_hours_provisioned']:.0f} | {d['gpu_hours_idle']:.0f} | "
            f"{d['wait_p50_s']:.0f} | {d['wait_p95_s']:.0f} | {d['wait_p99_s']:.0f} | "
            f"{d['jobs_waited_over_lead_time']} | {d['scale_events']} | {mape} |")
head = ("| policy | target share | GPU-h provisioned | GPU-h idle | wait p50 s | wait p95 s | "
        "wait p99 s | waited > lead | scale events | forecast MAPE |\n|---|---|---|---|---|---|---|---|---|---|")
for name, args in traces:
    for lead in (600, 1800):
        print(f"\n### {name}, lead time {lead} s\n\nSame settings (target share 0.8), {run(args, 'oracle', lead, 0.8)['jobs']} jobs:\n")
        print(head)
        for policy in ("reactive", "predictive", "oracle"):
            print(row(run(args, policy, lead, 0.8), 0.8))
        print("\nEach policy's cheapest target share with p95 wait <= 60 s:\n")
        print(head)
        best = {}
        for policy in ("reactive", "predictive", "oracle"):
            ok = [(d["gpu_hours_idle"], s, d) for s in (0.6, 0.7, 0.8, 0.9, 1.0)
                  for d in [run(args, policy, lead, s)] if d["wait_p95_s"] <= 60]
            if ok:
                idle, s, d = min(ok, key=lambda x: x[0])
                best[policy] = idle
                print(row(d, s))
        if {"reactive", "predictive", "oracle"} <= best.keys():
            print(f"\npredictive vs reactive idle GPU-hours: {100 * (best['predictive'] / best['reactive'] - 1):+.0f}%; "
                  f"predictive vs oracle: {100 * (best['predictive'] / best['oracle'] - 1):+.0f}%")
d = run(["--trace", f"{work}/synthetic-500k.csv", "--max-nodes", "5000"], "predictive", 600, 0.8)
print(f"\n500,000-job replay ({d['jobs']} jobs, predictive): {d['replay_seconds']:.2f} s")
PY
