#include "api/scope.h"

#include <algorithm>
#include <set>

#include "alerting/silence.h"
#include "common/strings.h"

namespace gpufleet::api {
namespace {

Error NotFound(std::string_view kind, const std::string& name) {
  return MakeError(ErrorCode::kNotFound,
                   "no " + std::string(kind) + " '" + Printable(name, 80) + "'");
}

std::string Limited(const Principal& who) {
  return "token '" + Printable(who.name, 80) + "' is limited to the clusters " +
         Join(who.clusters, ", ");
}

// The clusters a team owns: those it owns itself, and those of the pools it owns.
std::set<std::string> TeamClusters(ApiContext& ctx, const std::string& team) {
  std::set<std::string> out;
  if (auto clusters = ctx.fleet.Clusters(); clusters.ok()) {
    for (const auto& c : clusters.value()) {
      if (c.team == team) out.insert(c.name);
    }
  }
  if (auto pools = ctx.fleet.Pools(); pools.ok()) {
    for (const auto& p : pools.value()) {
      if (p.team == team) out.insert(p.cluster);
    }
  }
  return out;
}

Status ControllerPrograms(const Principal& who, const std::string& what) {
  if (who.role >= Role::kAdmin && who.clusters.empty()) return {};
  return MakeError(ErrorCode::kPermissionDenied,
                   "token '" + Printable(who.name, 80) + "' may not set " + what +
                       ": it runs programs on the controller, which needs an admin token of the "
                       "whole fleet");
}

}  // namespace

Status ScopeFleet(const Principal& who, std::string_view what) {
  if (who.clusters.empty()) return {};
  return MakeError(ErrorCode::kPermissionDenied,
                   Limited(who) + "; " + std::string(what) + " belongs to the whole fleet");
}

Status ScopeActuator(const Principal& who, const std::string& pool,
                     const sched::ActuatorSpec* before, const sched::ActuatorSpec& after) {
  const bool same = after.type != "command" || (before != nullptr && before->type == "command" &&
                                                before->provision == after.provision &&
                                                before->deprovision == after.deprovision);
  if (same) return {};
  return ControllerPrograms(who, "pool '" + pool + "': a command actuator");
}

Status ScopeFilePrograms(ApiContext& ctx, const Principal& who,
                         const std::vector<Cluster>& clusters,
                         const std::vector<sched::PoolScaling>& scaling) {
  auto have = ctx.fleet.Clusters();
  if (!have.ok()) return have.error();
  const Scheduler defaults;
  for (const auto& c : clusters) {
    if (c.scheduler.type.empty()) continue;
    auto it = std::find_if(have->begin(), have->end(),
                           [&](const Cluster& h) { return h.name == c.name; });
    const Scheduler& was =
        it != have->end() && !it->scheduler.type.empty() ? it->scheduler : defaults;
    if (was.bin_dir != c.scheduler.bin_dir || was.conf != c.scheduler.conf) {
      GF_TRY(ControllerPrograms(who, "cluster '" + c.name + "': scheduler.bin_dir or conf"));
    }
  }
  for (const auto& sc : scaling) {
    if (!ctx.scaling) break;  // the caller refuses scaling blocks: autoscaling is not running
    auto was = ctx.scaling->Get(sc.pool);
    GF_TRY(ScopeActuator(who, sc.pool, was.ok() ? &was->scaling.actuator : nullptr, sc.actuator));
  }
  return {};
}

Status ScopeCluster(const Principal& who, const std::string& cluster) {
  if (who.CanSeeCluster(cluster)) return {};
  return NotFound("cluster", cluster);
}

Status ScopePool(ApiContext& ctx, const Principal& who, const std::string& pool) {
  if (who.clusters.empty()) return {};
  auto p = ctx.fleet.FindPool(pool);
  if (!p.ok() || !who.CanSeeCluster(p->cluster)) return NotFound("pool", pool);
  return {};
}

Status ScopeNode(ApiContext& ctx, const Principal& who, const std::string& node) {
  if (who.clusters.empty()) return {};
  auto n = ctx.fleet.GetNode(node);
  if (!n.ok() || !who.CanSeeCluster(n->cluster)) return NotFound("node", node);
  return {};
}

Status ScopePathObject(ApiContext& ctx, const Principal& who, ScopeObject object,
                       const std::string& value) {
  if (who.clusters.empty()) return {};
  switch (object) {
    case ScopeObject::kNone:
      return {};
    case ScopeObject::kNode:
      return ScopeNode(ctx, who, value);
    case ScopeObject::kPool:
      return ScopePool(ctx, who, value);
    case ScopeObject::kCluster:
      return ScopeCluster(who, value);
  }
  return {};
}

Status ScopeNewToken(const Principal& who, Role role, const std::vector<std::string>& clusters) {
  if (role > who.role) {
    return MakeError(ErrorCode::kPermissionDenied, "token '" + Printable(who.name, 80) + "' is " +
                                                       std::string(ToString(who.role)) +
                                                       ": it cannot create a token of role " +
                                                       std::string(ToString(role)));
  }
  if (who.clusters.empty()) return {};
  if (clusters.empty()) {
    return MakeError(ErrorCode::kPermissionDenied,
                     Limited(who) + ": a token it creates must name some of them in 'clusters'");
  }
  for (const auto& c : clusters) {
    if (!who.CanSeeCluster(c)) {
      return MakeError(
          ErrorCode::kPermissionDenied,
          Limited(who) + ": it cannot create a token for cluster '" + Printable(c, 80) + "'");
    }
  }
  return {};
}

namespace {

// The clusters a set of matchers limits alerts to, when one of them does: cluster="X", or
// cluster=~"X|Y|..." of plain names. Empty when none does.
std::vector<std::string> PinnedClusters(const std::vector<alerting::Matcher>& matchers) {
  for (const auto& m : matchers) {
    if (m.name != "cluster" || !m.is_equal) continue;
    if (!m.is_regex) return {m.value};
    auto names = Split(m.value, '|');
    if (std::all_of(names.begin(), names.end(),
                    [](const std::string& n) { return IsValidName(n); })) {
      return names;
    }
  }
  return {};
}

}  // namespace

Status ScopeMatchers(const Principal& who, const std::vector<alerting::Matcher>& matchers) {
  if (who.clusters.empty()) return {};
  auto pinned = PinnedClusters(matchers);
  if (pinned.empty()) {
    return MakeError(ErrorCode::kPermissionDenied,
                     Limited(who) + ": its matchers must include cluster=\"NAME\" for one of them");
  }
  for (const auto& c : pinned) {
    if (!who.CanSeeCluster(c)) {
      return MakeError(ErrorCode::kPermissionDenied,
                       Limited(who) + ": it cannot match cluster '" + Printable(c, 80) + "'");
    }
  }
  return {};
}

bool SilenceInScope(const Principal& who, const std::string& matchers_json) {
  if (who.clusters.empty()) return true;
  auto matchers = alerting::ParseMatchers(matchers_json);
  return matchers.ok() && ScopeMatchers(who, matchers.value()).ok();
}

bool TeamVisible(ApiContext& ctx, const Principal& who, const std::string& team) {
  if (who.clusters.empty()) return true;
  auto owned = TeamClusters(ctx, team);
  return std::any_of(owned.begin(), owned.end(),
                     [&](const std::string& c) { return who.CanSeeCluster(c); });
}

Status ScopeTeam(ApiContext& ctx, const Principal& who, const std::string& team) {
  if (who.clusters.empty()) return {};
  auto owned = TeamClusters(ctx, team);
  if (std::none_of(owned.begin(), owned.end(),
                   [&](const std::string& c) { return who.CanSeeCluster(c); })) {
    return NotFound("team", team);
  }
  for (const auto& c : owned) {
    if (!who.CanSeeCluster(c)) {
      return MakeError(
          ErrorCode::kPermissionDenied,
          Limited(who) + "; team '" + Printable(team, 80) + "' also owns cluster '" + c + "'");
    }
  }
  return {};
}

}  // namespace gpufleet::api
