// Acting on decisions: manual scaling (Scale), nodes started and stopped by name for Slurm's
// power saving (StartNodes, StopNodes), and the actuator calls, queued (Enqueue) and run in
// order on the service's own worker thread (Worker, Run), so that a slow provisioning program
// delays no decision.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "common/strings.h"
#include "scaling/scaling.h"

namespace gpufleet::scaling {
namespace {
constexpr int64_t kMaxKeepMs = 30 * 86'400'000LL;  // how long a manual target may be kept
}  // namespace

void ScalingService::Enqueue(bool provision, const Pool& pool, const PoolState& st,
                             std::vector<std::string> nodes, std::string join_token,
                             double lead_time_s, const std::string& actor) {
  Work w;
  w.provision = provision;
  w.actor = actor;
  w.request = {pool.name,
               pool.cluster,
               pool.gpu_model,
               pool.gpus_per_node,
               std::move(nodes),
               options_.controller_url,
               std::move(join_token),
               lead_time_s,
               st.scaling.actuator};
  {
    std::lock_guard lock(work_mu_);
    work_.push_back(std::move(w));
  }
  work_cv_.notify_one();
}

Actuator* ScalingService::ActuatorFor(const sched::ActuatorSpec& spec) {
  if (spec.type == "sim") return options_.sim.get();
  if (spec.type == "command") return command_.get();
  return nullptr;
}

Result<std::string> ScalingService::Scale(const std::string& pool_name, const ScaleRequest& r,
                                          const std::string& actor) {
  if (r.target.has_value() == r.delta.has_value()) {
    return MakeError(ErrorCode::kInvalidArgument, "give a target or a delta, not both");
  }
  if (r.keep_ms < 0 || r.keep_ms > kMaxKeepMs) {
    return MakeError(ErrorCode::kInvalidArgument, "'keep' must be a duration of at most 30d");
  }
  auto pool = fleet_.FindPool(pool_name);
  if (!pool.ok()) return pool.error();
  std::lock_guard lock(mu_);
  auto it = pools_.find(pool_name);
  if (it == pools_.end()) {
    return MakeError(ErrorCode::kNotFound,
                     "pool '" + pool_name +
                         "' has no scaling policy: give it one (its actuator starts the nodes)");
  }
  PoolState& st = it->second;
  Counts c = CountLocked(pool_name);
  int have = c.ready + c.provisioning;
  int target = r.target ? *r.target : have + *r.delta;
  const auto& p = st.scaling.policy;
  if (target < p.min_nodes || target > p.max_nodes - c.other) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "target " + std::to_string(target) + " is outside the policy's bounds " +
                         std::to_string(p.min_nodes) + ".." + std::to_string(p.max_nodes) +
                         (c.other ? " (less " + std::to_string(c.other) +
                                        " nodes that are neither ready nor starting)"
                                  : ""));
  }
  std::string detail =
      "manual: " + std::to_string(have) + " -> " + std::to_string(target) + " nodes, by " + actor;
  std::string event;
  int64_t now = clock_->NowMs();
  if (target > have) {
    if (!ProvisionLocked(st, *pool, have, target - have, "manual", detail, actor, event)) {
      return MakeError(
          ErrorCode::kUnavailable,
          "no node could be started: " + (st.last_error.empty() ? "see the log" : st.last_error));
    }
    st.last_up_ms = now;
  } else if (target < have) {
    int removed = RemoveLocked(st, *pool, have, have - target, "manual", detail, actor, event);
    if (removed == 0) {
      return MakeError(ErrorCode::kConflict, "no idle node to remove: every ready node of pool '" +
                                                 pool_name + "' runs jobs (drain some first)");
    }
    st.last_down_ms = now;
  } else {
    event = RecordEvent(pool_name, "manual", 0, have, target, "manual", detail + ": already there",
                        {}, actor);
  }
  st.held.clear();
  st.keep = ManualKeep{};  // the newest manual action replaces a keep
  if (r.keep_ms > 0) {
    st.keep.until_ms = now + r.keep_ms;
    st.keep.actor = actor;
    (target < have ? st.keep.max_nodes : st.keep.min_nodes) = target;
    RecordEvent(pool_name, "keep", 0, have, target, "manual",
                std::string("keeps at ") + (target < have ? "most " : "least ") +
                    std::to_string(target) + " nodes until " + FormatTime(st.keep.until_ms),
                {}, actor, &st.keep);
  }
  return event;
}

Result<std::map<std::string, ScalingService::NamedPool>> ScalingService::NamedPoolsLocked(
    const std::map<std::string, std::vector<std::string>>& by_pool) {
  std::map<std::string, NamedPool> out;
  for (const auto& [pool, nodes] : by_pool) {
    auto found = fleet_.FindPool(pool);
    if (!found.ok()) return found.error();
    auto it = pools_.find(pool);
    if (it == pools_.end()) {
      return MakeError(ErrorCode::kConflict, "pool '" + pool +
                                                 "' has no scaling policy: give it one whose "
                                                 "actuator starts and stops its nodes");
    }
    if (!ActuatorFor(it->second.scaling.actuator)) {
      return MakeError(ErrorCode::kConflict, "pool '" + pool + "': no " +
                                                 it->second.scaling.actuator.type +
                                                 " actuator in this controller");
    }
    out[pool] = NamedPool{&it->second, std::move(found).value()};
  }
  return out;
}

