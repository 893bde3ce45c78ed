#!/usr/bin/env bash
# Runs the fuzz targets (tests/fuzz/README.md) with libFuzzer: builds them with clang,
# AddressSanitizer and UndefinedBehaviorSanitizer in build-fuzz/, then runs each for SECONDS
# (default 600) from its corpus in tests/fuzz/corpus/<target>.
#   scripts/fuzz.sh [SECONDS] [TARGET...]      FUZZ_JOBS=N: N targets at a time (default 1)
# New inputs that reach new code go to build-fuzz/corpus/<target> (copy the interesting ones
# into tests/fuzz/corpus so that ctest replays them); a crash or a failed property leaves its
# input in build-fuzz/artifacts/ and makes the run fail. Each target's log:
# build-fuzz/logs/<target>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS] [TARGET...]" >&2
  exit 2
fi
scripts/deps.sh --fuzz
targets=("$@")
if (( ${#targets[@]} == 0 )); then
  targets=(agent_frame fleet_file rule_file api_body csaf asset_csv exposition wal_replay)
fi
build=${GPUFLEET_FUZZ_BUILD:-build-fuzz}
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUFLEET_SANITIZE=ON -DGPUFLEET_FUZZ=ON \
    -DGPUFLEET_TESTS=OFF >/dev/null
fi
cmake --build "$build" --target "${targets[@]/#/fuzz_}"
mkdir -p "$build/logs" "$build/artifacts"

run_one() {
  local target=$1 build=$2 seconds=$3
  local work="$build/corpus/$target"
  mkdir -p "$work"
  local leaks=1
  # The API target runs a controller's threads beside the fuzzer: what they hold between two
  # inputs is not a leak.
  [[ $target == api_body ]] && leaks=0
  if ASAN_OPTIONS=detect_leaks=$leaks:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     "$build/tests/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=60 -rss_limit_mb=4096 \
       -print_final_stats=1 -artifact_prefix="$build/artifacts/$target-" \
       "$work" "tests/fuzz/corpus/$target" >"$build/logs/$target.log" 2>&1; then
    echo "$target: $(grep -E '^stat::number_of_executed_units' "$build/logs/$target.log" | awk '{print $2}') runs," \
         "$(find "$work" -type f | wc -l) inputs in its corpus, no failure"
  else
    echo "$target: FAILED ($build/logs/$target.log):"
    grep -E 'ERROR|fuzz property failed|SUMMARY|Test unit written' "$build/logs/$target.log" | head -5
    return 1
  fi
}
export -f run_one
printf '%s\n' "${targets[@]}" |
  xargs -P "${FUZZ_JOBS:-1}" -I{} bash -c 'run_one "$@"' _ {} "$build" "$seconds"
