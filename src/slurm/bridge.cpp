#include "slurm/bridge.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "common/command.h"
#include "common/strings.h"
#include "fleet/fleet.h"
#include "fleet/teams.h"
#include "slurm/slurm.h"

namespace gpufleet::slurm {

struct Bridge::Poll {
  int64_t time_ms = 0;
  int64_t duration_ms = 0;
  std::string error;  // empty: ok
  std::vector<Job> jobs;
  std::vector<Node> nodes;
};

namespace {

constexpr size_t kMaxClientOutput = 512u << 20;  // squeue --json of 100,000 jobs fits
constexpr int64_t kAskAgainMs = 30'000;          // a drain or resume Slurm did not apply

bool InPartitions(const Scheduler& s, const std::string& partitions) {
  if (s.partitions.empty()) return true;
  for (const auto& p : Split(partitions, ',')) {
    if (std::find(s.partitions.begin(), s.partitions.end(), p) != s.partitions.end()) return true;
  }
  return false;
}

bool InPartitions(const Scheduler& s, const std::vector<std::string>& partitions) {
  if (s.partitions.empty()) return true;
  for (const auto& p : partitions) {
    if (std::find(s.partitions.begin(), s.partitions.end(), p) != s.partitions.end()) return true;
  }
  return false;
}

std::string Trim(std::string s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

// One client run: its stdout, or why there is none.
Result<std::string> Client(const Scheduler& s, const std::string& program,
                           const std::vector<std::string>& args, const std::atomic<bool>* cancel) {
  const std::string path = s.bin_dir + "/" + program;
  std::vector<std::pair<std::string, std::string>> env;
  if (!s.conf.empty()) env.emplace_back("SLURM_CONF", s.conf);
  auto ran = RunProgramOutput(path, args, Bridge::kClientTimeoutMs, env, kMaxClientOutput, cancel);
  if (!ran.ok()) return ran.error();
  if (ran->timed_out) {
    return MakeError(ErrorCode::kUnavailable, program + " did not answer within " +
                                                  std::to_string(Bridge::kClientTimeoutMs / 1000) +
                                                  " s");
  }
  if (ran->exit_code != 0) {
    std::string said = Trim(ran->errors.empty() ? ran->output.substr(0, 400) : ran->errors);
    std::replace(said.begin(), said.end(), '\n', ' ');
    return MakeError(ErrorCode::kUnavailable, program + " exited with " +
                                                  std::to_string(ran->exit_code) +
                                                  (said.empty() ? "" : ": " + said));
  }
  if (ran->truncated) {
    return MakeError(ErrorCode::kUnavailable, program + " printed more than " +
                                                  std::to_string(kMaxClientOutput >> 20) + " MiB");
  }
  return std::move(ran->output);
}

// The reason gpufleet gives Slurm: one line, what gpufleet's node state says.
std::string DrainReason(const gpufleet::Node& n) {
  std::string why = n.reason.empty() ? std::string(ToString(n.state)) : n.reason;
  for (char& c : why) {
    if (c == '\n' || c == '\r' || c == '"') c = ' ';
  }
  return std::string(kReasonPrefix) + " " + why.substr(0, 200);
}

// The gpufleet states that take a node out of Slurm's scheduling, and those that put it back;
// others (unreachable, unhealthy without remediation, joining) change nothing in Slurm. An
// unreachable node counts as the state it returns to (a node rebooting while drained).
bool WantsDrain(const gpufleet::Node& n) {
  const NodeState s = n.state == NodeState::kUnreachable ? n.resume_state : n.state;
  return s == NodeState::kCordoned || s == NodeState::kDraining || s == NodeState::kDrained ||
         s == NodeState::kMaintenance || s == NodeState::kDecommissioning;
}
bool InService(const gpufleet::Node& n) {
  return n.state == NodeState::kReady || n.state == NodeState::kDegraded;
}

// A cordon that the bridge made for a drain someone set in Slurm.
bool CordonedForSlurm(const gpufleet::Node& n) {
  return n.state == NodeState::kCordoned && n.reason.starts_with("cordon by slurm");
}

}  // namespace

Status CheckClients(const std::vector<Cluster>& clusters, const std::string& file) {
  for (size_t i = 0; i < clusters.size(); ++i) {
    const Scheduler& s = clusters[i].scheduler;
    if (s.type != "slurm") continue;
    const std::string at = file + ": clusters[" + std::to_string(i) + "].scheduler.";
    for (const char* program : {"scontrol", "squeue", "sinfo"}) {
      const std::string path = s.bin_dir + "/" + program;
      if (::access(path.c_str(), X_OK) != 0) {
        return MakeError(
            ErrorCode::kInvalidArgument,
            at + "bin_dir: " + path + " is not an executable file (Slurm's clients: slurm-client)");
      }
    }
    if (!s.conf.empty() && ::access(s.conf.c_str(), R_OK) != 0) {
      return MakeError(ErrorCode::kInvalidArgument, at + "conf: " + s.conf + " cannot be read");
    }
  }
  return {};
}

workload::JobState ToJobState(const std::string& s, bool has_nodes) {
  using workload::JobState;
  if (s == "PENDING" || s == "REQUEUED" || s == "REQUEUE_HOLD" || s == "REQUEUE_FED") {
    return JobState::kQueued;
  }
  if (s == "RUNNING" || s == "COMPLETING" || s == "SUSPENDED" || s == "CONFIGURING" ||
      s == "STOPPED" || s == "SIGNALING" || s == "RESIZING" || s == "STAGE_OUT") {
    return JobState::kRunning;
  }
  if (s == "CANCELLED") return JobState::kCancelled;
  if (s == "COMPLETED" || s == "FAILED" || s == "TIMEOUT" || s == "NODE_FAIL" ||
      s == "OUT_OF_MEMORY" || s == "BOOT_FAIL" || s == "DEADLINE" || s == "PREEMPTED" ||
      s == "REVOKED" || s == "SPECIAL_EXIT") {
    return JobState::kCompleted;
  }
  return has_nodes ? JobState::kRunning : JobState::kQueued;
}

std::vector<workload::ExternalJob> ToExternalJobs(const std::vector<Job>& jobs,
                                                  const Scheduler& scheduler,
                                                  const std::map<std::string, std::string>& nodes,
                                                  const std::map<std::string, std::string>& pool_of,
                                                  const std::vector<Pool>& pools,
                                                  const TeamService* teams) {
  std::vector<workload::ExternalJob> out;
  out.reserve(jobs.size());
  std::map<std::string, std::string> team_of;  // account -> team, asked once per account
  for (const auto& j : jobs) {
    if (j.gpus_requested <= 0 || !InPartitions(scheduler, j.partition)) continue;
    workload::ExternalJob e;
    e.id = j.id;
    e.user = j.user;
    e.state = ToJobState(j.state, !j.nodes.empty());
    e.submit_ms = j.submit_s * 1000;
    e.start_ms = j.start_s * 1000;
    e.end_ms = e.state == workload::JobState::kQueued || e.state == workload::JobState::kRunning
                   ? 0
                   : j.end_s * 1000;
    auto [it, fresh] = team_of.try_emplace(j.account);
    if (fresh) it->second = teams ? teams->ForSlurmAccount(j.account) : j.account;
    e.spec.team = it->second;
    e.spec.project = !j.wckey.empty() ? j.wckey : j.name;
    e.spec.gpus = j.gpus_requested;
    if (e.state == workload::JobState::kRunning) {
      for (size_t i = 0; i < j.nodes.size(); ++i) {
        auto n = nodes.find(j.nodes[i]);
        if (n == nodes.end()) continue;  // a node not in this fleet
        workload::Placement p{n->second, i < j.gpus.size() ? j.gpus[i] : std::vector<int>{}};
        e.placement.push_back(std::move(p));
      }
      if (e.placement.empty()) continue;  // none of its nodes is gpufleet's
      if (auto p = pool_of.find(e.placement.front().node); p != pool_of.end()) {
        e.spec.pool = p->second;
      }
      e.reason = "running in slurm (job " + j.id + ")";
    } else if (e.state == workload::JobState::kQueued) {
      e.reason = "slurm: pending (" + j.reason + ")";
    } else {
      e.reason = "slurm: " + j.state;
    }
    if (e.spec.pool.empty()) {  // pending: the pool named as its partition, else the first
      for (const auto& p : pools) {
        for (const auto& part : Split(j.partition, ',')) {
          if (part == p.name) e.spec.pool = p.name;
        }
      }
      if (e.spec.pool.empty() && !pools.empty()) e.spec.pool = pools.front().name;
    }
    for (const auto& p : pools) {
      if (p.name == e.spec.pool) e.spec.gpu_model = p.gpu_model;
    }
    out.push_back(std::move(e));
  }
  return out;
}

Bridge::Bridge(FleetService& fleet, workload::JobService& jobs, const TeamService* teams,
               std::shared_ptr<Clock> clock)
    : fleet_(fleet), jobs_(jobs), teams_(teams), clock_(std::move(clock)) {}

Bridge::~Bridge() { Stop(); }

void Bridge::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  stopping_ = false;
  thread_ = std::thread([this] { Run(); });
}

void Bridge::Stop() {
  stopping_ = true;  // a client running now is killed
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Bridge::Run() {
  for (;;) {
    std::optional<Command> command;
    {
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, std::chrono::milliseconds(250),
                     [this] { return stop_ || !commands_.empty(); });
      if (stop_) return;
      if (!commands_.empty()) {
        command = std::move(commands_.front());
        commands_.pop_front();
      }
    }
    if (command) {
      RunCommand(*command);
      continue;
    }
    auto clusters = fleet_.Clusters();
    if (!clusters.ok()) continue;
    const int64_t now = clock_->NowMs();
    for (const auto& c : clusters.value()) {
      if (c.scheduler.type != "slurm") continue;
      {
        std::lock_guard lock(mu_);
        if (stop_) return;
        if (now < next_poll_ms_[c.name]) continue;
        next_poll_ms_[c.name] = now + c.scheduler.poll_ms;
      }
      PollCluster(c);
    }
  }
}

void Bridge::PollCluster(const Cluster& c) {
  auto poll = std::make_unique<Poll>();
  const auto began = std::chrono::steady_clock::now();
  poll->time_ms = clock_->NowMs();
  auto nodes = Client(c.scheduler, "sinfo", {"--json"}, &stopping_);
  auto jobs = nodes.ok() ? Client(c.scheduler, "squeue", {"--json"}, &stopping_)
                         : Result<std::string>(nodes.error());
  if (nodes.ok() && jobs.ok()) {
    auto parsed_nodes = ParseSinfo(nodes.value());
    auto parsed_jobs = ParseSqueue(jobs.value());
    if (!parsed_nodes.ok()) {
      poll->error = parsed_nodes.error().message;
    } else if (!parsed_jobs.ok()) {
      poll->error = parsed_jobs.error().message;
    } else {
      poll->nodes = std::move(parsed_nodes).value();
      poll->jobs = std::move(parsed_jobs).value();
    }
  } else {
    poll->error = (nodes.ok() ? jobs.error() : nodes.error()).message;
  }
  poll->duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - began)
                          .count();
  std::lock_guard lock(mu_);
  ClusterStatus& st = status_[c.name];
  st.cluster = c.name;
  st.last_poll_ms = poll->time_ms;
  ++st.polls;
  if (poll->error.empty()) {
    st.state = "ok";
    st.error.clear();
    st.last_ok_ms = poll->time_ms;
    st.poll_duration_ms = poll->duration_ms;
  } else {
    if (st.state != "error" || st.error != poll->error) {
      spdlog::warn("slurm: cluster {}: {}", c.name, poll->error);
    }
    st.state = "error";
    st.error = poll->error;
    ++st.failures;
  }
  polled_[c.name] = std::move(poll);
}

