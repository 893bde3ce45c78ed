#!/usr/bin/env bash
# Tuned on the past, applied to the future: what `gpufleet scaling tune` would give an operator.
# Each trace is split in two halves in time (synthetic: days 0-7 and 7-14; Alibaba: at the
# sample's median creation time). `gpufleet replay --tune` picks each policy's cheapest setting
# whose p95 queue wait is at most 60 s on the first half (reactive: the target share;
# predictive: the share and the forecast margin), and that setting is replayed on the second
# half. For comparison, the same choice made in hindsight on the second half itself (what
# bench/replay.sh does). Five variants per trace (Alibaba --time-scale 9 to 11, synthetic seeds
# 42 to 46), lead times 600 s and 1800 s, with consolidation (the default). Medians and each
# variant. Usage: bench/holdout.sh [BUILD_DIR] (default build-bench)
# Environment, as for bench/replay.sh: REPLAY_TRACES=alibaba or synthetic (one trace only),
# SYNTHETIC_PER_DAY=N (jobs a day, default 2000) and SYNTHETIC_SHAPE=business (a working day).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
build=${1:-$build}
if [ ! -x "$build/gpufleet" ] || [ "${HOLDOUT_BUILD:-1}" = 1 ]; then bench_build gpufleet; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
per_day=${SYNTHETIC_PER_DAY:-2000}
shape=${SYNTHETIC_SHAPE:-cosine}
bench_synthetic_traces "$work" "$per_day" "$shape"
GPUFLEET="$build/gpufleet" WORK="$work" PER_DAY="$per_day" SHAPE="$shape" \
  TRACES="${REPLAY_TRACES:-all}" python3 - <<'PY'
import csv, json, os, statistics, subprocess
from concurrent.futures import ThreadPoolExecutor
gf, work, only = os.environ["GPUFLEET"], os.environ["WORK"], os.environ["TRACES"]
per_day, shape = int(os.environ["PER_DAY"]), os.environ["SHAPE"]

def split(path, key, cut, out):
    with open(path) as f:
        rows = list(csv.reader(f))
    head, body = rows[0], rows[1:]
    col = head.index(key)
    for half, keep in (("a", lambda r: float(r[col]) < cut), ("b", lambda r: float(r[col]) >= cut)):
        with open(f"{out}-{half}.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(head)
            w.writerows(r for r in body if keep(r))

with open("data/traces/openb_pod_list_default.csv") as f:
    created = sorted(float(r["creation_time"]) for r in csv.DictReader(f))
split("data/traces/openb_pod_list_default.csv", "creation_time", statistics.median(created),
      f"{work}/alibaba")
for s in (42, 43, 44, 45, 46):
    split(f"{work}/synthetic-{s}.csv", "submit_time", 7 * 86400, f"{work}/synthetic-{s}")

alibaba = lambda half, ts: ["--trace", f"{work}/alibaba-{half}.csv", "--format", "openb",
                            "--size-scale", "2", "--time-scale", str(ts)]
synthetic = lambda half, s: ["--trace", f"{work}/synthetic-{s}-{half}.csv"]
traces = [("Alibaba 2023 (openb, --size-scale 2, --time-scale 9 to 11), split at its median creation time",
           [(f"ts {ts:g}", (lambda h, ts=ts: alibaba(h, ts))) for ts in (9, 9.5, 10, 10.5, 11)]),
          ("synthetic (seeds 42 to 46" + ("" if per_day == 2000 else f", {per_day:,} jobs a day") +
           ("" if shape == "cosine" else ", a working day from 09:00 to 18:00") +
           "), days 0-7 and 7-14",
           [(f"seed {s}", (lambda h, s=s: synthetic(h, s))) for s in (42, 43, 44, 45, 46)])]
if only != "all":
    traces = [t for t in traces if t[0].lower().startswith(only)]
    assert traces, f"REPLAY_TRACES={only}: alibaba or synthetic"

def gpufleet(*args):
    return json.loads(subprocess.run([gf, "-o", "json", "replay", *args, "--pool-gpus-per-node", "8"],
                                     check=True, capture_output=True, text=True).stdout)

def setting(c):
    return ["--target-share", str(c["target_share"])] + (
        ["--forecast-margin", str(c["forecast_margin"]), "--margin-by", c["margin_by"]]
        if c["forecast_margin"] is not None else [])

def one(key):  # (trace args maker, policy, lead) -> (chosen on a, replayed on b, hindsight on b)
    make, policy, lead = key
    common = ["--policy", policy, "--lead-time", str(lead)]
    past = gpufleet(*make("a"), *common, "--tune", "--wait-p95", "60")
    hindsight = gpufleet(*make("b"), *common, "--tune", "--wait-p95", "60")
    chosen = past["chosen"] or past["closest"]
    future = gpufleet(*make("b"), *common, *setting(chosen))
    return chosen, future, hindsight["chosen"]

keys = [(name, label, policy, lead) for name, variants in traces for label, _ in variants
        for policy in ("reactive", "predictive") for lead in (600, 1800)]
makers = {(name, label): make for name, variants in traces for label, make in variants}
# Each tune runs its replays on the machine's cores already.
with ThreadPoolExecutor(2) as pool:
    results = dict(zip(keys, pool.map(lambda k: one((makers[k[:2]], k[2], k[3])), keys)))

med = statistics.median
pct = lambda a, b: 100 * (a / b - 1)
def knob(c):
    if c["forecast_margin"] is None:
        return f"{c['target_share']:g}"
    return f"{c['target_share']:g} ({c['forecast_margin']:g}{'/h' if c['margin_by'] == 'hour' else ''})"
for name, variants in traces:
    for lead in (600, 1800):
        print(f"\n### {name}, lead time {lead} s\n")
        print("| variant | reactive: chosen on the first half | its idle GPU-h / p95 s on the second | predictive: chosen | its idle GPU-h / p95 s | predictive vs reactive | the same chosen in hindsight |")
        print("|---|---|---|---|---|---|---|")
        ratios, hind = [], []
        for label, make in variants:
            rc, rf, rh = results[(name, label, "reactive", lead)]
            pc, pf, ph = results[(name, label, "predictive", lead)]
            r = pct(pf["gpu_hours_idle"], rf["gpu_hours_idle"])
            h = pct(ph["gpu_hours_idle"], rh["gpu_hours_idle"]) if ph and rh else float("nan")
            ratios.append(r)
            hind.append(h)
            print(f"| {label} | {knob(rc)}{'' if rc['meets'] else ' (none within)'} | "
                  f"{rf['gpu_hours_idle']:.0f} / {rf['wait_p95_s']:.0f} | {knob(pc)}{'' if pc['meets'] else ' (none within)'} | "
                  f"{pf['gpu_hours_idle']:.0f} / {pf['wait_p95_s']:.0f} | {r:+.0f}% | {h:+.0f}% |")
        print(f"\n- predictive vs reactive on the second half, settings tuned on the first: median {med(ratios):+.0f}%;"
              f" tuned in hindsight on the second: median {med(hind):+.0f}%.")
PY
