#!/usr/bin/env bash
# Installs the Debian 12 packages gpufleet needs to build and test, if any are missing.
# Usage: scripts/deps.sh [--test|--fuzz]   (--test adds what the tests need, --fuzz what
# scripts/fuzz.sh needs: clang and its libFuzzer runtime)
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(cmake ninja-build g++ ccache pkg-config
      libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
      libsoci-dev libsqlite3-dev libpq-dev libssl-dev zlib1g-dev libspdlog-dev libcli11-dev libyaml-cpp-dev
      libre2-dev  # patterns from users (silence matchers, rule selectors): linear time, no recursion
      libprotobuf-dev protobuf-compiler libsnappy-dev  # remote write's WriteRequest and snappy
      tzdata  # maintenance windows in a cluster's time zone (common/timezone.h)
      dpkg-dev file)  # the .deb (--target package): dpkg-shlibdeps finds its Depends
if [[ "${1:-}" == "--test" ]]; then
  # promtool checks /metrics; Alertmanager receives alerts in the tests
  pkgs+=(libgtest-dev libbenchmark-dev clang-format git prometheus prometheus-alertmanager)
  # remote write's receivers in the end-to-end tests (with Prometheus)
  pkgs+=(victoria-metrics)
  # the store's and the end-to-end tests start a real PostgreSQL server (tests/support/postgres.h)
  pkgs+=(postgresql)
  # the Slurm bridge's tests start a real Slurm on loopback (tests/support/slurm-cluster.sh)
  pkgs+=(slurmctld slurmd slurm-client munge)
  # the portable agent's test makes a Debian 11 root to link against and run it in
  pkgs+=(debootstrap)
  # the dashboard's browser tests: Debian's Chromium, driven by playwright-core from npm
  pkgs+=(chromium)
  # gpufleet export --format ansible is read back by Ansible's own ansible-inventory
  pkgs+=(ansible-core)
  # playwright-core needs Node.js 20 or newer; Debian 12's own nodejs is 18, so only a machine
  # without any node gets it (and the check below says what is missing).
  command -v node >/dev/null || pkgs+=(nodejs npm)
fi
if [[ "${1:-}" == "--fuzz" ]]; then
  pkgs+=(clang libclang-rt-14-dev)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} )); then
  echo "installing: ${missing[*]}"
  sudo=""
  [[ $(id -u) == 0 ]] || sudo="sudo"
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi
if [[ "${1:-}" == "--test" ]]; then
  major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  if (( major < 20 )); then
    echo "error: the browser tests need Node.js 20 or newer (found: $(node --version 2>/dev/null || echo none))" >&2
    exit 1
  fi
  # playwright-core, pinned by tests/browser/package-lock.json; reinstalled when the lock changes
  lock=tests/browser/package-lock.json
  stamp=tests/browser/node_modules/.lock-installed
  if ! cmp -s "$lock" "$stamp" 2>/dev/null; then
    (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
    cp "$lock" "$stamp"
  fi
fi
