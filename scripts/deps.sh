#!/usr/bin/env bash
# Installs the Debian 12 packages gpufleet needs to build and test, if any are missing.
# Usage: scripts/deps.sh [--test]   (--test adds what the tests need)
set -euo pipefail
pkgs=(cmake ninja-build g++ ccache pkg-config
      libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
      libsoci-dev libsqlite3-dev libssl-dev libspdlog-dev libcli11-dev libyaml-cpp-dev)
if [[ "${1:-}" == "--test" ]]; then
  # promtool checks /metrics; Alertmanager receives alerts in the tests
  pkgs+=(libgtest-dev libbenchmark-dev clang-format git prometheus prometheus-alertmanager)
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
