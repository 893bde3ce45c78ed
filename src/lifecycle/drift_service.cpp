#include "lifecycle/drift_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_map>

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
                           std::shared_ptr<Clock> clock)
    : fleet_(fleet), store_(store), clock_(std::move(clock)) {}

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
  fleet_.ForEachNode({}, [&](const Node& n) {
    auto p = profiles.find(n.pool);
    if (!Judged(n.state) || p == profiles.end()) return;
    judged[n.name] = true;
    if (p->second.empty()) return;
    auto found = EvaluateDrift(p->second, n);
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
    std::string want = f.fact == "vbios"            ? "gpu-firmware " + f.expected
                       : f.fact == "driver_version" ? "driver " + f.expected
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
    const std::string state = fixing(s) ? "remediating" : "open";
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
  if (auto s = store_.SaveDriftFindings(changed); !s.ok()) return s.error();
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

std::vector<DriftFinding> DriftService::List(const DriftFilter& filter) const {
  std::lock_guard lock(mu_);
  std::vector<DriftFinding> out;
  int min_rank = filter.severity.empty() ? 0 : SeverityRank(filter.severity);
  for (const auto& f : findings_) {
    if (!filter.node.empty() && f.node != filter.node) continue;
    if (!filter.pool.empty() && f.pool != filter.pool) continue;
    if (!filter.cluster.empty() && f.cluster != filter.cluster) continue;
    if (!filter.clusters.empty() && std::find(filter.clusters.begin(), filter.clusters.end(),
                                              f.cluster) == filter.clusters.end()) {
      continue;
    }
    if (!filter.state.empty() && f.state != filter.state) continue;
    if (SeverityRank(f.severity) < min_rank) continue;
    out.push_back(f);
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
