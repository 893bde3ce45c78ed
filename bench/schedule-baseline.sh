#!/usr/bin/env bash
# Predictive against a stronger reactive baseline: reactive with a schedule-based minimum for the
# working day (the policy's `schedule`, `gpufleet replay --schedule NODES@FROM-TO`), on the
# working-day synthetic trace at SYNTHETIC_PER_DAY jobs a day (default 20000), five seeds.
# Per seed and lead time, reactive's cheapest setting whose p95 wait is at most 60 s over its
# share (0.8 to 1.0) and a minimum of NODES from FROM to 18:00 every day, chosen after the fact
# (which favours the baseline: an operator would have to guess NODES), against predictive at
# its cheapest setting within the same bound, as `gpufleet replay --tune` chooses it (the grid
# of bench/replay.sh: shares 0.6 to 1.0, margins 0.5 to 8, recent or by hour).
# Usage: bench/schedule-baseline.sh [BUILD_DIR] (default build-bench). About 6 minutes on 2 cores,
# plus the build.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
build=${1:-$build}
bench_build gpufleet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bench_synthetic_traces "$work" "${SYNTHETIC_PER_DAY:-20000}" business
GPUFLEET="$build/gpufleet" WORK="$work" python3 - <<'PY'
import json, os, statistics, subprocess
from concurrent.futures import ThreadPoolExecutor
gf, work = os.environ["GPUFLEET"], os.environ["WORK"]
seeds = (42, 43, 44, 45, 46)
shares = (0.8, 0.85, 0.9, 0.95, 1.0)
minimums = {600: ((9, (0, 100, 150, 200, 250, 300)), (8, (100, 200, 300))),
            1800: ((8, (0, 200, 250, 300, 350, 400)), (7, (200, 300, 400)))}
def replay(args):
    out = subprocess.run([gf, "-o", "json", "replay", "--pool-gpus-per-node", "8", *args],
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    d = d["chosen"] if "--tune" in args else d
    return d["gpu_hours_idle"], d["wait_p95_s"]
keys = [(lead, s, share, n, frm) for lead in minimums for s in seeds for share in shares
        for frm, ns in minimums[lead] for n in ns]
def reactive(key):
    lead, s, share, n, frm = key
    args = ["--trace", f"{work}/synthetic-{s}.csv", "--policy", "reactive",
            "--lead-time", str(lead), "--target-share", str(share)]
    return replay(args + (["--schedule", f"{n}@{frm}-18"] if n else []))
def pred(key):
    lead, i = key
    return replay(["--trace", f"{work}/synthetic-{seeds[i]}.csv", "--policy", "predictive",
                   "--lead-time", str(lead), "--tune", "--wait-p95", "60"])
pkeys = [(lead, i) for lead in minimums for i in range(len(seeds))]
with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
    results = dict(zip(keys, pool.map(reactive, keys)))
    presults = dict(zip(pkeys, pool.map(pred, pkeys)))
for lead in minimums:
    print(f"\n### working day, {os.environ.get('SYNTHETIC_PER_DAY', '20000')} jobs a day, lead time {lead} s\n")
    print("| seed | reactive alone (share) | reactive with a minimum (share, minimum) | predictive | predictive vs the minimum |")
    print("|---|---|---|---|---|")
    ratios = []
    for i, s in enumerate(seeds):
        ok = [(v[0], k) for k, v in results.items() if k[:2] == (lead, s) and v[1] <= 60]
        alone = [(idle, k) for idle, k in ok if k[3] == 0]
        idle, k = min(ok)
        p_idle, p_wait = presults[(lead, i)]
        ratios.append(100 * (p_idle / idle - 1))
        a = f"{min(alone)[0]:.0f} ({min(alone)[1][2]})" if alone else "p95 > 60 s at 0.8 and up"
        print(f"| {s} | {a} | {idle:.0f} ({k[2]}, {k[3]}@{k[4]}-18, p95 {results[k][1]:.0f} s) "
              f"| {p_idle:.0f} (p95 {p_wait:.0f} s) | {ratios[-1]:+.0f}% |")
    print(f"\n- predictive against reactive with its best minimum: median {statistics.median(ratios):+.0f}%")
PY
