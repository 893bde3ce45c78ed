// Where jobs go: each pass places queued jobs with sched::Queue and sched::Pool rebuilt from the
// fleet, and gives the autoscaler the pools' demand, their idle nodes and consolidation.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/clock.h"
#include "sched/autoscaler.h"
#include "sched/consolidate.h"
#include "sched/policy_json.h"
#include "sched/pool.h"
#include "workload/internal.h"
#include "workload/jobs.h"

namespace gpufleet::workload {
namespace {

using internal::RunHours;
using internal::Waiting;

// Marks the GPUs a running job holds in `held` (node -> job id per GPU index, 0: free).
void Hold(std::map<std::string, std::vector<int64_t>>& held, const Job& j) {
  for (const auto& p : j.placement) {
    auto& v = held[p.node];
    for (int idx : p.gpus) {
      if (idx >= static_cast<int>(v.size())) v.resize(static_cast<size_t>(idx) + 1, 0);
      v[static_cast<size_t>(idx)] = j.id;
    }
  }
}

// Claims the lowest free GPU indices of `node` (of `g` GPUs; `held` is its job id per index, 0
// when free) for `gpus` GPUs of job `id`.
Placement Claim(std::vector<int64_t>& held, const std::string& node, int g, int gpus, int64_t id) {
  held.resize(static_cast<size_t>(g), 0);
  Placement pl{node, {}};
  for (int idx = 0; idx < g && static_cast<int>(pl.gpus.size()) < gpus; ++idx) {
    if (held[static_cast<size_t>(idx)] == 0) {
      held[static_cast<size_t>(idx)] = id;
      pl.gpus.push_back(idx);
    }
  }
  return pl;
}

}  // namespace

int JobService::ScheduleLocked(int64_t now, std::vector<int64_t>& changed) {
  while (!starts_.empty() && starts_.front().time_ms <= now - kWaitWindowMs) starts_.pop_front();
  std::map<std::string, std::vector<Job*>> queued;  // by pool
  for (auto& [id, job] : live_) {
    Job& j = *job;
    // Another scheduler's queued jobs wait in its queue, not gpufleet's.
    if (j.state == JobState::kQueued && j.source.empty()) queued[j.spec.pool].push_back(&j);
  }
  if (queued.empty()) return 0;
  auto pools = fleet_.Pools();
  if (!pools.ok()) return 0;
  int started = 0;
  for (auto& [pool_name, waiting] : queued) {
    auto pool = std::find_if(pools->begin(), pools->end(), [&pool_name = pool_name](const Pool& p) {
      return p.name == pool_name;
    });
    if (pool == pools->end()) continue;
    const int g = pool->gpus_per_node;
    // The pool as the allocator sees it: its ready nodes with the GPUs running jobs hold.
    // Only what placement reads, not copies of the nodes with their GPUs: this runs on every
    // submission, over every node of the pool.
    struct Candidate {
      std::string name;
      NodeState state;
      int gpus;
    };
    std::vector<Candidate> nodes;
    NodeFilter filter;
    filter.pool = pool_name;
    fleet_.ForEachNode(filter, [&](const Node& n) {
      nodes.push_back({n.name, n.state, static_cast<int>(n.gpus.size())});
    });
    std::map<std::string, std::vector<int64_t>> used;  // node -> job id per GPU index
    std::map<std::string, double> ends;  // node -> when its jobs are expected to have ended
    for (const auto& [id, job] : live_) {
      const Job& j = *job;
      if (j.state != JobState::kRunning || j.spec.pool != pool_name) continue;
      Hold(used, j);
      double end = j.spec.duration_ms > 0
                       ? static_cast<double>(j.start_ms + j.spec.duration_ms - j.done_ms) / 1000
                       : sched::Pool::kNoEnd;
      for (const auto& p : j.placement) ends[p.node] = std::max(ends[p.node], end);
    }
    sched::Pool live(g);
    std::vector<const Candidate*> index;  // sched node index -> fleet node
    for (const auto& n : nodes) {
      if (n.state != NodeState::kReady || n.gpus != g) continue;
      int i = live.AddNode(0, 0);
      live.MarkReady(i, 0);
      index.push_back(&n);
      int busy = 0;
      if (auto u = used.find(n.name); u != used.end()) {
        for (int64_t holder : u->second) busy += holder != 0;
      }
      if (busy) live.Take(i, busy, ends[n.name]);
    }
    // Nodes on their way count for whether the pool can hold a job (a job larger than the
    // pool gets no nodes kept); when they will be ready is not known here.
    for (const auto& n : nodes) {
      if (n.state != NodeState::kProvisioning && n.state != NodeState::kJoining) continue;
      live.AddNode(0, sched::Pool::kNoEnd);
      index.push_back(&n);
    }
    sched::Queue queue(static_cast<double>(reserve_after_ms_) / 1000);
    for (const auto& [id, job] : live_) {
      const Job& j = *job;
      if (j.state == JobState::kRunning && j.spec.pool == pool_name) {
        queue.AddRunning(j.spec.team, j.spec.gpus);
      }
    }
    std::vector<sched::Job> sj(waiting.size());
    for (size_t i = 0; i < waiting.size(); ++i) {
      sj[i].id = waiting[i]->id;
      sj[i].team = waiting[i]->spec.team;
      sj[i].gpus = waiting[i]->spec.gpus;
      sj[i].gpus_per_node = waiting[i]->spec.gpus_per_node;
      sj[i].priority = waiting[i]->spec.priority;
      sj[i].duration_s = static_cast<double>(waiting[i]->spec.duration_ms) / 1000;
      sj[i].submit_s = static_cast<double>(waiting[i]->queued_ms) / 1000.0;
      queue.Push(&sj[i]);
    }
    const bool full = live.free_gpus() == 0;  // then Schedule decides nothing
    for (sched::Job* s : queue.Schedule(live, static_cast<double>(now) / 1000.0)) {
      Job& j = jobs_.at(s->id);
      int per_node = live.PerNode(*s);
      for (int ni : s->nodes) {
        const Candidate* n = index[static_cast<size_t>(ni)];
        j.placement.push_back(Claim(used[n->name], n->name, g, per_node, j.id));
      }
      j.state = JobState::kRunning;
      j.start_ms = now;
      j.wait_ms += now - j.queued_ms;
      j.alloc_wait_ms = now - j.queued_ms;
      starts_.push_back({now, j.spec.pool, now - j.queued_ms});
      j.reason = "running on " + std::to_string(j.placement.size()) + " node(s)";
      changed.push_back(j.id);
      ++started;
    }
    // The job nodes are kept for, if one has waited long (sched::Queue), says so, and one the
    // pool cannot hold says that, full or not; one that no longer is either goes back to
    // waiting for GPUs. Requeued jobs and the like keep their reason.
    const sched::Job* kept = queue.reserved_for();
    for (size_t i = 0; i < waiting.size(); ++i) {
      Job* w = waiting[i];
      if (w->state != JobState::kQueued) continue;
      const std::string waiting_for = Waiting(w->spec.gpus);
      std::string why = waiting_for;
      if (kept && kept->id == w->id) {
        std::string names;
        for (int ni : queue.reserved_nodes()) {
          names += (names.empty() ? "" : ", ") + index[static_cast<size_t>(ni)]->name;
        }
        why += "; waited over " +
               sched::FormatSeconds(static_cast<double>(reserve_after_ms_) / 1000) + ", so " +
               names + " take no other job until it fits";
        if (double until = live.backfill_until_s(); until >= 0) {
          why += ", but one expected to end by " + FormatTime(static_cast<int64_t>(until * 1000));
        }
      } else if (!w->reason.starts_with(waiting_for)) {
        continue;
      } else if (!live.CanHold(sj[i])) {
        const int holdable = live.ready_nodes() + live.provisioning_nodes();
        why += holdable == 0
                   ? "; the pool has no ready or starting node"
                   : "; more than the pool's " + std::to_string(holdable) +
                         " ready or starting nodes of " + std::to_string(g) + " GPUs hold";
      } else if (full && !w->reason.starts_with(waiting_for + "; more than the pool's") &&
                 !w->reason.starts_with(waiting_for + "; the pool has no")) {
        continue;  // as the last pass that could place a job left it
      }
      if (w->reason != why) {
        w->reason = std::move(why);
        changed.push_back(w->id);
      }
    }
  }
  return started;
}

std::map<std::string, PoolDemand> JobService::Demand() const {
  std::map<std::string, PoolDemand> out;
  std::map<std::string, std::set<std::string>> busy;  // pool -> nodes
  std::map<std::string, int> node_gpus;               // pool -> GPUs per node
  if (auto pools = fleet_.Pools(); pools.ok()) {
    for (const auto& p : pools.value()) node_gpus[p.name] = p.gpus_per_node;
  }
  std::map<std::string, std::vector<int64_t>> waits;  // pool -> the last hour's waits
  const int64_t now = clock_->NowMs();
  std::lock_guard lock(mu_);
  for (const auto& s : starts_) {
    if (s.time_ms > now - kWaitWindowMs) waits[s.pool].push_back(s.wait_ms);
  }
  for (const auto& [id, job] : live_) {
    const Job& j = *job;
    if (j.state == JobState::kQueued) waits[j.spec.pool].push_back(now - j.queued_ms);
    if (j.state == JobState::kRunning) {
      out[j.spec.pool].running_gpus += j.spec.gpus;
      for (const auto& p : j.placement) busy[j.spec.pool].insert(p.node);
    } else if (j.state == JobState::kQueued) {
      auto& d = out[j.spec.pool];
      d.queued_gpus += j.spec.gpus;
      ++d.queued_jobs;
      int size =
          sched::QueueSize(j.spec.gpus, j.spec.gpus_per_node,
                           node_gpus.count(j.spec.pool) ? node_gpus[j.spec.pool] : j.spec.gpus);
      ++d.queued_by_size[size];
      d.queued_gpus_by_size[size] += j.spec.gpus;
      if (d.oldest_queued_ms == 0 || j.queued_ms < d.oldest_queued_ms) {
        d.oldest_queued_ms = j.queued_ms;
      }
    }
  }
  for (auto& [pool, nodes] : busy) out[pool].busy_nodes = static_cast<int>(nodes.size());
  for (auto& [pool, w] : waits) {
    // The nearest rank: the smallest wait that 95% of them are at most.
    size_t rank = (w.size() * 95 + 99) / 100;
    std::nth_element(w.begin(), w.begin() + static_cast<long>(rank - 1), w.end());
    out[pool].queue_wait_p95_ms = w[rank - 1];
  }
  return out;
}

std::vector<std::string> JobService::IdleLocked(const std::string& pool, int64_t idle_ms,
                                                int64_t now) const {
  std::vector<std::pair<int64_t, std::string>> idle;  // (idle since, node)
  NodeFilter filter;
  filter.pool = pool;
  fleet_.ForEachNode(filter, [&](const Node& n) {
    if (n.state != NodeState::kReady) return;
    int64_t since = n.state_since_ms;
    if (auto it = last_busy_ms_.find(n.name); it != last_busy_ms_.end()) {
      since = std::max(since, it->second);
    }
    if (now - since >= idle_ms) idle.emplace_back(since, n.name);
  });
  std::set<std::string> busy;
  {
    std::lock_guard lock(busy_mu_);
    busy = busy_;
  }
  // The longest idle first; among equals the last-named (the newest) first.
  std::sort(idle.begin(), idle.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;
  });
  std::vector<std::string> out;
  for (auto& [since, name] : idle) {
    if (!busy.count(name)) out.push_back(std::move(name));
  }
  return out;
}

