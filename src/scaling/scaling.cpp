#include "scaling/scaling.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <set>

#include "common/json_text.h"
#include "common/strings.h"
#include "sched/policy_json.h"

namespace gpufleet::scaling {
namespace {

namespace json = boost::json;

// Leaves out of `d` the queued jobs that need more than `cap_gpus` (the pool at max_nodes):
// they cannot run however far the pool grows, so they must neither hold it at its maximum nor
// stop consolidation (the Cluster Autoscaler does not scale up for a pod that would not fit on
// a new node either). They stay queued. Returns how many were left out.
int LeaveOutTooLarge(workload::PoolDemand& d, int cap_gpus) {
  int left_out = 0;
  for (auto it = d.queued_by_size.upper_bound(cap_gpus); it != d.queued_by_size.end();) {
    left_out += it->second;
    d.queued_jobs -= it->second;
    d.queued_gpus -= d.queued_gpus_by_size[it->first];
    d.queued_gpus_by_size.erase(it->first);
    it = d.queued_by_size.erase(it);
  }
  return left_out;
}

std::string SampleDoc(const Sample& s) {
  return JsonText(json::object{{"ready", s.ready},
                               {"provisioning", s.provisioning},
                               {"other", s.other},
                               {"target", s.target},
                               {"demand", s.demand_gpus},
                               {"running", s.running_gpus},
                               {"queued", s.queued_gpus},
                               {"forecast", s.forecast_gpus},
                               {"oldest_wait_s", s.oldest_wait_s}});
}

Sample ParseSample(const ScalingSampleRecord& r) {
  Sample s;
  s.time_ms = r.time_ms;
  auto o = json::parse(r.doc).as_object();
  auto i = [&](const char* k) { return static_cast<int>(o.at(k).to_number<int64_t>()); };
  auto d = [&](const char* k) { return o.at(k).to_number<double>(); };
  s.ready = i("ready");
  s.provisioning = i("provisioning");
  s.other = i("other");
  s.target = i("target");
  s.demand_gpus = d("demand");
  s.running_gpus = d("running");
  s.queued_gpus = d("queued");
  s.forecast_gpus = d("forecast");
  s.oldest_wait_s = d("oldest_wait_s");
  return s;
}

bool Live(NodeState s) { return s != NodeState::kRetired && s != NodeState::kDecommissioning; }

}  // namespace

ScalingService::ScalingService(FleetService& fleet, workload::JobService& jobs, Store& store,
                               std::shared_ptr<Clock> clock, ScalingOptions options)
    : fleet_(fleet),
      jobs_(jobs),
      store_(store),
      clock_(std::move(clock)),
      options_(std::move(options)),
      command_(MakeCommandActuator()) {}

ScalingService::~ScalingService() { Stop(); }

void ScalingService::NewTracker(PoolState& st) const {
  double step = std::max(options_.forecast_step_s, st.scaling.policy.interval_s);
  st.tracker = std::make_unique<sched::DemandTracker>(step, st.scaling.policy.lead_time_s,
                                                      st.scaling.policy.interval_s);
  for (const auto& s : st.history) st.tracker->Observe(s.time_ms / 1000.0, s.demand_gpus);
}

Status ScalingService::Load() {
  auto records = store_.ListScalingPolicies();
  if (!records.ok()) return records.error();
  int64_t now = clock_->NowMs();
  std::lock_guard lock(mu_);
  for (const auto& r : records.value()) {
    auto parsed = sched::ParsePoolScaling(r.doc);
    if (!parsed.ok()) {
      spdlog::error("scaling: the stored policy of pool {} is unreadable: {}", r.pool,
                    parsed.error().message);
      continue;
    }
    PoolState& st = pools_[r.pool];
    st.scaling = std::move(parsed).value();
    st.scaling.pool = r.pool;
    st.scaling.updated_ms = r.updated_ms;
    auto samples = store_.ListScalingSamples(r.pool, now - options_.history_ms);
    if (samples.ok()) {
      for (const auto& s : samples.value()) {
        try {
          st.history.push_back(ParseSample(s));
        } catch (const std::exception& e) {
          spdlog::warn("scaling: a stored sample of pool {} is unreadable: {}", r.pool, e.what());
        }
      }
    }
    NewTracker(st);
    if (!st.history.empty()) st.now = st.history.back();
    auto events = store_.ListScaleEvents(r.pool, 500);
    if (events.ok()) {
      // The newest manual action or keep event (among the last 500 events) decides the keep.
      bool keep_seen = false;
      for (const auto& e : events.value()) {
        try {
          auto o = json::parse(e.doc).as_object();
          auto kind = o.at("kind").as_string();
          if (kind == "scale_up" && !st.last_up_ms) st.last_up_ms = e.time_ms;
          if (kind == "scale_down" && !st.last_down_ms) st.last_down_ms = e.time_ms;
          // A person's manual scale (the autoscaler's own "manual" reason is a keep at work).
          bool manual = o.at("reason").as_string() == "manual" && o.at("actor") != kAutoscaler;
          if (keep_seen || (!manual && kind != "keep" && kind != "keep_end")) continue;
          keep_seen = true;
          if (kind == "keep" && o.at("keep_until_ms").to_number<int64_t>() > now) {
            st.keep.min_nodes = static_cast<int>(o.at("keep_min").to_number<int64_t>());
            st.keep.max_nodes = static_cast<int>(o.at("keep_max").to_number<int64_t>());
            st.keep.until_ms = o.at("keep_until_ms").to_number<int64_t>();
            st.keep.actor = std::string(o.at("actor").as_string());
          }
        } catch (const std::exception&) {
        }
      }
    }
    st.next_decision_ms = now;
  }
  return {};
}

void ScalingService::Start() {
  {
    std::lock_guard lock(work_mu_);
    if (worker_.joinable()) return;
    stopping_ = false;
    worker_ = std::thread([this] { Worker(); });
  }
  Resume();
}

void ScalingService::Resume() {
  auto pools = fleet_.Pools();
  if (!pools.ok()) return;
  std::lock_guard lock(mu_);
  for (auto& [name, st] : pools_) {
    if (st.scaling.actuator.type != "sim" || !options_.sim) continue;
    auto pool =
        std::find_if(pools->begin(), pools->end(), [&](const Pool& p) { return p.name == name; });
    if (pool == pools->end()) continue;
    // The nodes this autoscaler started and has not removed, from its events (oldest first).
    auto events = store_.ListScaleEvents(name, 1'000'000);
    if (!events.ok()) continue;
    std::set<std::string> started;
    for (auto it = events->rbegin(); it != events->rend(); ++it) {
      try {
        auto o = json::parse(it->doc).as_object();
        bool up = o.at("kind") == "scale_up";
        bool gone = o.at("kind") == "scale_down" || o.at("kind") == "provision_failed" ||
                    o.at("kind") == "join_timeout";
        for (const auto& n : o.at("nodes").as_array()) {
          if (up) started.insert(std::string(n.as_string()));
          if (gone) started.erase(std::string(n.as_string()));
        }
      } catch (const std::exception&) {
      }
    }
    std::vector<std::string> resume;
    for (const auto& n : started) {
      auto node = fleet_.GetNode(n);
      if (node.ok() && node->pool == name && Live(node->state) && !node->connected) {
        resume.push_back(n);
      }
    }
    if (resume.empty()) continue;
    auto token = fleet_.CreateJoinToken(name, 3'600'000, kAutoscaler);
    if (!token.ok()) continue;
    RecordEvent(name, "resume", 0, 0, 0, "restart",
                "the controller restarted: starting again the simulated nodes it had started",
                resume, kAutoscaler);
    Enqueue(true, *pool, st, resume, token->secret, 0, kAutoscaler);
  }
}

void ScalingService::Stop() {
  {
    std::lock_guard lock(work_mu_);
    stopping_ = true;
  }
  cancel_tunes_ = true;
  work_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

Status ScalingService::Check(const sched::PoolScaling& scaling) const {
  if (auto e = scaling.Validate(); !e.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, e);
  }
  if (scaling.actuator.type == "sim" && !options_.sim) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "actuator.type: this controller runs no simulated nodes; use command");
  }
  if (scaling.policy.max_nodes > 100000) {
    return MakeError(ErrorCode::kInvalidArgument, "max_nodes must be at most 100000");
  }
  return {};
}