void Bridge::RunCommand(const Command& c) {
  auto ran = Client(c.scheduler, "scontrol", c.args, &stopping_);
  std::lock_guard lock(mu_);
  ClusterStatus& st = status_[c.cluster];
  ++st.commands;
  if (!ran.ok()) {
    ++st.command_failures;
    st.last_command_error = c.what + " " + c.slurm_name + ": " + ran.error().message;
    spdlog::warn("slurm: cluster {}: {}", c.cluster, st.last_command_error);
    asked_.erase(c.node);  // asked again at the next sync
    return;
  }
  spdlog::info("slurm: cluster {}: {} {}", c.cluster, c.what, c.slurm_name);
  next_poll_ms_[c.cluster] = 0;  // see what Slurm made of it at once
}

Status Bridge::Sync() {
  auto clusters = fleet_.Clusters();
  if (!clusters.ok()) return clusters.error();
  std::map<std::string, std::unique_ptr<Poll>> polled;
  std::set<std::string> members;  // the nodes of Slurm clusters
  for (const auto& c : clusters.value()) {
    if (c.scheduler.type != "slurm") continue;
    NodeFilter filter;
    filter.cluster = c.name;
    fleet_.ForEachNode(filter, [&](const gpufleet::Node& n) { members.insert(n.name); });
  }
  {
    std::lock_guard lock(mu_);
    polled.swap(polled_);
    members_ = std::move(members);
  }
  for (const auto& c : clusters.value()) {
    if (c.scheduler.type != "slurm") continue;
    if (auto p = polled.find(c.name); p != polled.end() && p->second->error.empty()) {
      Apply(c, *p->second);
    }
    Reconcile(c);
  }
  return {};
}

