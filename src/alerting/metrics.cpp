#include "alerting/metrics.h"

#include <array>
#include <string>

namespace gpufleet::alerting {
namespace {

const std::vector<MetricDef>& Specials() {
  static const std::vector<MetricDef> kSpecials = {
      {"gpu_health", RowKind::kGpu, Special::kGpuHealth, Field::kGpuUtil, 1,
       "The GPU's health: 0 healthy, 1 warning, 2 failed."},
      {"gpu_healthy", RowKind::kGpu, Special::kGpuHealthy, Field::kGpuUtil, 1,
       "1 when the GPU is healthy, else 0."},
      {"gpu_available", RowKind::kGpu, Special::kGpuAvailable, Field::kGpuUtil, 1,
       "1 when the GPU is healthy on a ready node (not cordoned, draining or unreachable)."},
      {"xid_events", RowKind::kGpu, Special::kXidEvents, Field::kGpuUtil, 1,
       "The GPU's XID errors; a range for count_over_time, matchers on xid, severity, action."},
      {"node_up", RowKind::kNode, Special::kNodeUp, Field::kGpuUtil, 1,
       "1 when the node's agent or exporter reported within the limit, else 0."},
      {"node_health", RowKind::kNode, Special::kNodeHealth, Field::kGpuUtil, 1,
       "The node's health: 0 ready, 1 degraded, 2 unhealthy."},
      {"node_cordoned", RowKind::kNode, Special::kNodeCordoned, Field::kGpuUtil, 1,
       "1 when the node is cordoned or draining, else 0."},
      {"node_report_age_seconds", RowKind::kNode, Special::kNodeReportAge, Field::kGpuUtil, 1,
       "Seconds since the node's last heartbeat or scrape."},
      {"node_rollout_failed", RowKind::kNode, Special::kNodeInput, Field::kGpuUtil, 1,
       "1 when the node failed its update in a rollout (not ended, or ended within the hour)."},
      {"node_cve_max_cvss", RowKind::kNode, Special::kNodeInput, Field::kGpuUtil, 1,
       "The highest CVSS score of the published CVEs the node is exposed to; 0 when none."},
      {"node_drift_severity", RowKind::kNode, Special::kNodeInput, Field::kGpuUtil, 1,
       "The highest severity of the node's unresolved drift from its profile: 4 critical, 3 "
       "high, 2 medium, 1 low; 0 when none."},
      {"pool_free_gpus", RowKind::kPool, Special::kPoolFreeGpus, Field::kGpuUtil, 1,
       "GPUs of the pool that a job could be placed on now: available (as gpu_available) and "
       "held by no job."},
      {"pool_allocated_gpus", RowKind::kPool, Special::kPoolAllocatedGpus, Field::kGpuUtil, 1,
       "GPUs of the pool that jobs hold."},
      {"pool_queued_jobs", RowKind::kPool, Special::kPoolQueuedJobs, Field::kGpuUtil, 1,
       "Jobs waiting in the pool's queue."},
      {"pool_queue_wait_p95_seconds", RowKind::kPool, Special::kPoolQueueWaitP95, Field::kGpuUtil,
       1,
       "The 95th percentile of the pool's queue waits over the last hour, in seconds: the waits "
       "of the jobs that started and the waits so far of those still queued; 0 when none."},
      {"api_request_duration_p99_seconds", RowKind::kController, Special::kApiP99, Field::kGpuUtil,
       1, "The 99th percentile of the API's request durations since the last evaluation."},
      {"rollouts_halted", RowKind::kController, Special::kControllerInput, Field::kGpuUtil, 1,
       "Rollouts halted or rolling back, and those rolled back within the last hour."},
  };
  return kSpecials;
}

}  // namespace

// The name /metrics and remote write give each field: dcgm-exporter's, else gpufleet_gpu_<name>.
std::string_view ExposedName(const FieldInfo& f) {
  static const auto kNames = [] {
    std::array<std::string, kFieldCount> out;
    for (const auto& i : Fields()) {
      out[static_cast<size_t>(i.field)] =
          i.dcgm_name.empty() ? "gpufleet_gpu_" + std::string(i.name) : std::string(i.dcgm_name);
    }
    return out;
  }();
  return kNames[static_cast<size_t>(f.field)];
}

std::optional<MetricDef> FindMetric(std::string_view name) {
  for (const auto& f : Fields()) {
    if (f.name == name) return MetricDef{f.name, RowKind::kGpu, Special::kNone, f.field, 1, f.help};
    if (ExposedName(f) == name) {
      return MetricDef{ExposedName(f), RowKind::kGpu,   Special::kNone,
                       f.field,        f.metrics_scale, f.help};
    }
  }
  for (const auto& m : Specials()) {
    if (m.name == name) return m;
  }
  return std::nullopt;
}

std::vector<MetricDef> AllMetrics() {
  std::vector<MetricDef> out;
  for (const auto& f : Fields()) {
    out.push_back({f.name, RowKind::kGpu, Special::kNone, f.field, 1, f.help});
  }
  for (const auto& f : Fields()) {
    out.push_back(
        {ExposedName(f), RowKind::kGpu, Special::kNone, f.field, f.metrics_scale, f.help});
  }
  for (const auto& m : Specials()) out.push_back(m);
  return out;
}

const std::vector<std::string_view>& RowLabels(RowKind kind) {
  static const std::vector<std::string_view> kGpu = {"Hostname",  "UUID", "cluster", "gpu",
                                                     "modelName", "pool", "team"};
  static const std::vector<std::string_view> kNode = {"Hostname", "cluster", "pool", "team"};
  static const std::vector<std::string_view> kPool = {"cluster", "pool", "team"};
  static const std::vector<std::string_view> kNone = {};
  switch (kind) {
    case RowKind::kGpu:
      return kGpu;
    case RowKind::kNode:
      return kNode;
    case RowKind::kPool:
      return kPool;
    case RowKind::kController:
      return kNone;
  }
  return kNone;
}

}  // namespace gpufleet::alerting
