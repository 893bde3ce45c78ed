#include "health/service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace gpufleet::health {
namespace {

// The increase of a counter over the minute rollups of [start, now], per `per_ms`.
std::optional<double> Rate(const TelemetryStore& telemetry, const std::string& uuid, Field field,
                           int64_t now, int64_t window_ms, int64_t per_ms) {
  auto buckets = telemetry.Range(uuid, field, tsdb::Resolution::kMinute, now - window_ms, now + 1);
  if (buckets.size() < 2) return std::nullopt;
  double increase = buckets.back().max - buckets.front().min;
  double span = static_cast<double>(buckets.back().start - buckets.front().start + 60'000);
  return std::max(0.0, increase) * static_cast<double>(per_ms) / span;
}

}  // namespace

HealthService::HealthService(FleetService& fleet, TelemetryStore& telemetry, Store& store,
                             std::shared_ptr<const GpuCatalog> gpus,
                             std::shared_ptr<const XidCatalog> xids, std::shared_ptr<Clock> clock,
                             Thresholds thresholds)
    : fleet_(fleet),
      telemetry_(telemetry),
      store_(store),
      gpus_(std::move(gpus)),
      xids_(std::move(xids)),
      clock_(std::move(clock)),
      thresholds_(thresholds) {
  for (const auto& x : xids_->all()) max_hold_ms_ = std::max(max_hold_ms_, x.hold_ms);
  // Unknown XIDs are held 10 minutes; alert rules count XIDs over windows up to 24 h.
  max_hold_ms_ = std::max<int64_t>(max_hold_ms_, 24 * 3'600'000);
}

Status HealthService::Load() {
  auto events = store_.ListGpuEvents("", "xid", 100'000);
  if (!events.ok()) return events.error();
  int64_t since = clock_->NowMs() - max_hold_ms_;
  std::lock_guard lock(mu_);
  for (const auto& e : events.value()) {
    if (e.time_ms < since || e.uuid.empty()) continue;
    recent_[e.uuid].push_back({e.time_ms, static_cast<int>(e.value)});
  }
  return {};
}

std::map<std::string, std::vector<XidSeen>> HealthService::RecentXids() const {
  std::lock_guard lock(mu_);
  return recent_;
}

void HealthService::OnXid(const std::string& uuid, int64_t time_ms, int xid) {
  std::lock_guard lock(mu_);
  auto& list = recent_[uuid];
  list.push_back({time_ms, xid});
  // Forget what no hold can reach any more; keep the list short for a flapping GPU.
  int64_t since = clock_->NowMs() - max_hold_ms_;
  list.erase(
      std::remove_if(list.begin(), list.end(), [&](const XidSeen& x) { return x.time_ms < since; }),
      list.end());
  if (list.size() > 256) list.erase(list.begin(), list.end() - 256);
}

std::vector<NodeHealth> HealthService::Evaluate(const NodeFilter& filter) const {
  std::vector<Node> nodes = fleet_.Nodes(filter);
  int64_t now = clock_->NowMs();
  std::vector<NodeHealth> out;
  out.reserve(nodes.size());
  for (const Node& node : nodes) {
    std::vector<GpuHealth> gpus;
    for (const Gpu& g : node.gpus) {
      GpuInputs in;
      in.gpu = g;
      in.latest = telemetry_.LatestAll(g.uuid);
      {
        std::lock_guard lock(mu_);
        auto it = recent_.find(g.uuid);
        if (it != recent_.end()) in.xids = it->second;
      }
      in.pcie_replays_per_min =
          Rate(telemetry_, g.uuid, Field::kPcieReplay, now, 5 * 60'000, 60'000);
      in.sbe_per_hour =
          Rate(telemetry_, g.uuid, Field::kEccSbeVolatile, now, 60 * 60'000, 3'600'000);
      if (const GpuModelSpec* spec = gpus_->Find(g.model))
        in.max_temp_c = spec->max_operating_temp_c;
      gpus.push_back(EvaluateGpu(in, *xids_, now, thresholds_));
    }
    bool reachable = node.state != NodeState::kUnreachable;
    out.push_back(RollUp(node, std::move(gpus), reachable));
  }
  return out;
}

int HealthService::Apply(std::vector<NodeHealth>* reports) {
  int changed = 0;
  std::vector<NodeHealth> all = Evaluate({});
  for (const auto& n : all) {
    // Unreachability has its own state; the verdict here is about the GPUs.
    NodeState verdict = NodeState::kReady;
    std::string reason;
    for (const auto& g : n.gpus) {
      if (g.level == Level::kFailed) verdict = NodeState::kUnhealthy;
      if (g.level == Level::kWarning && verdict == NodeState::kReady) {
        verdict = NodeState::kDegraded;
      }
      for (const auto& r : g.reasons) {
        reason +=
            (reason.empty() ? "" : "; ") + ("GPU " + std::to_string(g.index) + ": " + r.message);
      }
    }
    auto result = fleet_.SetHealth(n.node, verdict, reason);
    if (!result.ok()) {
      spdlog::error("health: node {}: {}", n.node, result.error().message);
    } else if (result.value()) {
      ++changed;
      if (verdict != NodeState::kReady) {
        spdlog::warn("health: {} is {}: {}", n.node, ToString(verdict), reason);
      } else {
        spdlog::info("health: {} is healthy again", n.node);
      }
    }
  }
  Remediate();
  if (reports) *reports = std::move(all);
  return changed;
}

int HealthService::Remediate() {
  auto clusters = fleet_.Clusters();
  if (!clusters.ok()) return 0;
  int actions = 0;
  for (const Cluster& c : clusters.value()) {
    const Remediation& policy = c.remediation;
    if (!policy.cordon_unhealthy && !policy.drain_unhealthy) continue;
    NodeFilter filter;
    filter.cluster = c.name;
    std::vector<Node> nodes = fleet_.Nodes(filter);
    auto by_remediation = [](const Node& n) {
      bool out = n.state == NodeState::kCordoned || n.state == NodeState::kDraining ||
                 n.state == NodeState::kDrained;
      return out && n.reason.find("by remediation") != std::string::npos;
    };
    int taken = static_cast<int>(std::count_if(nodes.begin(), nodes.end(), by_remediation));
    int limit = std::max(1, static_cast<int>(policy.max_share * static_cast<double>(nodes.size())));
    bool held = false;
    for (const Node& n : nodes) {
      if (n.state != NodeState::kUnhealthy) continue;
      if (taken >= limit || actions >= kMaxActionsPerCycle) {
        held = true;
        break;
      }
      NodeAction action = policy.drain_unhealthy ? NodeAction::kDrain : NodeAction::kCordon;
      std::string before = n.reason;
      auto after = fleet_.Act(n.name, action, "remediation");
      AuditRecord a;
      a.time_ms = clock_->NowMs();
      a.actor = "remediation";
      a.action = std::string(ToString(action)) + " (cluster " + c.name + " remediation policy)";
      a.target = "node/" + n.name;
      a.status = after.ok() ? 200 : 409;
      a.result = after.ok() ? "ok" : after.error().message;
      a.before = "{\"state\":\"unhealthy\"}";
      a.after = after.ok() ? "{\"state\":\"" + std::string(ToString(after->state)) + "\"}" : "";
      (void)store_.AppendAudit(a);
      if (!after.ok()) {
        spdlog::error("remediation: {} {}: {}", ToString(action), n.name, after.error().message);
        continue;
      }
      spdlog::warn("remediation: {} {} (unhealthy: {})", ToString(action), n.name, before);
      ++taken;
      ++actions;
    }
    std::lock_guard lock(mu_);
    bool& open = breaker_open_[c.name];
    if (held && !open) {
      spdlog::error(
          "remediation: circuit breaker open in cluster {}: {} of {} nodes already taken out "
          "(max_share {}); unhealthy nodes are left for an operator",
          c.name, taken, nodes.size(), policy.max_share);
    }
    open = held;
  }
  return actions;
}

std::map<std::string, bool> HealthService::Breakers() const {
  std::lock_guard lock(mu_);
  return breaker_open_;
}

}  // namespace gpufleet::health
