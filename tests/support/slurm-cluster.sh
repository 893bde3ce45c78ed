#!/usr/bin/env bash
# A real Slurm cluster on loopback for the tests (and for trying the bridge by hand): munged,
# slurmctld and one slurmd per node, each with fake GPU device files (mknod), all in DIR.
# Needs root (slurmd runs jobs as their users; SlurmUser=root) and Debian's slurmctld, slurmd,
# slurm-client and munge.
#
#   tests/support/slurm-cluster.sh start DIR PORT NODE...   # nodes with 2 GPUs (gres gpu:h100:2)
#   tests/support/slurm-cluster.sh stop DIR
#
# Clients then need SLURM_CONF=DIR/slurm.conf. PORT is slurmctld's; the slurmds take the next
# ones. The nodes are in partition `gpu`.
set -euo pipefail
cmd=${1:?usage: slurm-cluster.sh start DIR PORT NODE... | stop DIR}
dir=${2:?directory}

stop() {
  for pidfile in "$dir"/*.pid; do
    [[ -f $pidfile ]] || continue
    kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  sleep 0.5
  for pidfile in "$dir"/*.pid; do
    [[ -f $pidfile ]] || continue
    kill -9 "$(cat "$pidfile")" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

if [[ $cmd == stop ]]; then
  stop
  exit 0
fi
[[ $cmd == start ]] || { echo "slurm-cluster.sh: unknown command '$cmd'" >&2; exit 2; }
port=${3:?port}
shift 3
nodes=("$@")
(( ${#nodes[@]} )) || { echo "slurm-cluster.sh: name at least one node" >&2; exit 2; }
for b in /usr/sbin/munged /usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/scontrol; do
  [[ -x $b ]] || { echo "slurm-cluster.sh: $b is missing (apt-get install munge slurmctld slurmd slurm-client)" >&2; exit 1; }
done
mkdir -p "$dir/state" "$dir/dev"
dir=$(cd "$dir" && pwd)

# munge: its own key and socket.
dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
chmod 600 "$dir/munge.key"
/usr/sbin/munged --key-file="$dir/munge.key" --socket="$dir/munge.sock" \
  --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge.seed" -f

{
  echo "ClusterName=gftest"
  echo "SlurmctldHost=localhost(127.0.0.1)"
  echo "SlurmctldPort=$port"
  echo "AuthType=auth/munge"
  echo "AuthInfo=socket=$dir/munge.sock"
  echo "CredType=cred/munge"
  echo "SlurmUser=root"
  echo "StateSaveLocation=$dir/state"
  echo "SlurmdSpoolDir=$dir/spool-%n"
  echo "SlurmctldPidFile=$dir/slurmctld.pid"
  echo "SlurmdPidFile=$dir/slurmd-%n.pid"
  echo "SlurmctldLogFile=$dir/slurmctld.log"
  echo "SlurmdLogFile=$dir/slurmd-%n.log"
  echo "MpiDefault=none"
  echo "ProctrackType=proctrack/linuxproc"
  echo "TaskPlugin=task/none"
  echo "SelectType=select/cons_tres"
  echo "SelectTypeParameters=CR_Core"
  echo "GresTypes=gpu"
  echo "ReturnToService=2"
  echo "SchedulerType=sched/backfill"
  echo "SchedulerParameters=sched_interval=2"
  echo "AccountingStorageType=accounting_storage/none"
  echo "JobCompType=jobcomp/none"
  echo "MinJobAge=60"
  echo "SlurmdTimeout=30"
  echo "RebootProgram=/bin/true"
  i=1
  for n in "${nodes[@]}"; do
    echo "NodeName=$n NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((port + i)) CPUs=2 RealMemory=1000 Gres=gpu:h100:2 State=UNKNOWN"
    i=$((i + 1))
  done
  echo "PartitionName=gpu Nodes=$(IFS=,; echo "${nodes[*]}") Default=YES MaxTime=INFINITE State=UP"
} > "$dir/slurm.conf"

: > "$dir/gres.conf"
minor=0
for n in "${nodes[@]}"; do
  for g in 0 1; do
    dev="$dir/dev/$n-nvidia$g"
    [[ -e $dev ]] || mknod "$dev" c 195 $((minor + g))
  done
  echo "NodeName=$n Name=gpu Type=h100 File=$dir/dev/$n-nvidia[0-1]" >> "$dir/gres.conf"
  minor=$((minor + 2))
done

export SLURM_CONF="$dir/slurm.conf"
/usr/sbin/slurmctld -f "$dir/slurm.conf" -i
for n in "${nodes[@]}"; do
  mkdir -p "$dir/spool-$n"
  /usr/sbin/slurmd -f "$dir/slurm.conf" -N "$n"
done
# Up when every node is idle.
for _ in $(seq 1 60); do
  if /usr/bin/sinfo -h -o '%t' -N 2>/dev/null | grep -qv '^idle$'; then
    sleep 0.5
  elif [[ -n $(/usr/bin/sinfo -h -o '%t' -N 2>/dev/null) ]]; then
    exit 0
  else
    sleep 0.5
  fi
done
echo "slurm-cluster.sh: the nodes did not become idle within 30 s:" >&2
/usr/bin/sinfo -N >&2 || true
tail -5 "$dir/slurmctld.log" >&2 || true
exit 1
