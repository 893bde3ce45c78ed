#include "health/service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "common/strings.h"

namespace gpufleet::health {
namespace {

// The increase of a counter over the minute rollups of [start, now], per `per_ms`.
std::optional<double> Rate(const TelemetryStore& telemetry, const std::string& uuid,
                           TelemetryStore::GpuHandle handle, Field field, int64_t now,
                           int64_t window_ms, int64_t per_ms) {
  auto buckets =
      telemetry.Range(uuid, handle, field, tsdb::Resolution::kMinute, now - window_ms, now + 1);
  if (buckets.size() < 2) return std::nullopt;
  double increase = buckets.back().max - buckets.front().min;
  double span = static_cast<double>(buckets.back().start - buckets.front().start + 60'000);
  return std::max(0.0, increase) * static_cast<double>(per_ms) / span;
}

}  // namespace

HealthService::HealthService(FleetService& fleet, TelemetryStore& telemetry,
                             store::FleetStore& store, store::AuditLog& audit,
                             std::shared_ptr<const GpuCatalog> gpus,
                             std::shared_ptr<const XidCatalog> xids, std::shared_ptr<Clock> clock,
                             Thresholds thresholds)
    : fleet_(fleet),
      telemetry_(telemetry),
      store_(store),
      audit_(audit),
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
  // A GPU reset (or its node's reboot) by remediation ends what the XIDs before it meant.
  auto resets = store_.ListGpuEvents("", "reset", 100'000);
  if (!resets.ok()) return resets.error();
  std::map<std::string, int64_t> reset_at;
  for (const auto& r : resets.value()) {
    reset_at[r.uuid] = std::max(reset_at[r.uuid], r.time_ms);
  }
  int64_t since = clock_->NowMs() - max_hold_ms_;
  std::lock_guard lock(mu_);
  for (const auto* list : {&events.value(), &resets.value()}) {
    if (!list->empty()) last_event_id_ = std::max(last_event_id_, list->front().id);  // newest
  }
  for (const auto& e : events.value()) {
    if (e.time_ms < since || e.uuid.empty()) continue;
    if (auto r = reset_at.find(e.uuid); r != reset_at.end() && e.time_ms <= r->second) continue;
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
  AddXidLocked(uuid, time_ms, xid);
}

Status HealthService::TakeEvents() {
  int64_t after = 0;
  {
    std::lock_guard lock(mu_);
    after = last_event_id_;
  }
  for (;;) {
    constexpr int kPage = 10'000;
    auto events = store_.ListGpuEventsAfter(after, kPage);
    if (!events.ok()) return events.error();
    std::lock_guard lock(mu_);
    for (const auto& e : events.value()) {
      after = std::max(after, e.id);
      if (e.uuid.empty()) continue;
      if (e.kind == "xid") AddXidLocked(e.uuid, e.time_ms, static_cast<int>(e.value));
      if (e.kind == "reset") ForgetXidsLocked(e.uuid, e.time_ms);
    }
    last_event_id_ = std::max(last_event_id_, after);
    if (static_cast<int>(events->size()) < kPage) return {};
  }
}

void HealthService::ForgetXidsLocked(const std::string& uuid, int64_t until_ms) {
  auto it = recent_.find(uuid);
  if (it == recent_.end()) return;
  ++xid_changes_;
  std::erase_if(it->second, [&](const XidSeen& x) { return x.time_ms <= until_ms; });
}

void HealthService::AddXidLocked(const std::string& uuid, int64_t time_ms, int xid) {
  auto& list = recent_[uuid];
  for (const auto& x : list) {
    if (x.time_ms == time_ms && x.xid == xid) return;  // heard here and read from the store
  }
  list.push_back({time_ms, xid});
  ++xid_changes_;
  // Forget what no hold can reach any more; keep the list short for a flapping GPU.
  int64_t since = clock_->NowMs() - max_hold_ms_;
  list.erase(
      std::remove_if(list.begin(), list.end(), [&](const XidSeen& x) { return x.time_ms < since; }),
      list.end());
  if (list.size() > 256) list.erase(list.begin(), list.end() - 256);
}

std::vector<NodeHealth> HealthService::Evaluate(const NodeFilter& filter) const {
  return Evaluate(filter, fleet_.HeldElsewhere());
}

std::vector<NodeHealth> HealthService::Reports(const NodeFilter& filter,
                                               int64_t* evaluated_ms) const {
  const int64_t max_age_ms = max_answer_age_ms_.load();
  std::shared_ptr<const LastEvaluation> last;
  uint64_t xid_changes = 0;
  {
    std::lock_guard lock(mu_);
    last = last_;
    xid_changes = xid_changes_;
  }
  const int64_t now = clock_->NowMs();
  // The last evaluation names each node's cluster and pool; a filter on anything else (state,
  // model) is the fleet's to apply.
  const bool current = max_age_ms > 0 && last && now - last->at_ms <= max_age_ms &&
                       last->xid_changes == xid_changes &&
                       last->fleet_changes == fleet_.changes() && filter.state.empty() &&
                       filter.model.empty();
  if (!current) {
    if (evaluated_ms) *evaluated_ms = now;
    return Evaluate(filter);
  }
  if (evaluated_ms) *evaluated_ms = last->at_ms;
  auto allowed = [&](const std::string& cluster) {
    return filter.clusters.empty() || std::find(filter.clusters.begin(), filter.clusters.end(),
                                                cluster) != filter.clusters.end();
  };
  std::vector<NodeHealth> out;
  for (const NodeHealth& n : last->nodes) {
    if ((!filter.name.empty() && n.node != filter.name) ||
        (!filter.cluster.empty() && n.cluster != filter.cluster) ||
        (!filter.pool.empty() && n.pool != filter.pool) || !allowed(n.cluster)) {
      continue;
    }
    out.push_back(n);
  }
  return out;
}

std::vector<NodeHealth> HealthService::Evaluate(const NodeFilter& filter,
                                                const std::set<std::string>& away) const {
  std::vector<Node> nodes = fleet_.Nodes(filter);
  int64_t now = clock_->NowMs();
  std::vector<NodeHealth> out;
  out.reserve(nodes.size());
  std::vector<const std::string*> uuids;
  std::vector<TelemetryStore::GpuHandle> handles;
  for (const Node& node : nodes) {
    // The node's GPUs are looked up in the telemetry store once, then read by handle.
    uuids.clear();
    for (const Gpu& g : node.gpus) uuids.push_back(&g.uuid);
    telemetry_.Handles(uuids, handles);
    std::vector<GpuHealth> gpus;
    for (size_t i = 0; i < node.gpus.size(); ++i) {
      const Gpu& g = node.gpus[i];
      GpuInputs in;
      in.gpu = g;
      in.latest = telemetry_.LatestAll(g.uuid, handles[i]);
      {
        std::lock_guard lock(mu_);
        auto it = recent_.find(g.uuid);
        if (it != recent_.end()) in.xids = it->second;
      }
      in.pcie_replays_per_min =
          Rate(telemetry_, g.uuid, handles[i], Field::kPcieReplay, now, 5 * 60'000, 60'000);
      in.sbe_per_hour =
          Rate(telemetry_, g.uuid, handles[i], Field::kEccSbeVolatile, now, 60 * 60'000, 3'600'000);
      if (const GpuModelSpec* spec = gpus_->Find(g.model))
        in.max_temp_c = spec->max_operating_temp_c;
      gpus.push_back(EvaluateGpu(in, *xids_, now, thresholds_));
    }
    bool reachable = node.state != NodeState::kUnreachable;
    NodeHealth rolled = RollUp(node, std::move(gpus), reachable);
    auto rank = [](NodeState s) {
      return s == NodeState::kUnhealthy ? 2 : s == NodeState::kDegraded ? 1 : 0;
    };
    if (away.count(node.name) && rank(node.state) > rank(rolled.health)) {
      rolled.health = node.state;  // its controller's verdict, from the telemetry it holds
      rolled.reasons.push_back(node.reason);
    }
    out.push_back(std::move(rolled));
  }
  return out;
}

int HealthService::Apply(std::vector<NodeHealth>* reports, bool remediate) {
  int changed = 0;
  auto last = std::make_shared<LastEvaluation>();
  last->at_ms = clock_->NowMs();
  last->fleet_changes = fleet_.changes();
  {
    std::lock_guard lock(mu_);
    last->xid_changes = xid_changes_;
  }
  const std::set<std::string> away = fleet_.HeldElsewhere();
  last->nodes = Evaluate({}, away);
  const std::vector<NodeHealth>& all = last->nodes;
  for (const auto& n : all) {
    if (away.count(n.node)) continue;  // judged where its agent is connected
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
  if (remediate) Remediate(all);
  if (reports) *reports = all;
  std::lock_guard lock(mu_);
  last_ = std::move(last);
  return changed;
}

void HealthService::set_commands(runtime::CommandBus* commands) {
  std::lock_guard lock(mu_);
  commands_ = commands;
}

int HealthService::Remediate(const std::vector<NodeHealth>& reports) {
  auto clusters = fleet_.Clusters();
  if (!clusters.ok()) return 0;
  std::map<std::string, const NodeHealth*> report_of;
  for (const auto& r : reports) report_of[r.node] = &r;
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
      (void)audit_.AppendAudit(a);
      if (!after.ok()) {
        spdlog::error("remediation: {} {}: {}", ToString(action), n.name, after.error().message);
        continue;
      }
      spdlog::warn("remediation: {} {} (unhealthy: {})", ToString(action), n.name, before);
      ++taken;
      ++actions;
    }
    if (policy.reset_gpu || policy.reboot_node) {
      for (const Node& n : nodes) {
        auto report = report_of.find(n.name);
        if (!by_remediation(n) || report == report_of.end()) continue;
        actions += AskAgent(c, n, *report->second, kMaxActionsPerCycle - actions);
      }
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

// The failed GPUs' recommended actions that the policy allows, asked of the node's agent.
int HealthService::AskAgent(const Cluster& cluster, const Node& node, const NodeHealth& report,
                            int budget) {
  int asked = 0;
  int64_t now = clock_->NowMs();
  for (const auto& g : report.gpus) {
    if (g.level != Level::kFailed || asked >= budget) continue;
    std::string action;
    for (const auto& r : g.reasons) {
      if (r.level != Level::kFailed) continue;
      if (r.action == "reboot_node" && cluster.remediation.reboot_node) action = "reboot_node";
      if (r.action == "reset_gpu" && cluster.remediation.reset_gpu && action.empty()) {
        action = "reset_gpu";
      }
    }
    if (action.empty()) continue;
    std::string key = action == "reboot_node" ? "node/" + node.name : g.uuid;
    proto::Command cmd;
    runtime::CommandBus* commands;
    {
      std::lock_guard lock(mu_);
      auto last = asked_.find(key);
      if (!commands_ || (last != asked_.end() && now - last->second < 3'600'000)) continue;
      asked_[key] = now;
      commands = commands_;
    }
    cmd.gpu = g.index;
    cmd.action = action;
    Status sent = commands->Send(node.name, cmd, this);
    AuditRecord a;
    a.time_ms = now;
    a.actor = "remediation";
    a.action = action + " GPU " + std::to_string(g.index) + " (cluster " + cluster.name +
               " remediation policy)";
    a.target = "node/" + node.name;
    a.status = sent.ok() ? 202 : 503;
    a.result = sent.ok() ? "asked the agent (command " + std::to_string(cmd.id) + ")"
                         : sent.error().message;
    (void)audit_.AppendAudit(a);
    spdlog::warn("remediation: asked {} to {} GPU {}: {}", node.name, action, g.index, a.result);
    ++asked;
  }
  return asked;
}

void HealthService::OnResult(const std::string& node, const proto::CommandResult& result) {
  int64_t now = clock_->NowMs();
  AuditRecord a;
  a.time_ms = now;
  a.actor = "agent";
  a.action = result.action + " GPU " + std::to_string(result.gpu) + " (command " +
             std::to_string(result.id) + ")";
  a.target = "node/" + node;
  a.status = result.ok ? 200 : 500;
  a.result = (result.ok ? "ok: " : "failed: ") + result.message.substr(0, 500);
  (void)audit_.AppendAudit(a);
  if (!result.ok) {
    spdlog::error("remediation: {} of GPU {} on {} failed: {}", result.action, result.gpu, node,
                  Printable(result.message, 400));
    return;
  }
  spdlog::warn("remediation: {} of GPU {} on {} done: {}", result.action, result.gpu, node,
               Printable(result.message, 400));
  OnReset(node, result.action == "reset_gpu" ? result.gpu : -1);
}

void HealthService::OnReset(const std::string& node, int gpu) {
  int64_t now = clock_->NowMs();
  // Stored as a GPU event too, so that after a restart the XIDs before it still do not count.
  std::vector<std::string> uuids = fleet_.GpuUuids(node);
  std::vector<GpuEventRecord> events;
  for (size_t i = 0; i < uuids.size(); ++i) {
    if (gpu >= 0 && static_cast<int>(i) != gpu) continue;
    events.push_back({0, now, node, static_cast<int>(i), uuids[i], "reset", 1});
  }
  (void)store_.AppendGpuEvents(events);
  std::lock_guard lock(mu_);
  for (const auto& e : events) ForgetXidsLocked(e.uuid, now);
}

std::map<std::string, bool> HealthService::Breakers() const {
  std::lock_guard lock(mu_);
  return breaker_open_;
}

}  // namespace gpufleet::health
