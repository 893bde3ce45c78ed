#!/usr/bin/env python3
"""A synthetic job trace with daily and weekly seasonality, for `gpufleet replay`.

Usage: bench/synthetic-trace.py [DAYS] [JOBS_PER_DAY] [SEED] [SHAPE] > trace.csv
SHAPE `cosine` (the default): arrivals follow a rate that peaks at 14:00 and bottoms out at
02:00, a tenth of the peak. SHAPE `business`: the full rate from 09:00 to 18:00 and 0.15 of it
otherwise, a working day that starts at once. Either rate is halved on weekends. Jobs ask for
1, 2, 4 or 8 GPUs (mostly 1) and run for a log-normal time (median 40 minutes), from four teams.
The same arguments give the same trace (the seed is 42 unless given).
"""
import math
import random
import sys

days = int(sys.argv[1]) if len(sys.argv) > 1 else 14
per_day = float(sys.argv[2]) if len(sys.argv) > 2 else 2000
rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 42)
shape = sys.argv[4] if len(sys.argv) > 4 else "cosine"
if shape not in ("cosine", "business"):
    sys.exit(f"synthetic-trace.py: SHAPE is cosine or business, not {shape!r}")
print("submit_time,duration_s,gpus,team")
peak = per_day / 86400 * 1.9  # the rate's maximum, jobs per second (thinning)
t = 0.0
end = days * 86400
while True:
    t += rng.expovariate(peak)
    if t >= end:
        break
    hour = (t % 86400) / 3600
    if shape == "business":
        daily = 1.0 if 9 <= hour < 18 else 0.15
    else:
        daily = 0.55 + 0.45 * math.cos((hour - 14) / 24 * 2 * math.pi)
    weekly = 0.5 if (t // 86400) % 7 >= 5 else 1.0
    if rng.random() > daily * weekly:
        continue
    gpus = rng.choices([1, 2, 4, 8], weights=[60, 20, 12, 8])[0]
    duration = min(24 * 3600, rng.lognormvariate(math.log(2400), 0.9))
    team = rng.choice(["vision", "nlp", "speech", "recsys"])
    print(f"{t:.0f},{duration:.0f},{gpus},{team}")