Result<sched::PoolScaling> ScalingService::SetPolicy(sched::PoolScaling scaling,
                                                     const std::string& actor, bool* changed,
                                                     const sched::PoolScaling* replaces) {
  if (changed) *changed = false;
  auto pool = fleet_.FindPool(scaling.pool);
  if (!pool.ok()) return pool.error();
  GF_TRY(Check(scaling));
  int64_t now = clock_->NowMs();
  scaling.updated_ms = now;
  std::lock_guard lock(mu_);
  auto it = pools_.find(scaling.pool);
  if (replaces && (it == pools_.end() || sched::PoolScalingJson(it->second.scaling) !=
                                             sched::PoolScalingJson(*replaces))) {
    return MakeError(ErrorCode::kConflict,
                     "the policy of pool '" + scaling.pool + "' changed meanwhile; not set");
  }
  if (it != pools_.end() &&
      sched::PoolScalingJson(it->second.scaling) == sched::PoolScalingJson([&] {
        auto same = scaling;
        same.updated_ms = it->second.scaling.updated_ms;
        return same;
      }())) {
    return it->second.scaling;  // unchanged
  }
  if (changed) *changed = true;
  GF_TRY(store_.SaveScalingPolicy({scaling.pool, sched::PoolScalingJson(scaling), now}));
  PoolState& st = pools_[scaling.pool];
  bool rebuild = !st.tracker || st.scaling.policy.lead_time_s != scaling.policy.lead_time_s ||
                 st.scaling.policy.interval_s != scaling.policy.interval_s;
  st.scaling = scaling;
  if (rebuild) NewTracker(st);
  st.next_decision_ms = now;
  st.held.clear();
  const auto& p = scaling.policy;
  char margin[48] = "";
  if (p.mode == sched::ScaleMode::kPredictive) {
    std::snprintf(margin, sizeof margin, ", forecast margin %g", p.forecast_margin);
  }
  char detail[288];
  std::snprintf(detail, sizeof detail,
                "%s%s, %d..%d nodes, target share %.2f%s, lead time %s, %s actuator",
                scaling.enabled ? "" : "disabled: ", sched::ToString(p.mode), p.min_nodes,
                p.max_nodes, p.target_share, margin, sched::FormatSeconds(p.lead_time_s).c_str(),
                scaling.actuator.type.c_str());
  RecordEvent(scaling.pool, "policy", 0, 0, 0, "policy", std::string("policy set: ") + detail, {},
              actor);
  return scaling;
}

