#include "lifecycle/drift_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <unordered_map>

#include "common/strings.h"

namespace gpufleet::lifecycle {
namespace {

// An open finding seen again is written at most this often just for its last seen time.
constexpr int64_t kLastSeenWriteMs = 10 * 60'000;
// Resolved findings are kept this long.
constexpr int64_t kResolvedKeepMs = 90LL * 24 * 3600'000;

bool Judged(NodeState s) {
  return s != NodeState::kProvisioning && s != NodeState::kJoining &&
         s != NodeState::kDecommissioning && s != NodeState::kRetired;
}

}  // namespace

int SeverityRank(const std::string& severity) {
  if (severity == "critical") return 4;
  if (severity == "high") return 3;
  if (severity == "medium") return 2;
  if (severity == "low") return 1;
  return 0;
}

DriftService::DriftService(FleetService& fleet, store::DriftStore& store,
                           std::shared_ptr<Clock> clock, store::AuditLog* audit,
                           std::string zoneinfo)
    : fleet_(fleet),
      store_(store),
      clock_(std::move(clock)),
      audit_(audit),
      zoneinfo_(std::move(zoneinfo)) {}

void DriftService::set_commands(runtime::CommandBus* commands) {
  std::lock_guard lock(mu_);
  commands_ = commands;
}

void DriftService::Audit(const std::string& action, const std::string& target, int status,
                         const std::string& result) {
  if (!audit_) return;
  AuditRecord a;
  a.time_ms = clock_->NowMs();
  a.actor = "drift";
  a.action = action;
  a.target = target;
  a.status = status;
  a.result = result;
  if (auto s = audit_->AppendAudit(a); !s.ok()) {
    spdlog::error("drift: auditing '{}': {}", action, s.error().message);
  }
}

bool DriftService::WindowOpen(const Pool& pool, const Cluster* cluster, int64_t now) {
  const auto& windows = !pool.lifecycle.windows.empty() || !cluster ? pool.lifecycle.windows
                                                                    : cluster->lifecycle.windows;
  std::vector<TimeZone> zones;
  for (const auto& w : windows) {
    auto it = zones_.find(w.timezone);
    if (it == zones_.end()) {
      auto z = TimeZone::Load(w.timezone, zoneinfo_);
      if (!z.ok()) return false;  // a zone that cannot be read never opens
      it = zones_.emplace(w.timezone, std::move(z).value()).first;
    }
    zones.push_back(it->second);
  }
  WindowState st = EvaluateWindows(windows, zones, now / 1000);
  return st.always || st.open;
}

// Forgets the attempts of findings that are gone or resolved and times out silent agents;
// returns the nodes being changed, by cluster.
std::map<std::string, std::set<std::string>> DriftService::TrackAttempts(int64_t now) {
  std::map<std::string, std::set<std::string>> busy;  // cluster -> nodes being changed
  std::set<int64_t> live;
  for (const auto& f : findings_) {
    if (f.state != "resolved") live.insert(f.id);
  }
  for (auto it = auto_.begin(); it != auto_.end();) {
    if (!live.count(it->first)) {
      it = auto_.erase(it);
      continue;
    }
    if (it->second.command != 0 && now - it->second.last_ms > kAutoRetryMs) {
      it->second.command = 0;  // no answer: counts as a failed attempt
    }
    ++it;
  }
  for (const auto& f : findings_) {
    auto a = auto_.find(f.id);
    if (a != auto_.end() && a->second.command != 0) busy[f.cluster].insert(f.node);
  }
  return busy;
}

std::vector<DriftService::Dispatch> DriftService::PlanAuto(
    int64_t now, const std::map<std::string, Cluster>& clusters,
    const std::map<std::string, Pool>& pools, const std::map<std::string, int>& cluster_nodes,
    const std::set<std::string>& connected, std::vector<store::DriftRecord>& changed) {
  std::vector<Dispatch> out;
  auto busy = TrackAttempts(now);
  std::set<std::string> held;
  for (auto& f : findings_) {
    if (f.state == "resolved" || f.remediation != "auto" || f.actual == "unknown" || f.gpu < 0) {
      continue;
    }
    AutoAttempt& a = auto_[f.id];
    if (a.command != 0) continue;  // in flight
    auto write = [&] { changed.push_back({f.id, f.node, f.state, DriftFindingJson(f), now}); };
    if (a.attempts >= kAutoAttempts) {
      std::string note = "auto remediation stopped after " + std::to_string(kAutoAttempts) +
                         " attempts; left for an operator";
      if (f.note.rfind(note, 0) != 0 || f.state != "open") {
        f.note = note + (f.note.empty() ? "" : " (last: " + f.note + ")");
        f.state = "open";
        write();
      }
      continue;
    }
    if (a.last_ms != 0 && now - a.last_ms < kAutoRetryMs) continue;
    if (!connected.count(f.node)) continue;
    auto pool = pools.find(f.pool);
    if (pool == pools.end()) continue;
    auto cluster = clusters.find(f.cluster);
    const Cluster* c = cluster == clusters.end() ? nullptr : &cluster->second;
    if ((f.fact == "ecc_mode" || f.fact == "mig_mode") && !WindowOpen(pool->second, c, now)) {
      const std::string note = "waiting for a maintenance window (the change needs a GPU reset)";
      if (f.note != note) {
        f.note = note;
        write();
      }
      continue;
    }
    // The circuit breaker: a node already being changed may take more; a new one only while
    // the cluster is under its share.
    double share = c ? c->remediation.max_share : Remediation{}.max_share;
    auto nodes = cluster_nodes.find(f.cluster);
    int total = nodes == cluster_nodes.end() ? 1 : nodes->second;
    int limit = std::max(1, static_cast<int>(share * total));
    auto& changing = busy[f.cluster];
    if (!changing.count(f.node) && static_cast<int>(changing.size()) >= limit) {
      held.insert(f.cluster);
      continue;
    }
    changing.insert(f.node);
    proto::Command cmd;
    cmd.id = commands_->Issue(this);
    cmd.gpu = f.gpu;
    cmd.action = std::string(proto::kApplySettingAction);
    cmd.args = {f.fact, f.expected};
    a.attempts++;
    a.last_ms = now;
    a.command = cmd.id;
    a.node = f.node;
    f.state = "remediating";
    f.note = "attempt " + std::to_string(a.attempts) + ": asked the agent to set " + f.fact +
             " to " + f.expected;
    write();
    out.push_back({f, std::move(cmd)});
  }
  for (const auto& c : held) {
    if (!breaker_open_.count(c)) {
      spdlog::warn(
          "drift: circuit breaker open in cluster {}: its share of nodes being changed is "
          "reached; the other auto findings wait",
          c);
    }
  }
  breaker_open_ = std::move(held);
  return out;
}

void DriftService::OnResult(const std::string& node, const proto::CommandResult& result) {
  std::string what;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, a] : auto_) {
      if (a.command != result.id || a.node != node) continue;
      a.command = 0;
      for (auto& f : findings_) {
        if (f.id != id) continue;
        f.note = "attempt " + std::to_string(a.attempts) + (result.ok ? ": done: " : ": failed: ") +
                 result.message;
        if (!result.ok) f.state = "open";
        what = f.fact + " GPU " + std::to_string(f.gpu);
        auto s = store_.SaveDriftFindings(
            {{f.id, f.node, f.state, DriftFindingJson(f), clock_->NowMs()}});
        if (!s.ok()) spdlog::warn("drift: saving finding {}: {}", f.id, s.error().message);
      }
    }
  }
  if (what.empty()) return;
  Audit("drift auto remediation result: " + what, "node/" + node, result.ok ? 200 : 409,
        result.message);
  spdlog::info("drift: {} {}: {}", node, what, Printable(result.message, 400));
}

