#!/usr/bin/env bash
# The README's second command (and CI's): install what is missing, build everything with
# AddressSanitizer and UndefinedBehaviorSanitizer, and run every test (unit, end-to-end,
# dependency directions, formatting). Prints ctest's summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
build=${GPUFLEET_TEST_BUILD:-build-test}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGPUFLEET_SANITIZE=ON >/dev/null
cmake --build "$build"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build"
# Two at a time (CI's 2 cores): the end-to-end entries spend much of their time waiting on
# the controllers they start. GPUFLEET_TEST_JOBS=1 runs them one by one.
ctest -j"${GPUFLEET_TEST_JOBS:-2}" --output-on-failure --timeout 600
