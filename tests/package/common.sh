# Shared by the package tests (sourced): each defines fail() and cli() (the gpufleet CLI with
# its controller's data dir) before it calls these.

# An L4 pool `l4` in cluster `edge`, applied; prints a join token of it.
l4_pool_token() {
  local file=$1 token
  cat >"$file" <<'YAML'
apiVersion: gpufleet/v1
kind: Fleet
clusters:
  - name: edge
    type: edge
    site: lab
    pools:
      - {name: l4, gpu_model: L4, gpus_per_node: 1, size: 0}
YAML
  chmod 644 "$file"
  cli apply -f "$file" >/dev/null
  token=$(cli tokens create --pool l4 2>/dev/null | tail -1)
  [[ $token == gfj_* ]] || fail "join token: $token"
  echo "$token"
}

# Waits for NODE to be ready and for its L4's utilization (87 in the fake NVML script) to be
# stored; fails with the agent's LOG otherwise.
node_ready_with_telemetry() {
  local node=$1 log=$2 ok=
  for _ in $(seq 1 100); do
    if cli nodes list 2>/dev/null | grep -q "$node.*ready"; then ok=1; break; fi
    sleep 0.3
  done
  [[ $ok ]] || { cli nodes list; cat "$log"; fail "the agent's node $node is not ready"; }
  for _ in $(seq 1 50); do
    cli metrics query gpu_util --node "$node" 2>/dev/null | grep -q "87" && return 0
    sleep 0.3
  done
  fail "no telemetry from $node through NVML"
}