Status DriftService::Load() {
  auto records = store_.ListDriftFindings();
  if (!records.ok()) return records.error();
  std::lock_guard lock(mu_);
  findings_.clear();
  for (const auto& r : records.value()) {
    auto f = ParseDriftFinding(r.doc);
    if (!f.ok()) return f.error();
    f->id = r.id;
    f->state = r.state;
    findings_.push_back(std::move(f).value());
    next_id_ = std::max(next_id_, r.id + 1);
  }
  return {};
}

Result<Profile> DriftService::PoolProfile(const std::string& pool) const {
  auto pools = fleet_.Pools();
  if (!pools.ok()) return pools.error();
  auto clusters = fleet_.Clusters();
  if (!clusters.ok()) return clusters.error();
  for (const auto& p : pools.value()) {
    if (p.name != pool) continue;
    for (const auto& c : clusters.value()) {
      if (c.name == p.cluster) return Merge(c.lifecycle.profile, p.lifecycle.profile);
    }
    return p.lifecycle.profile;
  }
  return MakeError(ErrorCode::kNotFound, "no pool '" + pool + "'");
}

Result<Profile> DriftService::NodeProfile(const std::string& node, const std::string& pool) const {
  auto profile = PoolProfile(pool);
  if (!profile.ok() || profile->overrides.empty()) return profile;
  auto n = fleet_.GetNode(node);
  return ForNode(profile.value(), n.ok() ? n->facts.labels : Labels{});
}

