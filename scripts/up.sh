#!/usr/bin/env bash
# The README's first command: install what is missing, build (optimised), and run
# `gpufleet up`: a controller on the embedded store with a simulated fleet from
# examples/fleet.yaml. Extra arguments go to `gpufleet up` (e.g. --listen 0.0.0.0:8080).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUFLEET_TESTS=OFF >/dev/null
cmake --build build --target gpufleet
exec build/gpufleet up "$@"