std::vector<std::string> JobService::IdleNodes(const std::string& pool, int64_t idle_ms) const {
  std::lock_guard lock(mu_);
  return IdleLocked(pool, idle_ms, clock_->NowMs());
}

std::vector<std::string> JobService::DrainIdle(const std::string& pool, int n, int64_t idle_ms,
                                               const std::string& actor) {
  // Under mu_, so that no placement (Tick, Submit) lands on a node between choosing and draining
  // it: placements take ready nodes only, and a drained node is no longer ready.
  std::lock_guard lock(mu_);
  std::vector<std::string> drained;
  for (const auto& name : IdleLocked(pool, idle_ms, clock_->NowMs())) {
    if (static_cast<int>(drained.size()) >= n) break;
    auto r = fleet_.Act(name, NodeAction::kDrain, actor);
    if (!r.ok()) {
      spdlog::warn("scale down: cannot drain {}: {}", name, r.error().message);
      continue;
    }
    if (r->state == NodeState::kDrained) drained.push_back(name);
  }
  return drained;
}

// A running job on its new node `pl` (consolidation): it goes on from where it was.
void JobService::MoveLocked(Job& j, Placement pl, const std::string& from, int64_t now) {
  const std::string to = pl.node;
  RecordEndLocked(j, now, "moved");
  j.alloc_wait_ms = 0;
  j.gpu_hours += RunHours(j, now);
  j.done_ms += now - j.start_ms;
  j.start_ms = now;
  ++j.moves;
  j.reason = "moved from " + from + " to " + to + " (consolidation)";
  j.placement = {std::move(pl)};
  spdlog::info("job {} moved from {} to {} (consolidation)", j.id, from, to);
}