void Bridge::Apply(const Cluster& c, Poll& poll) {
  // The cluster's gpufleet nodes by their Slurm names.
  std::map<std::string, std::string> by_slurm, pool_of;
  std::map<std::string, gpufleet::Node> nodes;
  NodeFilter filter;
  filter.cluster = c.name;
  fleet_.ForEachNode(filter, [&](const gpufleet::Node& n) {
    by_slurm[SchedulerNodeName(c.scheduler.node_name, n.name)] = n.name;
    pool_of[n.name] = n.pool;
    gpufleet::Node copy;
    copy.name = n.name;
    copy.state = n.state;
    copy.reason = n.reason;
    nodes[n.name] = std::move(copy);
  });
  std::vector<Pool> pools;
  if (auto all = fleet_.Pools(); all.ok()) {
    for (const auto& p : all.value()) {
      if (p.cluster == c.name) pools.push_back(p);
    }
  }
  auto jobs = ToExternalJobs(poll.jobs, c.scheduler, by_slurm, pool_of, pools, teams_);
  auto counts = jobs_.SyncExternal("slurm", c.name, jobs);
  if (counts.added || counts.started || counts.ended) {
    spdlog::info("slurm: cluster {}: {} job(s) new, {} started, {} ended", c.name, counts.added,
                 counts.started, counts.ended);
  }
  std::vector<NodeView> views;
  std::set<std::string> seen;
  for (const auto& n : poll.nodes) {
    if (!InPartitions(c.scheduler, n.partitions)) continue;
    NodeView v{n.name, "", n.state, n.flags, n.reason, n.Drained()};
    if (auto m = by_slurm.find(n.name); m != by_slurm.end()) {
      v.node = m->second;
      seen.insert(v.node);
    }
    views.push_back(std::move(v));
  }
  int running = 0, pending = 0;
  for (const auto& j : jobs) {
    running += j.state == workload::JobState::kRunning;
    pending += j.state == workload::JobState::kQueued;
  }
  std::vector<std::pair<std::string, std::string>> went_down;
  {
    std::lock_guard lock(mu_);
    ClusterStatus& st = status_[c.name];
    st.jobs_running = running;
    st.jobs_pending = pending;
    st.nodes = views;
    for (const auto& name : st.unknown_nodes) unknown_.erase(name);
    st.unknown_nodes.clear();
    for (const auto& [name, n] : nodes) {
      if (!seen.count(name)) {
        st.unknown_nodes.push_back(name);
        unknown_.insert(name);
        views_.erase(name);
      }
    }
    for (const auto& v : st.nodes) {
      if (v.node.empty()) continue;
      const bool down = v.state == "down" || v.state == "fail" ||
                        std::find(v.flags.begin(), v.flags.end(), "FAIL") != v.flags.end();
      if (down && down_.insert(v.node).second) went_down.emplace_back(v.node, v.reason);
      if (!down) down_.erase(v.node);
      views_[v.node] = v;
    }
  }
  for (const auto& [node, reason] : went_down) {
    (void)fleet_.NoteEvent(
        node, "slurm marked it DOWN: " + (reason.empty() ? "no reason given" : reason), "slurm");
  }
  FollowForeignDrains(views, nodes);
}

