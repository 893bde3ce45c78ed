#!/usr/bin/env bash
# The portable agent as an administrator of an older distribution meets it: the tarball that
# scripts/portable-agent.sh builds, unpacked into a Debian 11 (bullseye, glibc 2.31) root made
# with debootstrap, its gpufleet-agent run there under chroot against a controller on
# loopback, NVML loaded with dlopen (the fake library, built the same portable way). The node
# registers, reports its OS as the root's, and its L4's telemetry reaches the query API.
# Needs root (debootstrap, chroot; CI runs as root): otherwise it is skipped (77).
# Usage: portable_agent_test.sh SOURCE_DIR BUILD_DIR NVML_SCRIPT
set -euo pipefail
src=$1 build=$2 script=$3
if [[ $(id -u) != 0 ]]; then echo "skipped: debootstrap and chroot need root"; exit 77; fi
sysroot=${GPUFLEET_SYSROOT:-/var/cache/gpufleet/bullseye}
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$(dirname "$0")/common.sh"
work=$(mktemp -d /tmp/portable-agent-test.XXXXXX)
inroot=/tmp/gpufleet-agent-test.$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  umount "$sysroot/proc" 2>/dev/null || true
  rm -rf "${sysroot:?}$inroot"
  [[ ${keep:-} ]] || rm -rf "$work"
}
trap cleanup EXIT
keep=1  # the logs stay until the end is reached

GPUFLEET_SYSROOT=$sysroot bash "$src/scripts/portable-agent.sh" "$build/portable" >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log"; fail "scripts/portable-agent.sh"; }
tarball=$(ls "$build"/portable/gpufleet-agent-*-linux-x86_64.tar.gz)
echo "built $(basename "$tarball") ($(du -h "$tarball" | cut -f1))"
listing=$(tar -tzf "$tarball")
name=$(basename "$tarball" .tar.gz)
for f in bin/gpufleet-agent gpufleet-agent.service agent.env README; do
  grep -qx "$name/$f" <<<"$listing" || fail "$f is not in the tarball: $listing"
done
grep -q '^ExecStart=/opt/gpufleet-agent/bin/gpufleet-agent ' <(tar -xzOf "$tarball" "$name/gpufleet-agent.service") ||
  fail "the unit does not start /opt/gpufleet-agent/bin/gpufleet-agent"

# Into the Debian 11 root, with the fake NVML library and its script.
grep -q 'VERSION_ID="11"' "$sysroot/etc/os-release" || fail "$sysroot is not Debian 11"
mkdir -p "$sysroot$inroot"
tar -xzf "$tarball" -C "$sysroot$inroot"
cp "$build/portable/libnvidia-ml.so.1" "$script" "$sysroot$inroot/"
agent=$inroot/$name/bin/gpufleet-agent
"$src/scripts/check-glibc.sh" "$sysroot$agent" 2.31 || fail "the binary needs a newer glibc"
mount -t proc proc "$sysroot/proc"
libs=$(chroot "$sysroot" ldd "$agent") || fail "ldd in the Debian 11 root: $libs"
while read -r lib _; do
  [[ $lib =~ ^(linux-vdso|libc|libpthread|libdl|libm|libgcc_s)\.so|^/lib64/ld-linux ]] ||
    fail "gpufleet-agent needs $lib: $libs"
done <<<"$libs"
! grep -q "not found" <<<"$libs" || fail "$libs"
version=$(chroot "$sysroot" "$agent" --version)
[[ $version == "$(sed -n 's/^project(gpufleet VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")" ]] ||
  fail "--version says $version"
chroot "$sysroot" "$agent" --no-such-flag >/dev/null 2>&1 && fail "an unknown flag was accepted"

# The controller here (Debian 12's build), a pool and a join token.
"$build/gpufleet" --data-dir "$work/ctl" serve --listen 127.0.0.1:0 --health-interval 1s \
  >"$work/controller.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 150); do [[ -s $work/ctl/controller.addr ]] && break; sleep 0.2; done
[[ -s $work/ctl/controller.addr ]] || { cat "$work/controller.log"; fail "controller"; }
addr=$(cat "$work/ctl/controller.addr")
cli() { "$build/gpufleet" --data-dir "$work/ctl" "$@"; }
token=$(l4_pool_token "$work/fleet.yaml")

chroot "$sysroot" env GPUFLEET_NVML_LIBRARY="$inroot/libnvidia-ml.so.1" \
  FAKE_NVML_SCRIPT="$inroot/$(basename "$script")" GPUFLEET_JOIN_TOKEN="$token" \
  "$agent" --controller "http://$addr" --hostname bullseye-node-1 --state-dir "$inroot/state" \
  >"$work/agent.log" 2>&1 &
pids+=($!)
node_ready_with_telemetry bullseye-node-1 "$work/agent.log"
os=$(cli -o json nodes show bullseye-node-1 | grep -o '"os": *"[^"]*"')
[[ $os == *bullseye* ]] || fail "the node's OS is $os, not the Debian 11 root's"
[[ -s $sysroot$inroot/state/node.token ]] || fail "no node credential kept in --state-dir"
echo "gpufleet-agent in Debian 11 ($os): node bullseye-node-1 ready, its L4's telemetry stored"
keep=
echo "portable agent test passed"