Status ScalingService::DeletePolicy(const std::string& pool, const std::string& actor) {
  std::lock_guard lock(mu_);
  GF_TRY(store_.DeleteScalingPolicy(pool));
  pools_.erase(pool);
  RecordEvent(pool, "policy", 0, 0, 0, "policy", "policy deleted: the pool is no longer scaled", {},
              actor);
  return {};
}

std::vector<sched::PoolScaling> ScalingService::Policies() const {
  std::lock_guard lock(mu_);
  std::vector<sched::PoolScaling> out;
  for (const auto& [name, st] : pools_) out.push_back(st.scaling);
  return out;
}

PoolStatus ScalingService::StatusLocked(const std::string& name, const PoolState& st,
                                        int gpus_per_node) const {
  PoolStatus s;
  s.scaling = st.scaling;
  s.gpus_per_node = gpus_per_node;
  s.now = st.now;
  // The nodes as they are now (a manual scale or a node joining shows at once); demand and
  // the forecast as of the last decision.
  Counts c = CountLocked(name);
  s.now.ready = c.ready;
  s.now.provisioning = c.provisioning;
  s.now.other = c.other;
  s.decision = st.decision;
  s.last_up_ms = st.last_up_ms;
  s.last_down_ms = st.last_down_ms;
  s.forecast = st.tracker->forecaster().stats();
  s.forecast_steps = st.tracker->forecaster().observed();
  s.last_error = st.last_error;
  s.keep = st.keep;
  return s;
}