// Drains someone else set in Slurm: the node shows cordoned by slurm, and back when lifted.
void Bridge::FollowForeignDrains(const std::vector<NodeView>& views,
                                 std::map<std::string, gpufleet::Node>& nodes) {
  for (const auto& v : views) {
    if (v.node.empty()) continue;
    const gpufleet::Node& n = nodes[v.node];
    const bool drain = std::find(v.flags.begin(), v.flags.end(), "DRAIN") != v.flags.end();
    const bool ours = v.reason.starts_with(kReasonPrefix);
    if (drain && !ours && (n.state == NodeState::kReady || n.state == NodeState::kDegraded)) {
      (void)fleet_.Act(v.node, NodeAction::kCordon, "slurm",
                       "drained in slurm: " + (v.reason.empty() ? "no reason given" : v.reason));
    } else if (!drain && CordonedForSlurm(n)) {
      (void)fleet_.Act(v.node, NodeAction::kUncordon, "slurm", "resumed in slurm");
    }
  }
}

void Bridge::Reconcile(const Cluster& c) {
  const int64_t now = clock_->NowMs();
  std::vector<gpufleet::Node> nodes;
  NodeFilter filter;
  filter.cluster = c.name;
  fleet_.ForEachNode(filter, [&](const gpufleet::Node& n) {
    gpufleet::Node copy;
    copy.name = n.name;
    copy.state = n.state;
    copy.resume_state = n.resume_state;
    copy.reason = n.reason;
    nodes.push_back(std::move(copy));
  });
  std::lock_guard lock(mu_);
  for (const auto& n : nodes) {
    auto v = views_.find(n.name);
    if (v == views_.end()) continue;  // not polled yet, or unknown to Slurm
    const NodeView& view = v->second;
    const bool drain_set =
        std::find(view.flags.begin(), view.flags.end(), "DRAIN") != view.flags.end();
    const bool ours = view.reason.starts_with(kReasonPrefix);
    std::string want;
    if (WantsDrain(n) && !CordonedForSlurm(n) && !drain_set) want = "drain";
    if (InService(n) && drain_set && ours) want = "resume";
    if (want.empty()) {
      asked_.erase(n.name);
      continue;
    }
    auto asked = asked_.find(n.name);
    if (asked != asked_.end() && asked->second.first == want &&
        now - asked->second.second < kAskAgainMs) {
      continue;
    }
    asked_[n.name] = {want, now};
    Command cmd{c.name, n.name, view.slurm_name, c.scheduler, {}, want};
    cmd.args = {"update", "NodeName=" + view.slurm_name};
    if (want == "drain") {
      cmd.args.push_back("State=DRAIN");
      cmd.args.push_back("Reason=" + DrainReason(n));
    } else {
      cmd.args.push_back("State=RESUME");
    }
    commands_.push_back(std::move(cmd));
  }
  if (!commands_.empty()) wake_.notify_all();
}

