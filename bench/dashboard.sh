#!/usr/bin/env bash
# The dashboard's speed at 10,000 simulated GPUs, in Debian's Chromium, against an optimised
# build: the overview's first useful paint, the heatmap's redraw and fetch times (medians) and
# the heatmap reply's size. Usage: bench/dashboard.sh [BUILD_DIR]   (default build-bench)
# Needs what scripts/test.sh installs (chromium, tests/browser/node_modules).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-bench}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUFLEET_BENCH=ON >/dev/null
cmake --build "$build" --target gpufleet
out="$build/test-output/dashboard-bench"
mkdir -p "$out"
GPUFLEET_BIN="$build/gpufleet" GPUFLEET_TEST_OUTPUT="$out" \
  node --test --test-reporter=spec tests/browser/perf.test.mjs
cat "$out/perf.json"