std::vector<PoolStatus> ScalingService::Pools() const {
  std::map<std::string, int> per_node;
  if (auto pools = fleet_.Pools(); pools.ok()) {
    for (const auto& p : pools.value()) per_node[p.name] = p.gpus_per_node;
  }
  std::vector<PoolStatus> out;
  std::lock_guard lock(mu_);
  for (const auto& [name, st] : pools_) {
    out.push_back(StatusLocked(name, st, per_node.count(name) ? per_node[name] : 0));
  }
  return out;
}

Result<PoolStatus> ScalingService::Get(const std::string& pool) const {
  auto p = fleet_.FindPool(pool);
  if (!p.ok()) return p.error();
  std::lock_guard lock(mu_);
  auto it = pools_.find(pool);
  if (it == pools_.end()) {
    return MakeError(ErrorCode::kNotFound, "pool '" + pool + "' has no scaling policy");
  }
  return StatusLocked(pool, it->second, p->gpus_per_node);
}

Result<std::vector<ScaleEventRecord>> ScalingService::Events(const std::string& pool,
                                                             int limit) const {
  return store_.ListScaleEvents(pool, limit);
}

std::vector<Sample> ScalingService::History(const std::string& pool, int64_t since_ms) const {
  std::lock_guard lock(mu_);
  std::vector<Sample> out;
  auto it = pools_.find(pool);
  if (it == pools_.end()) return out;
  for (const auto& s : it->second.history) {
    if (s.time_ms >= since_ms) out.push_back(s);
  }
  return out;
}

ScalingService::Counts ScalingService::CountLocked(const std::string& pool) const {
  Counts c;
  NodeFilter filter;
  filter.pool = pool;
  fleet_.ForEachNode(filter, [&](const Node& n) {
    if (n.state == NodeState::kReady) {
      ++c.ready;
    } else if (n.state == NodeState::kProvisioning || n.state == NodeState::kJoining) {
      ++c.provisioning;
      if (n.state == NodeState::kProvisioning)
        c.provisioning_since.emplace_back(n.name, n.state_since_ms);
    } else if (Live(n.state)) {
      ++c.other;
    }
  });
  return c;
}

std::string ScalingService::RecordEvent(const std::string& pool, const std::string& kind, int delta,
                                        int from, int to, const std::string& reason,
                                        const std::string& detail,
                                        const std::vector<std::string>& nodes,
                                        const std::string& actor, const ManualKeep* keep) {
  int64_t now = clock_->NowMs();
  json::array names;
  for (const auto& n : nodes) names.emplace_back(n);
  json::object o{{"time_ms", now},   {"pool", pool},     {"kind", kind},
                 {"delta", delta},   {"from", from},     {"to", to},
                 {"reason", reason}, {"detail", detail}, {"nodes", std::move(names)},
                 {"actor", actor}};
  if (keep) {
    o["keep_min"] = keep->min_nodes;
    o["keep_max"] = keep->max_nodes;
    o["keep_until_ms"] = keep->until_ms;
  }
  std::string doc = JsonText(o);
  auto id = store_.AppendScaleEvent({0, now, pool, doc});
  if (!id.ok()) {
    spdlog::error("scaling: event of pool {} not stored: {}", pool, id.error().message);
  } else {
    o["id"] = id.value();
  }
  bool action = kind != "policy" && kind != "hold" && kind != "keep_end";
  if (kind != "policy") {
    spdlog::info("scaling {}: {} {:+d} ({}): {}", pool, kind, delta, reason, detail);
  }
  // The API audits what people do through it; the autoscaler's own actions are audited here.
  if (action && actor == kAutoscaler) {
    AuditRecord a;
    a.time_ms = now;
    a.actor = actor;
    a.action = kind + " " + std::to_string(delta);
    a.target = "pool/" + pool;
    bool failed = kind.find("failed") != std::string::npos || kind == "join_timeout";
    a.status = failed ? 502 : 200;
    a.result = failed ? detail : "ok";
    a.after = JsonText(o);
    if (auto s = store_.AppendAudit(a); !s.ok()) {
      spdlog::error("scaling: audit record not stored: {}", s.error().message);
    }
  }
  return JsonText(o);
}