bool Bridge::Holds(const std::string& node) const {
  std::lock_guard lock(mu_);
  if (!members_.count(node)) return false;
  auto v = views_.find(node);
  if (v == views_.end()) {
    // Unknown to a Slurm that answered: Slurm runs nothing there. Not polled yet, or Slurm
    // unreachable: held.
    return !unknown_.count(node);
  }
  return !v->second.drained;
}

std::vector<ClusterStatus> Bridge::Clusters() const {
  std::lock_guard lock(mu_);
  std::vector<ClusterStatus> out;
  for (const auto& [name, st] : status_) out.push_back(st);
  return out;
}

std::string Bridge::MetricsText() const {
  std::lock_guard lock(mu_);
  if (status_.empty()) return "";
  std::string out =
      "# HELP gpufleet_slurm_up Whether the last poll of the cluster's Slurm succeeded.\n"
      "# TYPE gpufleet_slurm_up gauge\n";
  for (const auto& [name, st] : status_) {
    out += "gpufleet_slurm_up{cluster=\"" + name + "\"} " + (st.state == "ok" ? "1" : "0") + "\n";
  }
  out +=
      "# HELP gpufleet_slurm_poll_failures_total Polls of the cluster's Slurm that failed.\n"
      "# TYPE gpufleet_slurm_poll_failures_total counter\n";
  for (const auto& [name, st] : status_) {
    out += "gpufleet_slurm_poll_failures_total{cluster=\"" + name + "\"} " +
           std::to_string(st.failures) + "\n";
  }
  out +=
      "# HELP gpufleet_slurm_command_failures_total scontrol updates (drain, resume) that "
      "failed.\n# TYPE gpufleet_slurm_command_failures_total counter\n";
  for (const auto& [name, st] : status_) {
    out += "gpufleet_slurm_command_failures_total{cluster=\"" + name + "\"} " +
           std::to_string(st.command_failures) + "\n";
  }
  out +=
      "# HELP gpufleet_slurm_jobs The cluster's Slurm jobs that use GPUs, by state.\n"
      "# TYPE gpufleet_slurm_jobs gauge\n";
  for (const auto& [name, st] : status_) {
    out += "gpufleet_slurm_jobs{cluster=\"" + name + "\",state=\"running\"} " +
           std::to_string(st.jobs_running) + "\n";
    out += "gpufleet_slurm_jobs{cluster=\"" + name + "\",state=\"pending\"} " +
           std::to_string(st.jobs_pending) + "\n";
  }
  return out;
}

}  // namespace gpufleet::slurm
