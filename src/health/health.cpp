#include "health/health.h"

#include <algorithm>

#include "common/clock.h"

namespace gpufleet::health {

std::string_view ToString(Level level) {
  switch (level) {
    case Level::kHealthy:
      return "healthy";
    case Level::kWarning:
      return "warning";
    case Level::kFailed:
      return "failed";
  }
  return "healthy";
}

namespace {

// NVML clock event reasons that mean the hardware is protecting itself.
constexpr uint64_t kSwThermal = 0x20, kHwSlowdown = 0x08, kHwThermal = 0x40, kPowerBrake = 0x80;

std::optional<double> Value(const GpuInputs& in, Field f) {
  const auto& s = in.latest[static_cast<size_t>(f)];
  if (!s) return std::nullopt;
  return s->v;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v == static_cast<int64_t>(v) ? "%.0f" : "%.1f", v);
  return buf;
}

// The newest occurrence of each XID still within its hold, to `add`.
template <class Add>
void CheckXids(const GpuInputs& in, const XidCatalog& catalog, int64_t now, Add add) {
  std::vector<XidSeen> xids = in.xids;
  std::sort(xids.begin(), xids.end(),
            [](const XidSeen& a, const XidSeen& b) { return a.time_ms > b.time_ms; });
  std::vector<int> seen;
  for (const auto& x : xids) {
    if (std::find(seen.begin(), seen.end(), x.xid) != seen.end()) continue;
    seen.push_back(x.xid);
    XidInfo info = catalog.Find(x.xid);
    if (info.severity == XidSeverity::kInfo || now - x.time_ms > info.hold_ms) continue;
    add("xid", info.severity == XidSeverity::kCritical ? Level::kFailed : Level::kWarning,
        "XID " + std::to_string(x.xid) + " " + info.name + " at " + FormatTime(x.time_ms) +
            (info.description.empty() ? "" : ": " + info.description),
        info.action);
  }
}

// The clock event reasons that slow a GPU down, "HW thermal slowdown, HW power brake, " ("").
std::string ThrottleReasons(uint64_t bits) {
  std::string why;
  if (bits & kHwThermal) why += "HW thermal slowdown, ";
  if (bits & kSwThermal) why += "SW thermal slowdown, ";
  if (bits & kPowerBrake) why += "HW power brake, ";
  if (bits & kHwSlowdown) why += "HW slowdown, ";
  return why;
}

}  // namespace

