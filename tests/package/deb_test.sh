#!/usr/bin/env bash
# The .deb as an administrator meets it: built with `--target package`, installed with
# dpkg -i, the controller and an agent run by their units' own ExecStart lines with their
# settings files, a node registered through NVML (the fake library), an upgrade that keeps an
# edited setting, and a purge. Needs root (CI runs as root): otherwise it is skipped (77).
# Usage: deb_test.sh BUILD_DIR FAKE_NVML_LIBRARY NVML_SCRIPT
set -euo pipefail
build=$1 nvml=$2 script=$3
if [[ $(id -u) != 0 ]]; then echo "skipped: installing a package needs root"; exit 77; fi
if dpkg-query -W -f='${Status}' gpufleet 2>/dev/null | grep -q "ok installed"; then
  echo "skipped: a gpufleet package is already installed on this machine"; exit 77
fi
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$(dirname "$0")/common.sh"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  dpkg --purge gpufleet >/dev/null 2>&1 || true
  userdel gpufleet 2>/dev/null || true
  rm -rf /var/lib/gpufleet /var/lib/gpufleet-agent
}
trap cleanup EXIT

rm -f "$build"/gpufleet_*.deb
cmake --build "$build" --target package >/dev/null
deb=$(ls "$build"/gpufleet_*_amd64.deb)
echo "built $(basename "$deb") ($(du -h "$deb" | cut -f1))"
info=$(dpkg-deb --info "$deb")
grep -q '^ Depends:.*libssl3' <<<"$info" || fail "Depends lacks the shared libraries: $info"
contents=$(dpkg-deb --contents "$deb")
for f in ./usr/bin/gpufleet ./lib/systemd/system/gpufleet-controller.service \
         ./lib/systemd/system/gpufleet-agent.service ./etc/gpufleet/controller.env \
         ./etc/gpufleet/agent.env ./usr/share/doc/gpufleet/operations.md; do
  grep -q " $f\$" <<<"$contents" || fail "$f is not in the package"
done
[[ $(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles) == \
   $'/etc/gpufleet/controller.env\n/etc/gpufleet/agent.env' ]] || fail "conffiles"

dpkg -i "$deb" >"$build/deb-install.log" 2>&1 || { cat "$build/deb-install.log"; fail "dpkg -i"; }
grep -q "systemctl enable --now gpufleet-controller" "$build/deb-install.log" || fail "no hint"
getent passwd gpufleet | grep -q ':/var/lib/gpufleet:/usr/sbin/nologin$' || fail "user"
[[ $(stat -c '%U %a' /var/lib/gpufleet) == "gpufleet 700" ]] || fail "/var/lib/gpufleet"
[[ $(stat -c '%U %G %a' /etc/gpufleet/controller.env) == "root gpufleet 640" ]] || fail "controller.env"
[[ $(stat -c '%U %a' /etc/gpufleet/agent.env) == "root 600" ]] || fail "agent.env"
if command -v systemd-analyze >/dev/null; then
  for u in gpufleet-controller gpufleet-agent; do
    out=$(systemd-analyze verify "/lib/systemd/system/$u.service" 2>&1 || true)
    ! grep -i "$u" <<<"$out" || fail "systemd-analyze verify $u: $out"
  done
fi

# Run a unit's ExecStart as systemd would: its User, its EnvironmentFile's variables (KEY=VALUE
# lines, the value as it stands, spaces and all, or within quotes), ${VAR} as one word and $VAR
# split on spaces.
run_unit() {
  local unit=/lib/systemd/system/$1.service log=$2
  local exec user envfile
  exec=$(sed -n 's/^ExecStart=//p' "$unit")
  user=$(sed -n 's/^User=//p' "$unit")
  envfile=$(sed -n 's/^EnvironmentFile=-\{0,1\}//p' "$unit")
  (while IFS= read -r line; do
     [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
     value=${line#*=}
     [[ $value =~ ^\"(.*)\"$ || $value =~ ^\'(.*)\'$ ]] && value=${BASH_REMATCH[1]}
     export "${line%%=*}=$value"
   done <"$envfile"
   exec runuser -u "${user:-root}" -- sh -c "exec $(sed 's/\${\([A-Z_]*\)}/"$\1"/g' <<<"$exec")" \
     >"$log" 2>&1) &
  pids+=($!)
}

# The controller on a free loopback port, as an administrator would set it.
sed -i 's|^GPUFLEET_SERVE_ARGS=.*|GPUFLEET_SERVE_ARGS=--listen 127.0.0.1:0 --health-interval 1s|' \
  /etc/gpufleet/controller.env
run_unit gpufleet-controller "$build/deb-controller.log"
for _ in $(seq 1 150); do [[ -s /var/lib/gpufleet/controller.addr ]] && break; sleep 0.2; done
[[ -s /var/lib/gpufleet/controller.addr ]] || { cat "$build/deb-controller.log"; fail "controller"; }
addr=$(cat /var/lib/gpufleet/controller.addr)
[[ $(stat -c %U /var/lib/gpufleet/gpufleet.db) == gpufleet ]] || fail "db not the user's"
cli() { runuser -u gpufleet -- /usr/bin/gpufleet --data-dir /var/lib/gpufleet "$@"; }
token=$(l4_pool_token /tmp/deb-test-fleet.yaml)

# The agent, with its settings in agent.env (the fake NVML library stands for the driver's).
cat >/etc/gpufleet/agent.env <<ENV
GPUFLEET_CONTROLLER=http://$addr
GPUFLEET_JOIN_TOKEN=$token
GPUFLEET_AGENT_ARGS=--hostname deb-node-1 --label rack=r1
GPUFLEET_NVML_LIBRARY=$nvml
FAKE_NVML_SCRIPT=$script
ENV
run_unit gpufleet-agent "$build/deb-agent.log"
node_ready_with_telemetry deb-node-1 "$build/deb-agent.log"
[[ -n $(ls -A /var/lib/gpufleet-agent) ]] ||
  fail "the agent kept no credential in /var/lib/gpufleet-agent"
echo "controller on $addr, node deb-node-1 ready with its L4's telemetry"

# Reinstalling (an upgrade) keeps the edited settings; purging removes them, keeps the data.
for p in "${pids[@]}"; do kill "$p"; done
wait 2>/dev/null || true
pids=()
dpkg -i "$deb" >/dev/null 2>&1 || fail "reinstall"
grep -q "127.0.0.1:0" /etc/gpufleet/controller.env || fail "the edited controller.env was replaced"
dpkg --purge gpufleet >/dev/null 2>&1 || fail "purge"
[[ ! -e /etc/gpufleet/controller.env && ! -e /usr/bin/gpufleet ]] || fail "purge left files"
[[ -f /var/lib/gpufleet/gpufleet.db ]] || fail "purge deleted the fleet's database"
echo "package test passed"
