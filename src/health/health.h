#pragma once
// The health model: each GPU's health (healthy, warning, failed) with its reasons, from its
// latest telemetry, its recent XID errors and its NVML state; and each node's (ready, degraded,
// unhealthy) from its GPUs and its reachability. Pure functions: the inputs are gathered by
// HealthService, which also keeps the recent XIDs.

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "model/telemetry.h"
#include "model/types.h"
#include "model/xid_catalog.h"
#include "tsdb/series.h"

namespace gpufleet::health {

enum class Level { kHealthy, kWarning, kFailed };
std::string_view ToString(Level level);

struct Reason {
  std::string check;  // "xid", "ecc_dbe", "row_remap", "temperature", "throttle", ...
  Level level = Level::kWarning;
  std::string message;  // "XID 79 GPU_HAS_FALLEN_OFF_THE_BUS at 2026-11-29T19:40:01Z"
  std::string action;   // from kActions
};

struct XidSeen {
  int64_t time_ms = 0;
  int xid = 0;
};

struct Thresholds {
  double temperature_warning_margin_c = 5;  // warning this close to the model's maximum
  double pcie_replays_per_minute = 10;      // warning above this rate
  double sbe_per_hour = 100;                // warning above this rate of single-bit errors
};

struct GpuInputs {
  Gpu gpu;
  std::array<std::optional<tsdb::Sample>, kFieldCount> latest;
  std::vector<XidSeen> xids;                   // recent, any order
  std::optional<double> pcie_replays_per_min;  // over the last minutes, when known
  std::optional<double> sbe_per_hour;
  int max_temp_c = 0;  // the model's maximum operating temperature; 0 when unknown
};

struct GpuHealth {
  int index = 0;
  std::string uuid;
  std::string model;  // catalogue id, empty if none
  Level level = Level::kHealthy;
  std::vector<Reason> reasons;
};

struct NodeHealth {
  std::string node, cluster, pool;
  NodeState health = NodeState::kReady;  // ready, degraded or unhealthy
  std::vector<std::string> reasons;
  std::vector<GpuHealth> gpus;
  bool simulated = false;
  bool reachable = true;  // false: no heartbeat or scrape (the first reason says since when)
  NodeState state = NodeState::kReady;  // the node's state when it was evaluated
  int64_t last_seen_ms = 0;             // its last heartbeat or scrape
};

GpuHealth EvaluateGpu(const GpuInputs& in, const XidCatalog& xids, int64_t now,
                      const Thresholds& t = {});

// `reachable` false (no heartbeat or scrape) makes the node unhealthy whatever its GPUs say.
NodeHealth RollUp(const Node& node, std::vector<GpuHealth> gpus, bool reachable);

// Nodes by verdict and GPUs by level, over a fleet, a cluster or a pool. A node asked for and
// not registered yet (provisioning or joining) has no GPUs to judge: it counts as starting, not
// as ready.
struct HealthCounts {
  int nodes = 0, starting = 0, ready = 0, degraded = 0, unhealthy = 0;
  int gpus = 0, healthy = 0, warning = 0, failed = 0;
  void Add(const NodeHealth& n);
};

}  // namespace gpufleet::health