int ScalingService::ProvisionLocked(PoolState& st, const Pool& pool, int have, int n,
                                    const std::string& reason, const std::string& detail,
                                    const std::string& actor, std::string& event) {
  Actuator* actuator = ActuatorFor(st.scaling.actuator);
  if (!actuator) {
    st.last_error = "no " + st.scaling.actuator.type + " actuator in this controller";
    return 0;
  }
  std::vector<std::string> names;
  // <pool>-NNNN, the lowest numbers first: a retired node of this pool comes back under its
  // name; a name that any other node has is skipped.
  for (int i = 0; static_cast<int>(names.size()) < n && i < 1'000'000; ++i) {
    char name[96];
    std::snprintf(name, sizeof name, "%s-%04d", pool.name.c_str(), i);
    auto existing = fleet_.GetNode(name);
    if (existing.ok() && (existing->pool != pool.name || existing->state != NodeState::kRetired)) {
      continue;
    }
    auto made = fleet_.Provision(pool.name, name, st.scaling.actuator.type == "sim",
                                 "scale up (" + reason + ") by " + actor, actor);
    if (!made.ok()) {
      spdlog::error("scaling {}: cannot record node {}: {}", pool.name, name, made.error().message);
      break;
    }
    names.push_back(name);
  }
  if (names.empty()) return 0;
  const auto& p = st.scaling.policy;
  double ttl_s = 2 * (p.lead_time_s + st.scaling.actuator.timeout_s) + 600;
  auto token = fleet_.CreateJoinToken(pool.name, static_cast<int64_t>(ttl_s * 1000), actor);
  if (!token.ok()) {
    for (const auto& name : names) {
      (void)fleet_.Retire(name, "provision failed: no join token: " + token.error().message, actor);
    }
    st.last_error = "no join token: " + token.error().message;
    return 0;
  }
  int after = have + static_cast<int>(names.size());
  event = RecordEvent(pool.name, "scale_up", static_cast<int>(names.size()), have, after, reason,
                      detail, names, actor);
  Enqueue(true, pool, st, names, token->secret, p.lead_time_s, actor);
  return static_cast<int>(names.size());
}

int ScalingService::RemoveLocked(PoolState& st, const Pool& pool, int have, int n,
                                 const std::string& reason, const std::string& detail,
                                 const std::string& actor, std::string& event) {
  if (!ActuatorFor(st.scaling.actuator)) {
    st.last_error = "no " + st.scaling.actuator.type + " actuator in this controller";
    return 0;
  }
  int64_t idle_ms = actor == kAutoscaler
                        ? static_cast<int64_t>(st.scaling.policy.idle_before_remove_s * 1000)
                        : 0;
  auto names = jobs_.DrainIdle(pool.name, n, idle_ms, actor);
  if (names.empty()) return 0;
  int after = have - static_cast<int>(names.size());
  event = RecordEvent(pool.name, "scale_down", -static_cast<int>(names.size()), have, after, reason,
                      detail, names, actor);
  Enqueue(false, pool, st, names, "", st.scaling.policy.lead_time_s, actor);
  return static_cast<int>(names.size());
}

