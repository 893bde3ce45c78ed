#include "workload/jobs.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>
#include <set>

#include "common/json_text.h"
#include "sched/autoscaler.h"
#include "sched/consolidate.h"
#include "sched/policy_json.h"
#include "sched/pool.h"

namespace json = boost::json;

namespace gpufleet::workload {
namespace {

// A queued job's reason.
std::string Waiting(int gpus) {
  return "waiting for " + std::to_string(gpus) + (gpus == 1 ? " free GPU" : " free GPUs");
}

std::optional<JobState> ParseState(std::string_view s) {
  for (auto st :
       {JobState::kQueued, JobState::kRunning, JobState::kCompleted, JobState::kCancelled}) {
    if (ToString(st) == s) return st;
  }
  return std::nullopt;
}

std::string ToDoc(const Job& j) {
  json::array placement;
  for (const auto& p : j.placement) {
    json::array gpus;
    for (int g : p.gpus) gpus.push_back(g);
    placement.push_back(json::object{{"node", p.node}, {"gpus", std::move(gpus)}});
  }
  return JsonText(json::object{{"team", j.spec.team},
                               {"project", j.spec.project},
                               {"cluster", j.spec.cluster},
                               {"pool", j.spec.pool},
                               {"gpu_model", j.spec.gpu_model},
                               {"gpus", j.spec.gpus},
                               {"priority", j.spec.priority},
                               {"duration_ms", j.spec.duration_ms},
                               {"submit_ms", j.submit_ms},
                               {"queued_ms", j.queued_ms},
                               {"start_ms", j.start_ms},
                               {"end_ms", j.end_ms},
                               {"wait_ms", j.wait_ms},
                               {"gpu_hours", j.gpu_hours},
                               {"requeues", j.requeues},
                               {"movable", j.spec.movable},
                               {"gpus_per_node", j.spec.gpus_per_node},
                               {"moves", j.moves},
                               {"done_ms", j.done_ms},
                               {"reason", j.reason},
                               {"placement", std::move(placement)}});
}

Job FromRecord(const JobRecord& r) {
  Job j;
  j.id = r.id;
  j.state = ParseState(r.state).value_or(JobState::kCancelled);
  auto o = json::parse(r.doc).as_object();
  auto str = [&](const char* k) { return std::string(o.at(k).as_string()); };
  auto num = [&](const char* k) { return o.at(k).to_number<int64_t>(); };
  j.spec.team = str("team");
  j.spec.project = str("project");
  j.spec.cluster = str("cluster");
  j.spec.pool = str("pool");
  j.spec.gpu_model = str("gpu_model");
  j.spec.gpus = static_cast<int>(num("gpus"));
  j.spec.priority = static_cast<int>(num("priority"));
  j.spec.duration_ms = num("duration_ms");
  j.submit_ms = num("submit_ms");
  j.queued_ms = num("queued_ms");
  j.start_ms = num("start_ms");
  j.end_ms = num("end_ms");
  j.wait_ms = num("wait_ms");
  j.gpu_hours = o.at("gpu_hours").to_number<double>();
  j.requeues = static_cast<int>(num("requeues"));
  // Absent in jobs stored before consolidation existed.
  if (const auto* v = o.if_contains("movable")) j.spec.movable = v->as_bool();
  if (o.contains("moves")) j.moves = static_cast<int>(num("moves"));
  if (o.contains("gpus_per_node")) j.spec.gpus_per_node = static_cast<int>(num("gpus_per_node"));
  if (o.contains("done_ms")) j.done_ms = num("done_ms");
  j.reason = str("reason");
  for (const auto& p : o.at("placement").as_array()) {
    Placement pl;
    pl.node = std::string(p.at("node").as_string());
    for (const auto& g : p.at("gpus").as_array()) pl.gpus.push_back(static_cast<int>(g.as_int64()));
    j.placement.push_back(std::move(pl));
  }
  return j;
}

// A node that cannot keep running jobs: its jobs go back to the queue. A cordoned node keeps
// them (cordon only stops new work), a degraded one too, and a draining one until its drain
// times out.
bool Evicts(NodeState s) {
  switch (s) {
    case NodeState::kUnhealthy:
    case NodeState::kUnreachable:
    case NodeState::kDrained:
    case NodeState::kMaintenance:
    case NodeState::kDecommissioning:
    case NodeState::kRetired:
    case NodeState::kProvisioning:
    case NodeState::kJoining:
      return true;
    default:
      return false;
  }
}

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

// The GPU-hours of a running job's current run, up to `now`.
double RunHours(const Job& j, int64_t now) {
  return j.spec.gpus * static_cast<double>(now - j.start_ms) / 3'600'000.0;
}

}  // namespace

std::string_view ToString(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return "queued";
    case JobState::kRunning:
      return "running";
    case JobState::kCompleted:
      return "completed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "?";
}

static_assert(JobService::kDefaultReserveAfterMs == sched::Queue::kDefaultReserveAfterS * 1000);

JobService::JobService(FleetService& fleet, Store& store, std::shared_ptr<Clock> clock,
                       int64_t drain_timeout_ms, int64_t retention_ms, int64_t reserve_after_ms)
    : fleet_(fleet),
      store_(store),
      clock_(std::move(clock)),
      drain_timeout_ms_(drain_timeout_ms),
      retention_ms_(retention_ms),
      reserve_after_ms_(reserve_after_ms) {}

void JobService::UpdateBusyLocked(int64_t now) {
  std::set<std::string> busy;
  for (const auto& [id, job] : live_) {
    const Job& j = *job;
    if (j.state != JobState::kRunning) continue;
    for (const auto& p : j.placement) busy.insert(p.node);
  }
  // A node that was busy until now was busy now (also the one a cancel just freed).
  {
    std::lock_guard lock(busy_mu_);
    for (const auto& n : busy_) last_busy_ms_[n] = now;
  }
  for (const auto& n : busy) last_busy_ms_[n] = now;
  std::lock_guard lock(busy_mu_);
  busy_ = std::move(busy);
}

bool JobService::Busy(const std::string& node) const {
  std::lock_guard lock(busy_mu_);
  return busy_.count(node) > 0;
}

Status JobService::Load() {
  auto records = store_.ListJobs();
  if (!records.ok()) return records.error();
  std::lock_guard lock(mu_);
  for (const auto& r : records.value()) {
    try {
      Job j = FromRecord(r);
      next_id_ = std::max(next_id_, j.id + 1);
      int64_t id = j.id;
      Job& kept = jobs_[id] = std::move(j);
      if (kept.state == JobState::kQueued || kept.state == JobState::kRunning) live_[id] = &kept;
    } catch (const std::exception& e) {
      spdlog::error("jobs: stored job {} is unreadable: {}", r.id, e.what());
    }
  }
  UpdateBusyLocked(clock_->NowMs());
  return {};
}

void JobService::Persist(const std::vector<int64_t>& ids) {
  if (ids.empty()) return;
  std::vector<JobRecord> records;
  {
    std::lock_guard lock(mu_);
    std::set<int64_t> seen;
    for (int64_t id : ids) {
      if (!seen.insert(id).second) continue;
      const Job& j = jobs_.at(id);
      records.push_back({j.id, std::string(ToString(j.state)), ToDoc(j), clock_->NowMs()});
    }
  }
  if (auto s = store_.SaveJobs(records); !s.ok()) {
    spdlog::error("jobs: saving {} job(s) failed: {}", records.size(), s.error().message);
  }
}

Result<Job> JobService::Submit(JobSpec spec) {
  if (spec.team.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "'team' is required: whose job it is");
  }
  if (spec.gpus < 1) return MakeError(ErrorCode::kInvalidArgument, "'gpus' must be at least 1");
  if (spec.duration_ms < 0) {
    return MakeError(ErrorCode::kInvalidArgument, "'duration' must not be negative");
  }
  // A duration ends the job and bounds the queue's backfill: years are a typo, not a plan.
  if (spec.duration_ms > kMaxDurationMs) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'duration' must be at most 365d; leave it out for a job that runs until "
                     "cancelled");
  }
  auto pools = fleet_.Pools();
  if (!pools.ok()) return pools.error();
  const Pool* pool = nullptr;
  for (const auto& p : pools.value()) {
    if (!spec.pool.empty() ? p.name == spec.pool
                           : (p.cluster == spec.cluster &&
                              (spec.gpu_model.empty() || p.gpu_model == spec.gpu_model))) {
      pool = &p;
      break;
    }
  }
  if (!pool) {
    if (!spec.pool.empty()) {
      return MakeError(ErrorCode::kNotFound, "no pool '" + spec.pool + "'");
    }
    if (spec.cluster.empty()) {
      return MakeError(ErrorCode::kInvalidArgument, "give 'pool', or 'cluster' to choose one in");
    }
    return MakeError(ErrorCode::kNotFound,
                     "no pool in cluster '" + spec.cluster + "'" +
                         (spec.gpu_model.empty() ? "" : " with " + spec.gpu_model + " GPUs"));
  }
  if (!spec.cluster.empty() && spec.cluster != pool->cluster) {
    return MakeError(ErrorCode::kInvalidArgument, "pool '" + pool->name + "' is in cluster '" +
                                                      pool->cluster + "', not '" + spec.cluster +
                                                      "'");
  }
  if (!spec.gpu_model.empty() && spec.gpu_model != pool->gpu_model) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "pool '" + pool->name + "' has " + pool->gpu_model + " GPUs, not " + spec.gpu_model);
  }
  const int g = pool->gpus_per_node;
  if (spec.gpus_per_node != 0) {
    const int k = spec.gpus_per_node;
    if (k < 1 || k > g) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "'gpus_per_node' must be 1 to " + std::to_string(g) + " (pool '" +
                           pool->name + "' has " + std::to_string(g) + " GPUs per node)");
    }
    if (spec.gpus % k != 0) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "'gpus_per_node' " + std::to_string(k) + " does not divide 'gpus' " +
                           std::to_string(spec.gpus) + ": the job takes the same on each node");
    }
    if (k == spec.gpus || k == g) spec.gpus_per_node = 0;  // the default placement already
  }
  if (spec.gpus > g && spec.gpus % g != 0 && spec.gpus_per_node == 0) {
    return MakeError(ErrorCode::kInvalidArgument, "a job of more than " + std::to_string(g) +
                                                      " GPUs takes whole nodes of pool '" +
                                                      pool->name + "': ask for a multiple of " +
                                                      std::to_string(g) +
                                                      ", or spread it with gpus_per_node");
  }
  spec.pool = pool->name;
  spec.cluster = pool->cluster;
  spec.gpu_model = pool->gpu_model;
  int64_t now = clock_->NowMs();
  std::vector<int64_t> changed;
  int64_t id;
  {
    std::lock_guard lock(mu_);
    id = next_id_++;
    Job j;
    j.id = id;
    j.spec = std::move(spec);
    j.submit_ms = j.queued_ms = now;
    j.reason = Waiting(j.spec.gpus);
    live_[id] = &(jobs_[id] = std::move(j));
    changed.push_back(id);
    ScheduleLocked(now, changed);
    UpdateBusyLocked(now);
  }
  Persist(changed);
  return Get(id);
}

