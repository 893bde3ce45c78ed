#pragma once
// The names an alert rule expression can select, and the rows each has:
// - every telemetry field under its API name (gpu_temp, power_usage in mW, ...) in stored units,
//   and under its dcgm-exporter name (DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_POWER_USAGE in W, ...)
//   in dcgm-exporter's units, so that rules written for dcgm-exporter carry over (a field
//   dcgm-exporter lacks: gpufleet_gpu_<name>, as /metrics and remote write name it): one row per
//   GPU with the labels Hostname, gpu, UUID, modelName, cluster, pool;
// - per GPU, from the health model: gpu_health (0 healthy, 1 warning, 2 failed), gpu_healthy
//   (1 or 0) and gpu_available (1: healthy on a ready node, so a job could use it);
// - xid_events: the GPU's XID errors, a range only, for count_over_time; matchers on xid,
//   severity and action select events (from the XID catalogue), the others select GPUs;
// - per node (Hostname, cluster, pool): node_up (heartbeat or scrape within the limit),
//   node_health (0 ready, 1 degraded, 2 unhealthy), node_cordoned, node_report_age_seconds,
//   node_rollout_failed (1: the node failed its update in a rollout, within the last hour),
//   node_cve_max_cvss (the highest CVSS of the published CVEs the node is exposed to; 0: none),
//   node_drift_severity (its unresolved drift findings' highest severity: 4 critical, 3 high,
//   2 medium, 1 low; 0: none);
// - per pool (cluster, pool, team): pool_free_gpus (available GPUs no job holds),
//   pool_allocated_gpus, pool_queued_jobs, pool_queue_wait_p95_seconds (the last hour's starts'
//   waits and the queued jobs' waits so far);
// - every GPU, node and pool row also carries `team`, its pool's owner, when it has one;
// - the controller's own (no labels): api_request_duration_p99_seconds over the last cycle,
//   rollouts_halted (rollouts halted, rolling back, or rolled back within the last hour).

#include <optional>
#include <string_view>
#include <vector>

#include "model/telemetry.h"

namespace gpufleet::alerting {

enum class RowKind { kGpu, kNode, kPool, kController };

enum class Special {
  kNone,  // a telemetry field
  kGpuHealth,
  kGpuHealthy,
  kGpuAvailable,
  kXidEvents,
  kNodeUp,
  kNodeHealth,
  kNodeCordoned,
  kNodeReportAge,
  kNodeInput,  // contributed by another component, by name (Snapshot::node_inputs)
  kPoolFreeGpus,
  kPoolAllocatedGpus,
  kPoolQueuedJobs,
  kPoolQueueWaitP95,
  kApiP99,
  kControllerInput,  // contributed by another component, by name (Snapshot::controller_inputs)
};

struct MetricDef {
  std::string_view name;
  RowKind rows = RowKind::kGpu;
  Special special = Special::kNone;
  Field field = Field::kGpuUtil;  // when special is kNone
  double scale = 1;               // stored value x scale = the rule's value
  std::string_view help;
};

std::optional<MetricDef> FindMetric(std::string_view name);
// Every name, for `gpufleet rules metrics` and the docs.
std::vector<MetricDef> AllMetrics();

// The labels each kind of row carries.
const std::vector<std::string_view>& RowLabels(RowKind kind);

}  // namespace gpufleet::alerting