void ScalingService::ConsolidateLocked(PoolState& st, const Pool& pool, int have, int provisioning,
                                       const sched::ScaleDecision& decision,
                                       const workload::PoolDemand& demand, int64_t now) {
  const sched::ScalePolicy& p = st.scaling.policy;
  if (p.consolidate_below <= 0) return;
  int surplus = have - decision.target;
  bool may = st.scaling.enabled && decision.delta <= 0 && surplus > 0 && provisioning == 0 &&
             demand.queued_jobs == 0 &&
             (!st.last_down_ms || now - st.last_down_ms >= p.down_cooldown_s * 1000) &&
             ActuatorFor(st.scaling.actuator);
  auto done = jobs_.Consolidate(pool.name, std::max(1, pool.gpus_per_node), p.consolidate_below,
                                static_cast<int64_t>(p.idle_before_remove_s * 1000),
                                may ? std::min(surplus, p.step_down) : 0, kAutoscaler);
  if (!done.failed.empty()) {
    RecordEvent(pool.name, "consolidate_failed", 0, have, have, "consolidate",
                done.failed + (done.nodes.empty() ? "; moved: " + done.detail : ""), {},
                kAutoscaler);
  }
  if (done.nodes.empty()) return;
  int n = static_cast<int>(done.nodes.size());
  char head[160];
  std::snprintf(head, sizeof head,
                "%d node(s) used at most %d%% of their GPUs for %s emptied; %d wanted, %d "
                "ready: ",
                n, static_cast<int>(p.consolidate_below * 100 + 0.5),
                sched::FormatSeconds(p.idle_before_remove_s).c_str(), decision.target, have);
  RecordEvent(pool.name, "consolidate", -n, have, have - n, "consolidate", head + done.detail,
              done.nodes, kAutoscaler);
  Enqueue(false, pool, st, done.nodes, "", p.lead_time_s, kAutoscaler);
  st.last_down_ms = now;
}