Result<Job> JobService::Cancel(int64_t id) {
  std::vector<int64_t> changed;
  {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end()) {
      return MakeError(ErrorCode::kNotFound, "no job " + std::to_string(id));
    }
    Job& j = it->second;
    if (j.state == JobState::kCompleted || j.state == JobState::kCancelled) {
      return MakeError(ErrorCode::kConflict,
                       "job " + std::to_string(id) + " has already " +
                           (j.state == JobState::kCompleted ? "completed" : "been cancelled"));
    }
    int64_t now = clock_->NowMs();
    EndLocked(j, JobState::kCancelled, now, "cancelled");
    changed.push_back(id);
    ScheduleLocked(now, changed);  // its GPUs may start a queued job
    UpdateBusyLocked(now);
  }
  Persist(changed);
  return Get(id);
}

Result<Job> JobService::Get(int64_t id) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return MakeError(ErrorCode::kNotFound, "no job " + std::to_string(id));
  return it->second;
}

std::vector<Job> JobService::List(const JobFilter& f) const {
  std::vector<Job> out;
  std::lock_guard lock(mu_);
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) {  // newest first
    const Job& j = it->second;
    if (!f.state.empty() && ToString(j.state) != f.state) continue;
    if (!f.team.empty() && j.spec.team != f.team) continue;
    if (!f.pool.empty() && j.spec.pool != f.pool) continue;
    if (!f.cluster.empty() && j.spec.cluster != f.cluster) continue;
    if (!f.clusters.empty() &&
        std::find(f.clusters.begin(), f.clusters.end(), j.spec.cluster) == f.clusters.end()) {
      continue;
    }
    out.push_back(j);
  }
  return out;
}

