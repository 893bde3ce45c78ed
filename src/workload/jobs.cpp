#include "workload/jobs.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>
#include <set>

#include "common/json_text.h"
#include "model/sim_profile.h"
#include "sched/pool.h"
#include "workload/internal.h"

namespace json = boost::json;

namespace gpufleet::workload {
namespace {

using internal::RunHours;
using internal::Waiting;

std::optional<JobState> ParseState(std::string_view s) {
  for (auto st :
       {JobState::kQueued, JobState::kRunning, JobState::kCompleted, JobState::kCancelled}) {
    if (ToString(st) == s) return st;
  }
  return std::nullopt;
}

json::object DocObject(const Job& j) {
  json::array placement;
  for (const auto& p : j.placement) {
    json::array gpus;
    for (int g : p.gpus) gpus.push_back(g);
    placement.push_back(json::object{{"node", p.node}, {"gpus", std::move(gpus)}});
  }
  return json::object{{"team", j.spec.team},
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
                      {"sim_profile", j.spec.sim_profile},
                      {"gpus_per_node", j.spec.gpus_per_node},
                      {"moves", j.moves},
                      {"done_ms", j.done_ms},
                      {"alloc_wait_ms", j.alloc_wait_ms},
                      {"reason", j.reason},
                      {"source", j.source},
                      {"external_id", j.external_id},
                      {"user", j.user},
                      {"placement", std::move(placement)}};
}

std::string ToDoc(const Job& j) { return JsonText(DocObject(j)); }

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
  if (const auto* v = o.if_contains("sim_profile")) j.spec.sim_profile = v->as_string();
  if (o.contains("moves")) j.moves = static_cast<int>(num("moves"));
  if (o.contains("gpus_per_node")) j.spec.gpus_per_node = static_cast<int>(num("gpus_per_node"));
  if (o.contains("done_ms")) j.done_ms = num("done_ms");
  if (o.contains("alloc_wait_ms")) j.alloc_wait_ms = num("alloc_wait_ms");
  j.reason = str("reason");
  if (o.contains("source")) j.source = str("source");
  if (o.contains("external_id")) j.external_id = str("external_id");
  if (o.contains("user")) j.user = str("user");
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

// A job's state with the nodes and GPUs it holds: what its allocation audit records follow.
std::string AllocationKey(const Job& j) {
  std::string key(ToString(j.state));
  for (const auto& p : j.placement) {
    key += " " + p.node + ":";
    for (int g : p.gpus) key += std::to_string(g) + ",";
  }
  return key;
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

JobService::JobService(FleetService& fleet, store::JobStore& store, std::shared_ptr<Clock> clock,
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
  for (const auto& r : records.value()) TakeLocked(r);
  UpdateBusyLocked(clock_->NowMs());
  return {};
}

void JobService::TakeLocked(const JobRecord& r) {
  try {
    Job j = FromRecord(r);
    next_id_ = std::max(next_id_, j.id + 1);
    followed_ms_ = std::max(followed_ms_, r.updated_ms);
    int64_t id = j.id;
    Job& kept = jobs_[id] = std::move(j);
    if (!kept.source.empty()) {
      external_[kept.source + "/" + kept.spec.cluster + "/" + kept.external_id] = id;
    }
    if (kept.state == JobState::kQueued || kept.state == JobState::kRunning) {
      live_[id] = &kept;
      audited_[id] = AllocationKey(kept);  // recorded already
    } else {
      live_.erase(id);
      audited_.erase(id);
    }
  } catch (const std::exception& e) {
    spdlog::error("jobs: stored job {} is unreadable: {}", r.id, e.what());
  }
}

void JobService::Persist(const std::vector<int64_t>& ids) {
  std::vector<JobRecord> records;
  std::vector<AuditRecord> allocations;
  std::set<int64_t> seen;
  {
    std::lock_guard lock(mu_);
    if (ids.empty() && unsaved_.empty()) return;
    // Changes whose write failed while the store was away go with these.
    seen.swap(unsaved_);
    seen.insert(ids.begin(), ids.end());
    for (int64_t id : seen) {
      auto it = jobs_.find(id);
      if (it == jobs_.end()) continue;
      const Job& j = it->second;
      records.push_back({j.id, std::string(ToString(j.state)), ToDoc(j), clock_->NowMs()});
      if (!audit_ || !j.source.empty()) continue;
      // The allocation's changes, once each: the state with the nodes and GPUs it holds.
      std::string key = AllocationKey(j);
      auto& last = audited_[id];
      if (last == key) continue;
      bool requeued = j.state == JobState::kQueued && !last.empty();
      last = key;
      AuditRecord a;
      a.time_ms = clock_->NowMs();
      a.actor = "scheduler";
      a.action = j.state == JobState::kRunning  ? "job started"
                 : requeued                     ? "job requeued"
                 : j.state == JobState::kQueued ? "job queued"
                                                : "job ended";
      a.target = "job/" + std::to_string(id);
      a.status = 200;
      a.result = j.state == JobState::kRunning || j.state == JobState::kQueued ? "ok" : j.reason;
      if (a.result.empty()) a.result = std::string(ToString(j.state));
      json::object after = DocObject(j);
      after["state"] = ToString(j.state);
      a.after = JsonText(after);
      allocations.push_back(std::move(a));
      if (j.state != JobState::kQueued && j.state != JobState::kRunning) audited_.erase(id);
    }
  }
  for (const auto& a : allocations) {
    if (auto s = audit_->AppendAudit(a); !s.ok()) {
      spdlog::error("jobs: audit of {} failed: {}", a.target, s.error().message);
    }
  }
  if (auto s = store_.SaveJobs(records); !s.ok()) {
    spdlog::error("jobs: saving {} job(s) failed, kept for a retry: {}", records.size(),
                  s.error().message);
    std::lock_guard lock(mu_);
    unsaved_.insert(seen.begin(), seen.end());
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
  if (auto clusters = fleet_.Clusters(); clusters.ok()) {
    for (const auto& c : clusters.value()) {
      if (c.name == pool->cluster && !c.scheduler.type.empty()) {
        return MakeError(ErrorCode::kConflict,
                         "cluster '" + c.name + "' is scheduled by " + c.scheduler.type +
                             ": submit the job there (sbatch); gpufleet follows its jobs");
      }
    }
  }
  if (teams_) GF_TRY(teams_->CheckJob(spec.team, spec.project));
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
  if (!spec.sim_profile.empty()) {
    if (!IsSimProfile(spec.sim_profile)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "'sim_profile' must be training, inference, bursty or idle, not '" +
                           spec.sim_profile + "'");
    }
    // Only the simulator's GPUs can be told how to behave.
    bool real = !pool->exporters.empty();
    NodeFilter in_pool;
    in_pool.pool = pool->name;
    fleet_.ForEachNode(in_pool, [&](const Node& n) { real = real || !n.simulated; });
    if (real) {
      return MakeError(ErrorCode::kInvalidArgument, "'sim_profile' is for simulated pools: pool '" +
                                                        pool->name + "' has real nodes");
    }
  }
  spec.pool = pool->name;
  spec.cluster = pool->cluster;
  spec.gpu_model = pool->gpu_model;
  int64_t now = clock_->NowMs();
  std::vector<int64_t> changed;
  Job j;
  {
    std::lock_guard lock(mu_);
    j.id = next_id_++;
  }
  const int64_t id = j.id;
  j.spec = std::move(spec);
  j.submit_ms = j.queued_ms = now;
  j.reason = Waiting(j.spec.gpus);
  // Stored before it is acknowledged: a job the API accepted survives the store going away.
  if (auto s = store_.SaveJobs({{id, std::string(ToString(j.state)), ToDoc(j), now}}); !s.ok()) {
    return MakeError(s.error().code, "job not submitted: " + s.error().message);
  }
  {
    std::lock_guard lock(mu_);
    live_[id] = &(jobs_[id] = std::move(j));
    // Stored as queued already: a placement or a new reason adds it to `changed`.
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
    if (!j.source.empty()) {
      return MakeError(ErrorCode::kConflict, "job " + std::to_string(id) + " is " + j.source +
                                                 " job " + j.external_id + ": cancel it in " +
                                                 j.source + ", gpufleet only follows it");
    }
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
  size_t total = 0;
  return List(f, 0, SIZE_MAX, total);
}

std::vector<Job> JobService::List(const JobFilter& f, size_t offset, size_t limit,
                                  size_t& total) const {
  auto matches = [&f](const Job& j) {
    if (!f.state.empty() && ToString(j.state) != f.state) return false;
    if (!f.source.empty() && (j.source.empty() ? "gpufleet" : j.source) != f.source) return false;
    if (!f.team.empty() && j.spec.team != f.team) return false;
    if (!f.pool.empty() && j.spec.pool != f.pool) return false;
    if (!f.cluster.empty() && j.spec.cluster != f.cluster) return false;
    return f.clusters.empty() ||
           std::find(f.clusters.begin(), f.clusters.end(), j.spec.cluster) != f.clusters.end();
  };
  std::vector<Job> out;
  total = 0;
  auto take = [&](const Job& j) {
    if (!matches(j)) return;
    if (total >= offset && out.size() < limit) out.push_back(j);
    ++total;
  };
  std::lock_guard lock(mu_);
  // Queued and running jobs are the live index: no need to walk the ended ones kept.
  if (f.state == "queued" || f.state == "running") {
    for (auto it = live_.rbegin(); it != live_.rend(); ++it) take(*it->second);  // newest first
  } else {
    for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) take(it->second);
  }
  return out;
}

void JobService::RecordEndLocked(const Job& j, int64_t now, const char* outcome) {
  if (j.state != JobState::kRunning || j.placement.empty()) return;
  if (ended_.size() >= 100'000) {
    spdlog::warn("jobs: the usage ledger is not taking ended allocations; dropping the oldest");
    ended_.erase(ended_.begin(), ended_.begin() + 10'000);
  }
  EndedAllocation a;
  a.job = j.id;
  a.team = j.spec.team;
  a.project = j.spec.project;
  a.cluster = j.spec.cluster;
  a.pool = j.spec.pool;
  a.gpu_model = j.spec.gpu_model;
  a.gpus = j.spec.gpus;
  a.placement = j.placement;
  a.start_ms = j.start_ms;
  a.end_ms = now;
  a.wait_ms = j.alloc_wait_ms;
  a.outcome = outcome;
  a.source = j.source;
  a.external_id = j.external_id;
  ended_.push_back(std::move(a));
}

std::vector<EndedAllocation> JobService::TakeEnded() {
  std::lock_guard lock(mu_);
  std::vector<EndedAllocation> out;
  out.swap(ended_);
  return out;
}

void JobService::EndLocked(Job& j, JobState state, int64_t now, const std::string& reason) {
  if (j.state == JobState::kRunning) {
    RecordEndLocked(j, now, state == JobState::kCompleted ? "completed" : "cancelled");
    j.gpu_hours += RunHours(j, now);
  }
  j.state = state;
  live_.erase(j.id);
  j.end_ms = now;
  j.reason = reason;
  j.placement.clear();
}

void JobService::SetDrainTimeout(const std::string& node, int64_t timeout_ms) {
  std::lock_guard lock(mu_);
  drain_timeouts_[node] = timeout_ms;
}

// A running job back in the queue, to start over (its node went away or is draining).
void JobService::RequeueLocked(Job& j, int64_t now, const std::string& why) {
  RecordEndLocked(j, now, "requeued");
  j.gpu_hours += RunHours(j, now);
  j.state = JobState::kQueued;
  j.queued_ms = now;
  j.done_ms = 0;  // a requeued job starts over
  ++j.requeues;
  j.reason = "requeued: " + why;
  j.placement.clear();
  spdlog::info("job {} requeued: {}", j.id, why);
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
      prune_before = now - retention_ms_;
      PruneLocked(now);
    }
    for (auto it = live_.begin(); it != live_.end();) {
      auto [id, job] = *it++;  // EndLocked below takes this job out of live_
      Job& j = *job;
      // Another scheduler's jobs end, move and requeue as its polls say (SyncExternal).
      if (j.state != JobState::kRunning || !j.source.empty()) continue;
      if (j.spec.duration_ms > 0 && now >= j.start_ms + j.spec.duration_ms - j.done_ms) {
        EndLocked(j, JobState::kCompleted, now, "ran its duration");
        changed.push_back(id);
        continue;
      }
      for (const auto& p : j.placement) {
        auto st = states.find(p.node);
        auto drain = draining_since.find(p.node);
        auto own = drain_timeouts_.find(p.node);
        int64_t timeout = own != drain_timeouts_.end() ? own->second : drain_timeout_ms_;
        bool timed_out = drain != draining_since.end() && now - drain->second >= timeout;
        if (st != states.end() && !Evicts(st->second) && !timed_out) continue;
        std::string why =
            st == states.end() ? "was removed"
            : timed_out ? "did not finish draining within " + std::to_string(timeout / 1000) + " s"
                        : "is " + std::string(ToString(st->second));
        RequeueLocked(j, now, "node " + p.node + " " + why);
        changed.push_back(id);
        break;
      }
    }
    std::erase_if(drain_timeouts_, [&](const auto& kv) {
      auto st = states.find(kv.first);
      return st == states.end() ||
             (st->second != NodeState::kDraining && st->second != NodeState::kReady &&
              st->second != NodeState::kDegraded && st->second != NodeState::kCordoned);
    });
    count = static_cast<int>(changed.size());
    count += ScheduleLocked(now, changed);
    UpdateBusyLocked(now);
  }
  for (const auto& [node, since] : draining_since) {
    if (!Busy(node) && !(hold_ && hold_(node))) drained.push_back(node);
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

}  // namespace gpufleet::workload