void ScalingService::DecideLocked(PoolState& st, const Pool& pool, const Counts& c,
                                  const workload::PoolDemand& asked, int64_t now) {
  const sched::ScalePolicy& policy = st.scaling.policy;
  workload::PoolDemand demand = asked;
  const int too_large =
      LeaveOutTooLarge(demand, policy.max_nodes * std::max(1, pool.gpus_per_node));
  double d = demand.running_gpus + demand.queued_gpus;
  st.tracker->Observe(now / 1000.0, d);
  sched::ScaleInput in;
  in.now_s = now / 1000.0;
  in.gpus_per_node = std::max(1, pool.gpus_per_node);
  in.ready = c.ready;
  in.provisioning = c.provisioning;
  in.demand_gpus = d;
  in.queue_nodes = sched::QueueNodes(demand.busy_nodes, demand.queued_by_size, in.gpus_per_node);
  if (policy.mode == sched::ScaleMode::kPredictive && st.tracker->forecaster().observed() > 0) {
    in.peak_forecast_gpus = st.tracker->PlanningPeak(policy.forecast_margin);
  }
  auto idle = jobs_.IdleNodes(pool.name, static_cast<int64_t>(policy.idle_before_remove_s * 1000));
  in.idle_removable = static_cast<int>(idle.size());
  in.last_up_s = st.last_up_ms ? st.last_up_ms / 1000.0 : -1e18;
  in.last_down_s = st.last_down_ms ? st.last_down_ms / 1000.0 : -1e18;
  // Nodes that are neither ready nor starting (unhealthy, cordoned, draining...) still count
  // against max_nodes.
  sched::ScalePolicy bounded = policy;
  bounded.max_nodes = std::max(0, policy.max_nodes - c.other);
  bounded.min_nodes = std::min(bounded.min_nodes, bounded.max_nodes);
  const sched::ScalePolicy unkept = bounded;
  std::string kept;  // the detail's notes: a manual keep, jobs left out
  if (st.keep.until_ms && now >= st.keep.until_ms) {
    int have = c.ready + c.provisioning;
    RecordEvent(pool.name, "keep_end", 0, have, have, "manual",
                "the manual target set by " + st.keep.actor + " is no longer kept", {},
                kAutoscaler);
    st.keep = ManualKeep{};
  }
  if (st.keep.until_ms) {
    if (st.keep.max_nodes >= 0) bounded.max_nodes = std::min(bounded.max_nodes, st.keep.max_nodes);
    if (st.keep.min_nodes >= 0) bounded.min_nodes = std::max(bounded.min_nodes, st.keep.min_nodes);
    kept = std::string("; kept at ") + (st.keep.min_nodes >= 0 ? "least " : "most ") +
           std::to_string(std::max(st.keep.min_nodes, st.keep.max_nodes)) + " by " + st.keep.actor +
           " until " + FormatTime(st.keep.until_ms);
  }
  bounded.min_nodes = std::min(bounded.min_nodes, bounded.max_nodes);
  if (too_large > 0) {
    kept += "; " + std::to_string(too_large) + " queued job(s) larger than " +
            std::to_string(policy.max_nodes) + " nodes left out";
  }
  sched::ScaleDecision decision = sched::Decide(bounded, in);
  if (st.keep.until_ms && sched::Decide(unkept, in).target != decision.target) {
    decision.reason = "manual";  // the keep made the difference
  }
  st.decision = decision;

  Sample s;
  s.time_ms = now;
  s.ready = c.ready;
  s.provisioning = c.provisioning;
  s.other = c.other;
  s.target = decision.target;
  s.demand_gpus = d;
  s.running_gpus = demand.running_gpus;
  s.queued_gpus = demand.queued_gpus;
  s.forecast_gpus = in.peak_forecast_gpus;
  s.oldest_wait_s = demand.oldest_queued_ms ? (now - demand.oldest_queued_ms) / 1000.0 : 0;
  st.now = s;
  st.history.push_back(s);
  while (!st.history.empty() && st.history.front().time_ms < now - options_.history_ms) {
    st.history.pop_front();
  }
  if (auto stored = store_.AppendScalingSample({pool.name, now, SampleDoc(s)}); !stored.ok()) {
    spdlog::error("scaling: sample of pool {} not stored: {}", pool.name, stored.error().message);
  }

  char detail[512];
  auto stats = st.tracker->forecaster().stats();
  std::string forecast =
      in.peak_forecast_gpus >= 0
          ? "forecast peak " + std::to_string(static_cast<int>(std::ceil(in.peak_forecast_gpus))) +
                " GPUs over the next " +
                sched::FormatSeconds(policy.lead_time_s + policy.interval_s) + " (" + stats.model +
                (stats.scored
                     ? ", MAPE " + std::to_string(static_cast<int>(stats.mape * 100 + 0.5)) + "%"
                     : "") +
                ")"
          : std::string(policy.mode == sched::ScaleMode::kReactive ? "reactive"
                                                                   : "no forecast yet");
  std::snprintf(detail, sizeof detail,
                "demand %d GPUs (%d running, %d queued in %d jobs); %s; %d ready + %d starting "
                "nodes of %d GPUs; wants %d (bounds %d..%d)%s",
                static_cast<int>(d), demand.running_gpus, demand.queued_gpus, demand.queued_jobs,
                forecast.c_str(), c.ready, c.provisioning, in.gpus_per_node, decision.target,
                bounded.MinimumAt(in.now_s), bounded.max_nodes, kept.c_str());
  int have = c.ready + c.provisioning;
  std::string event;
  if (decision.delta != 0 && st.scaling.enabled) {
    st.held.clear();
    if (decision.delta > 0) {
      if (ProvisionLocked(st, pool, have, decision.delta, decision.reason, detail, kAutoscaler,
                          event)) {
        st.last_up_ms = now;
      }
      return;
    }
    int removed =
        RemoveLocked(st, pool, have, -decision.delta, decision.reason, detail, kAutoscaler, event);
    if (removed) st.last_down_ms = now;
    ConsolidateLocked(st, pool, have - removed, c.provisioning, decision, demand, now);
    return;
  }
  ConsolidateLocked(st, pool, have, c.provisioning, decision, demand, now);
  // Held back: recorded once per (reason, target), not every interval.
  std::string reason = decision.delta != 0 ? "disabled" : decision.reason;
  if (decision.target == have) st.held.clear();
  if (decision.target == have || (reason != "cooldown" && reason != "disabled")) return;
  std::string key = reason + "/" + std::to_string(decision.target);
  if (key == st.held) return;
  st.held = key;
  RecordEvent(pool.name, "hold", 0, have, decision.target, reason, detail, {}, kAutoscaler);
}