void JobService::EndLocked(Job& j, JobState state, int64_t now, const std::string& reason) {
  if (j.state == JobState::kRunning) {
    j.gpu_hours += RunHours(j, now);
  }
  j.state = state;
  live_.erase(j.id);
  j.end_ms = now;
  j.reason = reason;
  j.placement.clear();
}

int JobService::Tick() {
  int64_t now = clock_->NowMs();
  std::map<std::string, NodeState> states;
  std::map<std::string, int64_t> draining_since;
  fleet_.ForEachNode({}, [&](const Node& n) {
    states[n.name] = n.state;
    if (n.state == NodeState::kDraining) draining_since[n.name] = n.state_since_ms;
  });
  std::vector<int64_t> changed;
  std::vector<std::string> drained;  // draining nodes with no job left
  int count = 0;
  int64_t prune_before = 0;  // > 0: drop jobs that ended before this
  {
    std::lock_guard lock(mu_);
    if (now - last_prune_ms_ >= 60'000) {
      last_prune_ms_ = now;
      prune_before = now - retention_ms_;
      size_t dropped = std::erase_if(jobs_, [&](const auto& e) {
        const Job& j = e.second;
        return (j.state == JobState::kCompleted || j.state == JobState::kCancelled) &&
               j.end_ms < prune_before;
      });
      if (dropped)
        spdlog::info("jobs: dropped {} job(s) that ended over the retention time ago", dropped);
    }
    for (auto it = live_.begin(); it != live_.end();) {
      auto [id, job] = *it++;  // EndLocked below takes this job out of live_
      Job& j = *job;
      if (j.state != JobState::kRunning) continue;
      if (j.spec.duration_ms > 0 && now >= j.start_ms + j.spec.duration_ms - j.done_ms) {
        EndLocked(j, JobState::kCompleted, now, "ran its duration");
        changed.push_back(id);
        continue;
      }
      for (const auto& p : j.placement) {
        auto st = states.find(p.node);
        auto drain = draining_since.find(p.node);
        bool timed_out = drain != draining_since.end() && now - drain->second >= drain_timeout_ms_;
        if (st != states.end() && !Evicts(st->second) && !timed_out) continue;
        std::string why = st == states.end() ? "was removed"
                          : timed_out        ? "did not finish draining within " +
                                            std::to_string(drain_timeout_ms_ / 1000) + " s"
                                      : "is " + std::string(ToString(st->second));
        j.gpu_hours += RunHours(j, now);
        j.state = JobState::kQueued;
        j.queued_ms = now;
        j.done_ms = 0;  // a requeued job starts over
        ++j.requeues;
        j.reason = "requeued: node " + p.node + " " + why;
        j.placement.clear();
        changed.push_back(id);
        spdlog::info("job {} requeued: node {} {}", id, p.node, why);
        break;
      }
    }
    count = static_cast<int>(changed.size());
    count += ScheduleLocked(now, changed);
    UpdateBusyLocked(now);
  }
  for (const auto& [node, since] : draining_since) {
    if (!Busy(node)) drained.push_back(node);
  }
  Persist(changed);
  if (prune_before > 0) {
    if (auto s = store_.DeleteEndedJobsBefore(prune_before); !s.ok()) {
      spdlog::error("jobs: dropping ended jobs from the store failed: {}", s.error().message);
    }
  }
  for (const auto& node : drained) {
    if (auto s = fleet_.FinishDrain(node, "drain complete: its jobs have ended"); !s.ok()) {
      spdlog::error("jobs: finishing the drain of {}: {}", node, s.error().message);
    }
  }
  return count;
}

