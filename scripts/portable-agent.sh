#!/usr/bin/env bash
# portable-agent.sh [BUILD_DIR]: builds gpufleet-agent-VERSION-linux-x86_64.tar.gz, the node
# agent for x86-64 Linux with glibc 2.31 or newer (cmake/portable-agent.cmake), into BUILD_DIR
# (default build-portable). It links against a Debian 11 root that it makes once with
# debootstrap ($GPUFLEET_SYSROOT, default /var/cache/gpufleet/bullseye; making it needs root
# and the Debian mirror apt uses here, or $DEBIAN_MIRROR).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-portable}
sysroot=${GPUFLEET_SYSROOT:-/var/cache/gpufleet/bullseye}
# The Debian mirror this machine's apt uses (and its proxy), else deb.debian.org.
apt_mirror() {
  cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's|^URIs: *\(https\{0,1\}://[^ ]*/debian\)/\{0,1\} *$|\1|p'
  sed -n 's|^deb  *\(\[[^]]*\] *\)\{0,1\}\(https\{0,1\}://[^ ]*/debian\)/\{0,1\} .*|\2|p' /etc/apt/sources.list 2>/dev/null
  true
}
mirror=${DEBIAN_MIRROR:-$(apt_mirror | sed -n 1p)}
mirror=${mirror:-http://deb.debian.org/debian}
if [ -z "${http_proxy:-}" ] && command -v apt-config >/dev/null; then
  eval "$(apt-config shell http_proxy Acquire::http::Proxy)"
  [ -n "${http_proxy:-}" ] && export http_proxy
fi

if [ ! -f "$sysroot/.complete" ]; then
  command -v debootstrap >/dev/null || { echo "error: debootstrap is not installed (scripts/deps.sh installs it)" >&2; exit 1; }
  [ "$(id -u)" = 0 ] || { echo "error: making the Debian 11 root in $sysroot needs root" >&2; exit 1; }
  echo "portable-agent: making a Debian 11 root in $sysroot from $mirror (debootstrap, about a minute)"
  rm -rf "$sysroot.tmp"
  mkdir -p "$(dirname "$sysroot")"
  debootstrap --variant=minbase --include=libc6-dev bullseye "$sysroot.tmp" "$mirror" \
    > "$(dirname "$sysroot")/debootstrap.log" 2>&1 ||
    { tail -20 "$(dirname "$sysroot")/debootstrap.log" >&2; exit 1; }
  rm -rf "$sysroot" && mv "$sysroot.tmp" "$sysroot"
  touch "$sysroot/.complete"
fi
# The root's absolute library links (libpthread.so -> /lib/x86_64-linux-gnu/libpthread.so.0)
# made relative, so that the linker, reading them from outside, stays inside the root.
find "$sysroot/lib64/" "$sysroot/usr/lib/x86_64-linux-gnu/" -maxdepth 1 -type l -lname '/*' |
  while read -r l; do
    ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$sysroot$(readlink "$l")")" "$l"
  done

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
mkdir -p "$build"
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DGPUFLEET_PORTABLE_AGENT=ON -DGPUFLEET_AGENT_SYSROOT="$sysroot" > "$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" --target agent-tarball fake_nvml
ls "$build"/gpufleet-agent-*-linux-x86_64.tar.gz