void ScalingService::Tick() {
  int64_t now = clock_->NowMs();
  {
    std::lock_guard lock(mu_);
    bool due = false;
    for (const auto& [name, st] : pools_) due = due || now >= st.next_decision_ms;
    if (!due && now < next_retain_ms_) return;
  }
  auto pools = fleet_.Pools();
  if (!pools.ok()) return;
  std::lock_guard lock(mu_);
  std::map<std::string, workload::PoolDemand> demand;  // every pool's, from one pass over jobs
  bool counted = false;
  for (auto& [name, st] : pools_) {
    auto pool =
        std::find_if(pools->begin(), pools->end(), [&](const Pool& p) { return p.name == name; });
    if (pool == pools->end()) continue;
    // Nodes that never registered: retired, and their actuator told to stop them.
    const auto& p = st.scaling.policy;
    int64_t deadline_ms = static_cast<int64_t>((2 * p.lead_time_s + 60) * 1000);
    Counts c = CountLocked(name);
    std::vector<std::string> late;
    for (const auto& [node, since] : c.provisioning_since) {
      if (now - since > deadline_ms) late.push_back(node);
    }
    if (!late.empty()) {
      std::string why = "did not register within " + sched::FormatSeconds(deadline_ms / 1000.0);
      for (const auto& node : late) (void)fleet_.Retire(node, why, kAutoscaler);
      RecordEvent(name, "join_timeout", -static_cast<int>(late.size()), 0, 0, "timeout", why, late,
                  kAutoscaler);
      st.last_error = Join(late, ", ") + " " + why;
      if (ActuatorFor(st.scaling.actuator)) {
        Enqueue(false, *pool, st, late, "", p.lead_time_s, kAutoscaler);
      }
      c = CountLocked(name);  // without the nodes just retired
    }
    if (const auto& t = st.scaling.tune; t.every_s > 0) {
      int64_t every_ms = static_cast<int64_t>(t.every_s * 1000);
      if (st.next_tune_ms == 0) {
        st.next_tune_ms = now + every_ms;
      } else if (now >= st.next_tune_ms) {
        st.next_tune_ms = now + every_ms;
        std::lock_guard work(work_mu_);
        work_.push_back(Work{.tune = name});
        work_cv_.notify_one();
      }
    } else {
      st.next_tune_ms = 0;
    }
    if (now >= st.next_decision_ms) {
      st.next_decision_ms = now + static_cast<int64_t>(p.interval_s * 1000);
      if (!counted) {
        demand = jobs_.Demand();
        counted = true;
      }
      DecideLocked(st, *pool, c, demand[name], now);
    }
  }
  if (now >= next_retain_ms_) {
    next_retain_ms_ = now + 60'000;
    if (auto s = store_.DeleteScalingSamplesBefore(now - options_.history_ms); !s.ok()) {
      spdlog::error("scaling: old samples not removed: {}", s.error().message);
    }
  }
}

}  // namespace gpufleet::scaling
