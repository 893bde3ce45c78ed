#pragma once
// The scope policy: how far a token limited to some clusters (Principal::clusters) reaches.
// Every route declares its Scope (Router::Scoped). The server refuses kFleet routes to a
// scoped token before the handler runs, and checks the object a kClusters route's path names;
// handlers check what their bodies and selectors reach through the functions below, so that
// every such decision is made here. An object of a cluster the token cannot see answers 404,
// as if it did not exist (its existence must not leak); a change that would reach beyond the
// token's clusters, or a fleet-wide object, answers 403. Internal to the api component.

#include <string>
#include <vector>

#include "alerting/matcher.h"
#include "api/context.h"
#include "model/scaling_policy.h"
#include "model/types.h"

namespace gpufleet::api {

// The object a kClusters route's path names (ScopeObject), or 404 as if it did not exist.
Status ScopePathObject(ApiContext& ctx, const Principal& who, ScopeObject object,
                       const std::string& value);
// 403 unless the token reaches the whole fleet: for fleet-wide objects.
Status ScopeFleet(const Principal& who, std::string_view what);
Status ScopeCluster(const Principal& who, const std::string& cluster);             // else 404
Status ScopePool(ApiContext& ctx, const Principal& who, const std::string& pool);  // 404
Status ScopeNode(ApiContext& ctx, const Principal& who, const std::string& node);  // 404
// Settings that make the controller itself run programs (a pool's `command` actuator, a Slurm
// cluster's clients through `bin_dir` and `conf`) act as the controller's user on its machine,
// beyond any cluster: setting or changing them needs an admin token of the whole fleet (403).
// Keeping them as they are needs only the route's role. A pool's actuator `after` in place of
// `before` (nullptr: none yet):
Status ScopeActuator(const Principal& who, const std::string& pool,
                     const sched::ActuatorSpec* before, const sched::ActuatorSpec& after);
// A fleet file's clusters and scaling blocks, against the clusters and policies there are.
Status ScopeFilePrograms(ApiContext& ctx, const Principal& who,
                         const std::vector<Cluster>& clusters,
                         const std::vector<sched::PoolScaling>& scaling);
// A token `who` creates: a role no higher than its own, and (for a scoped `who`) clusters
// that are all its own, never none (none would be the whole fleet). 403 otherwise.
Status ScopeNewToken(const Principal& who, Role role, const std::vector<std::string>& clusters);
// A silence or a route of alerts by a scoped token must be limited to its clusters: one of its
// matchers is cluster="X" (or cluster=~"X|Y") with each X one of the token's clusters. 403.
Status ScopeMatchers(const Principal& who, const std::vector<alerting::Matcher>& matchers);
// A silence (its stored matchers, a JSON list) that a scoped token may see and expire: one
// whose matchers limit it to the token's clusters. False for a fleet-wide token never.
bool SilenceInScope(const Principal& who, const std::string& matchers_json);
// A team a scoped token may change: one that owns clusters or pools, all of them in the
// token's clusters (a team that owns none, or others too, is the fleet's). 404 when the team
// owns nothing the token sees, 403 when it also owns what the token does not.
Status ScopeTeam(ApiContext& ctx, const Principal& who, const std::string& team);
// Whether a scoped token sees the team at all (it owns something in the token's clusters).
bool TeamVisible(ApiContext& ctx, const Principal& who, const std::string& team);

}  // namespace gpufleet::api