Result<NamedScale> ScalingService::StartNodes(const std::vector<std::string>& names,
                                              const std::string& pool, const std::string& actor) {
  std::lock_guard lock(mu_);
  NamedScale out;
  std::map<std::string, std::vector<std::string>> by_pool;
  for (const auto& name : names) {
    auto node = fleet_.GetNode(name);
    if (node.ok() && node->state != NodeState::kRetired) {
      out.already.push_back(name);
      continue;
    }
    std::string in = !pool.empty() ? pool : node.ok() ? node->pool : "";
    if (in.empty()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "node '" + name + "' is not known to gpufleet: name the pool it starts in");
    }
    by_pool[in].push_back(name);
  }
  auto pools = NamedPoolsLocked(by_pool);
  if (!pools.ok()) return pools.error();
  for (const auto& [name, list] : by_pool) {
    PoolState& st = *pools->at(name).state;
    Counts c = CountLocked(name);
    std::vector<std::string> recorded;
    for (const auto& n : list) {
      auto made = fleet_.Provision(name, n, st.scaling.actuator.type == "sim",
                                   "started for slurm by " + actor, actor);
      if (made.ok()) {
        recorded.push_back(n);
      } else {
        spdlog::error("scaling {}: cannot record node {}: {}", name, n, made.error().message);
      }
    }
    std::string event;
    if (recorded.empty() ||
        !LaunchLocked(st, pools->at(name).pool, recorded, c.ready + c.provisioning, "slurm",
                      "slurm resume by " + actor, actor, event)) {
      return MakeError(
          ErrorCode::kUnavailable,
          "no node could be started: " + (st.last_error.empty() ? "see the log" : st.last_error));
    }
    out.acted.insert(out.acted.end(), recorded.begin(), recorded.end());
  }
  return out;
}

Result<NamedScale> ScalingService::StopNodes(const std::vector<std::string>& names,
                                             const std::string& actor) {
  std::lock_guard lock(mu_);
  NamedScale out;
  std::map<std::string, std::vector<std::string>> by_pool;
  for (const auto& name : names) {
    auto node = fleet_.GetNode(name);
    if (!node.ok() || node->state == NodeState::kRetired || named_stops_.count(name)) {
      out.already.push_back(name);
      continue;
    }
    by_pool[node->pool].push_back(name);
  }
  auto pools = NamedPoolsLocked(by_pool);
  if (!pools.ok()) return pools.error();
  for (const auto& [name, list] : by_pool) {
    PoolState& st = *pools->at(name).state;
    Counts c = CountLocked(name);
    int have = c.ready + c.provisioning;
    RecordEvent(name, "scale_down", -static_cast<int>(list.size()), have,
                have - static_cast<int>(list.size()), "slurm", "slurm suspend by " + actor, list,
                actor);
    named_stops_.insert(list.begin(), list.end());
    Enqueue(false, pools->at(name).pool, st, list, "", st.scaling.policy.lead_time_s, actor);
    out.acted.insert(out.acted.end(), list.begin(), list.end());
  }
  return out;
}

void ScalingService::Worker() {
  for (;;) {
    Work w;
    {
      std::unique_lock lock(work_mu_);
      work_cv_.wait(lock, [&] { return stopping_ || !work_.empty(); });
      if (stopping_) return;  // what is queued is dropped; the nodes stay as recorded
      w = std::move(work_.front());
      work_.pop_front();
    }
    Run(w);
  }
}

void ScalingService::Run(const Work& w) {
  if (!w.tune.empty()) {
    AutoTune(w.tune);
    return;
  }
  Actuator* a = ActuatorFor(w.request.spec);
  Status done = a ? (w.provision ? a->Provision(w.request) : a->Deprovision(w.request))
                  : MakeError(ErrorCode::kUnavailable, "no such actuator");
  const auto& nodes = w.request.nodes;
  std::lock_guard lock(mu_);
  if (!w.provision) {
    for (const auto& n : nodes) named_stops_.erase(n);
  }
  auto it = pools_.find(w.request.pool);
  std::string* last_error = it != pools_.end() ? &it->second.last_error : nullptr;
  if (!done.ok()) {
    const std::string& why = done.error().message;
    if (last_error) *last_error = why;
    if (w.provision) {
      for (const auto& n : nodes) (void)fleet_.Retire(n, "provision failed: " + why, w.actor);
      RecordEvent(w.request.pool, "provision_failed", -static_cast<int>(nodes.size()), 0, 0,
                  "actuator", why + "; the nodes were retired", nodes, kAutoscaler);
    } else {
      RecordEvent(w.request.pool, "deprovision_failed", 0, 0, 0, "actuator",
                  why + "; the nodes stay drained", nodes, kAutoscaler);
    }
    return;
  }
  if (last_error) last_error->clear();
  if (!w.provision) {
    for (const auto& n : nodes) {
      auto node = fleet_.GetNode(n);
      if (node.ok() && node->state == NodeState::kRetired) continue;  // a join timeout's
      if (auto s = fleet_.Retire(n, "scaled down: deprovisioned", w.actor); !s.ok()) {
        spdlog::error("scaling: retiring {}: {}", n, s.error().message);
      }
    }
  }
}

}  // namespace gpufleet::scaling