int JobService::ScheduleLocked(int64_t now, std::vector<int64_t>& changed) {
  std::map<std::string, std::vector<Job*>> queued;  // by pool
  for (auto& [id, job] : live_) {
    Job& j = *job;
    if (j.state == JobState::kQueued) queued[j.spec.pool].push_back(&j);
  }
  if (queued.empty()) return 0;
  auto pools = fleet_.Pools();
  if (!pools.ok()) return 0;
  int started = 0;
  for (auto& [pool_name, waiting] : queued) {
    auto pool = std::find_if(pools->begin(), pools->end(),
                             [&](const Pool& p) { return p.name == pool_name; });
    if (pool == pools->end()) continue;
    const int g = pool->gpus_per_node;
    // The pool as the allocator sees it: its ready nodes with the GPUs running jobs hold.
    NodeFilter filter;
    filter.pool = pool_name;
    std::vector<Node> nodes = fleet_.Nodes(filter);
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
    std::vector<const Node*> index;  // sched node index -> fleet node
    for (const auto& n : nodes) {
      if (n.state != NodeState::kReady || static_cast<int>(n.gpus.size()) != g) continue;
      int i = live.AddNode(0, 0);
      live.MarkReady(i, 0);
      index.push_back(&n);
      int busy = 0;
      for (int64_t holder : used[n.name]) busy += holder != 0;
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
        const Node* n = index[static_cast<size_t>(ni)];
        j.placement.push_back(Claim(used[n->name], n->name, g, per_node, j.id));
      }
      j.state = JobState::kRunning;
      j.start_ms = now;
      j.wait_ms += now - j.queued_ms;
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
        why += live.nodes().empty()
                   ? "; the pool has no ready or starting node"
                   : "; more than the pool's " + std::to_string(live.nodes().size()) +
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
  std::lock_guard lock(mu_);
  for (const auto& [id, job] : live_) {
    const Job& j = *job;
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
        j.gpu_hours += RunHours(j, now);
        j.done_ms += now - j.start_ms;
        j.start_ms = now;
        ++j.moves;
        j.reason = "moved from " + from.name + " to " + to + " (consolidation)";
        j.placement = {std::move(pl)};
        changed.push_back(j.id);
        out.detail += (out.detail.empty() ? "" : "; ") + std::string("job ") +
                      std::to_string(j.id) + " " + from.name + " -> " + to;
        spdlog::info("job {} moved from {} to {} (consolidation)", j.id, from.name, to);
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

}  // namespace gpufleet::workload