GpuHealth EvaluateGpu(const GpuInputs& in, const XidCatalog& catalog, int64_t now,
                      const Thresholds& t) {
  GpuHealth out;
  out.index = in.gpu.index;
  out.uuid = in.gpu.uuid;
  out.model = in.gpu.model;
  auto add = [&](std::string check, Level level, std::string message, std::string action) {
    out.reasons.push_back({std::move(check), level, std::move(message), std::move(action)});
    out.level = std::max(out.level, level);
  };
  if (!in.gpu.error.empty()) {
    add("nvml", Level::kFailed, "NVML reports " + in.gpu.error,
        in.gpu.error == "GPU_IS_LOST" ? "reboot_node" : "reset_gpu");
  }
  CheckXids(in, catalog, now, add);
  if (auto dbe = Value(in, Field::kEccDbeVolatile); dbe && *dbe > 0) {
    add("ecc_dbe", Level::kFailed, Num(*dbe) + " double-bit ECC error(s) since the driver loaded",
        "reset_gpu");
  }
  if (auto fail = Value(in, Field::kRemapFailure); fail && *fail > 0) {
    add("row_remap", Level::kFailed, "row remapping failed", "rma_candidate");
  }
  if (auto pending = Value(in, Field::kRemapPending); pending && *pending > 0) {
    add("row_remap", Level::kWarning, "row remap pending: a GPU reset applies it", "reset_gpu");
  }
  if (auto pending = Value(in, Field::kRetiredPending); pending && *pending > 0) {
    add("retired_pages", Level::kWarning, "page retirement pending: a GPU reset applies it",
        "reset_gpu");
  }
  if (auto temp = Value(in, Field::kGpuTemp); temp && in.max_temp_c > 0) {
    if (*temp >= in.max_temp_c) {
      add("temperature", Level::kFailed,
          Num(*temp) + " C at or above the model's limit of " + std::to_string(in.max_temp_c) +
              " C",
          "check_hardware");
    } else if (*temp >= in.max_temp_c - t.temperature_warning_margin_c) {
      add("temperature", Level::kWarning,
          Num(*temp) + " C within " + Num(t.temperature_warning_margin_c) +
              " C of the model's limit of " + std::to_string(in.max_temp_c) + " C",
          "check_hardware");
    }
  }
  if (auto reasons = Value(in, Field::kClocksEventReasons)) {
    std::string why = ThrottleReasons(static_cast<uint64_t>(*reasons));
    if (!why.empty()) {
      why.resize(why.size() - 2);
      add("throttle", Level::kWarning, "clocks held down: " + why, "check_hardware");
    }
  }
  if (auto power = Value(in, Field::kPowerUsage), limit = Value(in, Field::kPowerLimit);
      power && limit && *limit > 0 && *power > *limit * 1.05) {
    add("power", Level::kWarning,
        Num(*power / 1000) + " W above the enforced limit of " + Num(*limit / 1000) + " W",
        "check_hardware");
  }
  if (auto down = Value(in, Field::kNvlinkLinksDown); down && *down > 0) {
    add("nvlink", Level::kFailed, Num(*down) + " NVLink link(s) down", "check_nvlink");
  }
  if (in.pcie_replays_per_min && *in.pcie_replays_per_min > t.pcie_replays_per_minute) {
    add("pcie", Level::kWarning,
        Num(*in.pcie_replays_per_min) + " PCIe replays per minute (threshold " +
            Num(t.pcie_replays_per_minute) + ")",
        "check_hardware");
  }
  if (in.sbe_per_hour && *in.sbe_per_hour > t.sbe_per_hour) {
    add("ecc_sbe", Level::kWarning,
        Num(*in.sbe_per_hour) + " single-bit ECC errors per hour (threshold " +
            Num(t.sbe_per_hour) + ")",
        "none");
  }
  return out;
}

NodeHealth RollUp(const Node& node, std::vector<GpuHealth> gpus, bool reachable) {
  NodeHealth out;
  out.node = node.name;
  out.cluster = node.cluster;
  out.pool = node.pool;
  out.simulated = node.simulated;
  out.reachable = reachable;
  out.state = node.state;
  out.last_seen_ms = node.last_seen_ms;
  if (!reachable) {
    out.health = NodeState::kUnhealthy;
    out.reasons.push_back("unreachable: " + node.reason);
  }
  for (const auto& g : gpus) {
    if (g.level == Level::kHealthy) continue;
    if (g.level == Level::kFailed) out.health = NodeState::kUnhealthy;
    if (g.level == Level::kWarning && out.health == NodeState::kReady) {
      out.health = NodeState::kDegraded;
    }
    for (const auto& r : g.reasons) {
      out.reasons.push_back("GPU " + std::to_string(g.index) + " " +
                            std::string(ToString(r.level)) + ": " + r.message);
    }
  }
  out.gpus = std::move(gpus);
  return out;
}

void HealthCounts::Add(const NodeHealth& n) {
  ++nodes;
  if (n.state == NodeState::kProvisioning || n.state == NodeState::kJoining) {
    ++starting;
  } else {
    ready += n.health == NodeState::kReady;
    degraded += n.health == NodeState::kDegraded;
    unhealthy += n.health == NodeState::kUnhealthy;
  }
  for (const auto& g : n.gpus) {
    ++gpus;
    healthy += g.level == Level::kHealthy;
    warning += g.level == Level::kWarning;
    failed += g.level == Level::kFailed;
  }
}

}  // namespace gpufleet::health