JobService::Consolidation JobService::Consolidate(const std::string& pool, int gpus_per_node,
                                                  double below, int64_t light_ms, int max_nodes,
                                                  const std::string& actor) {
  Consolidation out;
  const int g = gpus_per_node;
  std::vector<int64_t> changed;
  {
    // Under mu_, like DrainIdle: nothing is placed between planning and draining.
    std::lock_guard lock(mu_);
    int64_t now = clock_->NowMs();
    NodeFilter filter;
    filter.pool = pool;
    std::vector<Node> nodes = fleet_.Nodes(filter);
    std::map<std::string, std::vector<Job*>> on;  // node -> its running jobs
    std::map<std::string, std::vector<int64_t>> held;
    for (auto& [id, job] : live_) {
      Job& j = *job;
      if (j.state != JobState::kRunning || j.spec.pool != pool) continue;
      for (const auto& p : j.placement) on[p.node].push_back(&j);
      Hold(held, j);
    }
    std::vector<sched::NodeLoad> load(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = nodes[i];
      if (n.state != NodeState::kReady || static_cast<int>(n.gpus.size()) != g) {
        light_since_ms_.erase(n.name);
        continue;
      }
      int used = 0;
      for (int64_t holder : held[n.name]) used += holder != 0;
      load[i].free = g - used;
      load[i].running = used > 0;
      bool light = sched::LightlyUsed(used, g, below);
      for (const Job* j : on[n.name]) {
        light = light && j->spec.movable && j->placement.size() == 1;
        int here = 0;  // its GPUs on this node
        for (const auto& pl : j->placement) {
          if (pl.node == n.name) here += static_cast<int>(pl.gpus.size());
        }
        load[i].jobs.push_back(here);
      }
      if (!light) {
        light_since_ms_.erase(n.name);
        continue;
      }
      int64_t since = light_since_ms_.try_emplace(n.name, now).first->second;
      load[i].candidate = now - since >= light_ms;
    }
    for (const auto& m : sched::PlanConsolidation(load, max_nodes)) {
      const Node& from = nodes[static_cast<size_t>(m.node)];
      std::vector<Job*> moving = on[from.name];
      for (size_t k = 0; k < moving.size(); ++k) {
        Job& j = *moving[k];
        const std::string& to = nodes[static_cast<size_t>(m.to[k])].name;
        auto& src = held[from.name];
        for (int idx : j.placement[0].gpus) src[static_cast<size_t>(idx)] = 0;
        Placement pl = Claim(held[to], to, g, j.spec.gpus, j.id);
        MoveLocked(j, std::move(pl), from.name, now);
        changed.push_back(j.id);
        out.detail += (out.detail.empty() ? "" : "; ") + std::string("job ") +
                      std::to_string(j.id) + " " + from.name + " -> " + to;
      }
      light_since_ms_.erase(from.name);
      UpdateBusyLocked(now);  // the fleet asks Busy() when it drains
      auto r = fleet_.Act(from.name, NodeAction::kDrain, actor);
      std::string why = !r.ok() ? "its drain failed: " + r.error().message
                        : r->state != NodeState::kDrained
                            ? "it is " + std::string(ToString(r->state)) + ": " + r->reason
                            : "";
      if (why.empty()) {
        out.nodes.push_back(from.name);
        continue;
      }
      spdlog::warn("consolidation: {} emptied but not drained: {}", from.name, why);
      out.failed += (out.failed.empty() ? "" : "; ") + from.name + " emptied, not removed: " + why;
    }
  }
  Persist(changed);
  return out;
}

std::map<std::string, std::vector<int64_t>> JobService::Allocation() const {
  std::map<std::string, std::vector<int64_t>> out;
  std::lock_guard lock(mu_);
  for (const auto& [id, job] : live_) {
    const Job& j = *job;
    if (j.state == JobState::kRunning) Hold(out, j);
  }
  return out;
}

std::map<std::string, std::vector<JobService::GpuLoad>> JobService::Loads() const {
  std::map<std::string, std::vector<GpuLoad>> out;
  std::lock_guard lock(mu_);
  for (const auto& [id, job] : live_) {
    const Job& j = *job;
    if (j.state != JobState::kRunning) continue;
    const std::string& profile = j.spec.sim_profile.empty() ? "training" : j.spec.sim_profile;
    for (const auto& p : j.placement) {
      for (int g : p.gpus) out[p.node].push_back({g, j.id, profile, j.start_ms});
    }
  }
  return out;
}

}  // namespace gpufleet::workload