Result<int> DriftService::Tick() {
  const int64_t now = clock_->NowMs();
  auto pools = fleet_.Pools();
  if (!pools.ok()) return pools.error();
  auto clusters = fleet_.Clusters();
  if (!clusters.ok()) return clusters.error();
  std::unordered_map<std::string, Profile> profiles;  // pool -> profile in effect
  for (const auto& p : pools.value()) {
    Profile base;
    for (const auto& c : clusters.value()) {
      if (c.name == p.cluster) base = c.lifecycle.profile;
    }
    profiles[p.name] = Merge(base, p.lifecycle.profile);
  }
  // Outside mu_: the registry's lock is not held while this one is (see the header).
  std::vector<DriftFinding> seen;
  std::unordered_map<std::string, bool> judged;  // node -> compared this tick
  std::map<std::string, int> cluster_nodes;
  std::set<std::string> connected;
  std::unordered_map<std::string, std::string> node_driver;  // where an override changes it
  fleet_.ForEachNode({}, [&](const Node& n) {
    ++cluster_nodes[n.cluster];
    if (n.connected) connected.insert(n.name);
    auto p = profiles.find(n.pool);
    if (!Judged(n.state) || p == profiles.end()) return;
    judged[n.name] = true;
    if (p->second.empty()) return;
    std::vector<DriftFinding> found;
    if (p->second.overrides.empty()) {
      found = EvaluateDrift(p->second, n);
    } else {  // the overrides its labels select
      Profile mine = ForNode(p->second, n.facts.labels);
      if (mine.driver_version != p->second.driver_version) {
        node_driver[n.name] = mine.driver_version;
      }
      found = EvaluateDrift(mine, n);
    }
    seen.insert(seen.end(), std::make_move_iterator(found.begin()),
                std::make_move_iterator(found.end()));
  });

  std::map<std::string, std::string> targets;
  if (rollout_targets_) targets = rollout_targets_();
  // The rollout that fixes a finding: the profile's version of its kind (a CUDA or GSP
  // difference comes with the driver).
  auto fixing = [&](const DriftFinding& f) {
    if (f.remediation != "rollout") return false;
    auto t = targets.find(f.node);
    if (t == targets.end()) return false;
    auto p = profiles.find(f.pool);
    auto own = node_driver.find(f.node);
    std::string want = f.fact == "vbios"            ? "gpu-firmware " + f.expected
                       : f.fact == "driver_version" ? "driver " + f.expected
                       : own != node_driver.end()   ? "driver " + own->second
                       : p != profiles.end()        ? "driver " + p->second.driver_version
                                                    : "";
    return t->second == want;
  };

  std::lock_guard lock(mu_);
  std::vector<store::DriftRecord> changed;
  auto record = [&](const DriftFinding& f) {
    changed.push_back({f.id, f.node, f.state, DriftFindingJson(f), now});
  };
  // Open findings by (node, gpu, fact), to match what was seen.
  std::map<std::tuple<std::string, int, std::string>, size_t> open;
  for (size_t i = 0; i < findings_.size(); ++i) {
    const DriftFinding& f = findings_[i];
    if (f.state != "resolved") open[{f.node, f.gpu, f.fact}] = i;
  }
  std::vector<bool> matched(findings_.size(), false);
  for (auto& s : seen) {
    auto it = open.find({s.node, s.gpu, s.fact});
    if (it == open.end()) {
      s.id = next_id_++;
      s.state = fixing(s) ? "remediating" : "open";
      s.first_seen_ms = s.last_seen_ms = now;
      findings_.push_back(s);
      matched.push_back(true);
      record(s);
      spdlog::info("drift: {}{} {}: expected {}, has {}", s.node,
                   s.gpu >= 0 ? " GPU " + std::to_string(s.gpu) : "", s.fact, s.expected, s.actual);
      continue;
    }
    DriftFinding& f = findings_[it->second];
    matched[it->second] = true;
    auto attempt = auto_.find(f.id);
    bool in_flight = attempt != auto_.end() && attempt->second.command != 0;
    const std::string state = fixing(s) || in_flight ? "remediating" : "open";
    bool differs = f.expected != s.expected || f.actual != s.actual || f.severity != s.severity ||
                   f.remediation != s.remediation || f.pool != s.pool || f.cluster != s.cluster ||
                   f.state != state;
    bool stale = now - f.last_seen_ms >= kLastSeenWriteMs;
    if (differs) {
      f.expected = s.expected;
      f.actual = s.actual;
      f.severity = s.severity;
      f.remediation = s.remediation;
      f.pool = s.pool;
      f.cluster = s.cluster;
      f.state = state;
    }
    if (differs || stale) {
      f.last_seen_ms = now;
      record(f);
    }
  }
  // Open findings not seen again: resolved, when their node was compared (a node gone from the
  // fleet resolves them too; one not judged now, joining say, keeps them).
  for (size_t i = 0; i < findings_.size(); ++i) {
    DriftFinding& f = findings_[i];
    if (f.state == "resolved" || matched[i]) continue;
    bool exists = judged.count(f.node) > 0 || !fleet_.GetNode(f.node).ok();
    if (!exists) continue;
    f.state = "resolved";
    f.resolved_ms = now;
    record(f);
    spdlog::info("drift: {}{} {} resolved", f.node,
                 f.gpu >= 0 ? " GPU " + std::to_string(f.gpu) : "", f.fact);
  }
  std::map<std::string, Cluster> cluster_of;
  for (const auto& c : clusters.value()) cluster_of[c.name] = c;
  std::map<std::string, Pool> pool_of;
  for (const auto& p : pools.value()) pool_of[p.name] = p;
  std::vector<Dispatch> dispatch;
  if (commands_) dispatch = PlanAuto(now, cluster_of, pool_of, cluster_nodes, connected, changed);
  if (auto s = store_.SaveDriftFindings(changed); !s.ok()) return s.error();
  for (const auto& d : dispatch) {
    // Sent under mu_: the agents' registry lock is a leaf (never held while taking this one).
    Status sent = commands_->Send(d.finding.node, d.command);
    std::string action = "drift auto remediation: set " + d.finding.fact + " to " +
                         d.finding.expected + " on GPU " + std::to_string(d.finding.gpu) +
                         " (was " + d.finding.actual + "; profile of pool " + d.finding.pool + ")";
    Audit(action, "node/" + d.finding.node, sent.ok() ? 202 : 503,
          sent.ok() ? "asked the agent (command " + std::to_string(d.command.id) + ")"
                    : sent.error().message);
    if (!sent.ok()) auto_[d.finding.id].command = 0;
  }
  // Resolved findings past their keep time leave memory and the store.
  size_t before = findings_.size();
  std::erase_if(findings_, [&](const DriftFinding& f) {
    return f.state == "resolved" && now - f.resolved_ms > kResolvedKeepMs;
  });
  if (findings_.size() != before) {
    if (auto d = store_.DeleteResolvedDriftBefore(now - kResolvedKeepMs); !d.ok()) {
      spdlog::warn("drift: pruning resolved findings: {}", d.error().message);
    }
  }
  return static_cast<int>(changed.size());
}

namespace {
bool InScope(const DriftFilter& filter, const DriftFinding& f) {
  if (!filter.node.empty() && f.node != filter.node) return false;
  if (!filter.pool.empty() && f.pool != filter.pool) return false;
  if (!filter.cluster.empty() && f.cluster != filter.cluster) return false;
  if (!filter.clusters.empty() && std::find(filter.clusters.begin(), filter.clusters.end(),
                                            f.cluster) == filter.clusters.end()) {
    return false;
  }
  if (!filter.state.empty() && f.state != filter.state) return false;
  return filter.severity.empty() || SeverityRank(f.severity) >= SeverityRank(filter.severity);
}
}  // namespace

void DriftService::ForEachUnresolved(const DriftFilter& filter,
                                     const std::function<void(const DriftFinding&)>& fn) const {
  std::lock_guard lock(mu_);
  for (const auto& f : findings_) {
    if (f.state != "resolved" && InScope(filter, f)) fn(f);
  }
}

std::vector<DriftFinding> DriftService::List(const DriftFilter& filter) const {
  std::lock_guard lock(mu_);
  std::vector<DriftFinding> out;
  for (const auto& f : findings_) {
    if (InScope(filter, f)) out.push_back(f);
  }
  // Unresolved first, then the most severe, then the newest.
  std::stable_sort(out.begin(), out.end(), [](const DriftFinding& a, const DriftFinding& b) {
    bool ar = a.state == "resolved", br = b.state == "resolved";
    if (ar != br) return !ar;
    int sa = SeverityRank(a.severity), sb = SeverityRank(b.severity);
    if (sa != sb) return sa > sb;
    return a.id > b.id;
  });
  return out;
}

Result<DriftFinding> DriftService::Get(int64_t id) const {
  std::lock_guard lock(mu_);
  for (const auto& f : findings_) {
    if (f.id == id) return f;
  }
  return MakeError(ErrorCode::kNotFound, "no drift finding " + std::to_string(id));
}

std::map<std::string, int> DriftService::NodeSeverity() const {
  std::lock_guard lock(mu_);
  std::map<std::string, int> out;
  for (const auto& f : findings_) {
    if (f.state == "resolved") continue;
    int& rank = out[f.node];
    rank = std::max(rank, SeverityRank(f.severity));
  }
  return out;
}

}  // namespace gpufleet::lifecycle
