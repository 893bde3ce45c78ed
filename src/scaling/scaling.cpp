#include "scaling/scaling.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <set>

#include "common/json_text.h"
#include "sched/policy_json.h"

namespace gpufleet::scaling {
namespace {

namespace json = boost::json;

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

ScalingService::ScalingService(FleetService& fleet, workload::JobService& jobs,
                               store::ScalingStore& store, store::AuditLog& audit,
                               std::shared_ptr<Clock> clock, ScalingOptions options)
    : fleet_(fleet),
      jobs_(jobs),
      store_(store),
      audit_(audit),
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

Status ScalingService::ReloadPolicies() {
  std::lock_guard lock(mu_);  // SetPolicy writes under it: nothing read here is older
  auto records = store_.ListScalingPolicies();
  if (!records.ok()) return records.error();
  int64_t now = clock_->NowMs();
  for (const auto& r : records.value()) {
    auto it = pools_.find(r.pool);
    if (it != pools_.end() && it->second.scaling.updated_ms >= r.updated_ms) continue;
    auto parsed = sched::ParsePoolScaling(r.doc);
    if (!parsed.ok()) continue;
    PoolState& st = pools_[r.pool];
    bool rebuild = !st.tracker || st.scaling.policy.lead_time_s != parsed->policy.lead_time_s ||
                   st.scaling.policy.interval_s != parsed->policy.interval_s;
    st.scaling = std::move(parsed).value();
    st.scaling.pool = r.pool;
    st.scaling.updated_ms = r.updated_ms;
    if (rebuild) NewTracker(st);
    st.next_decision_ms = now;
    st.held.clear();
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
    auto pool = std::find_if(pools->begin(), pools->end(),
                             [&name = name](const Pool& p) { return p.name == name; });
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
  char margin[64] = "";
  if (p.mode == sched::ScaleMode::kPredictive) {
    std::snprintf(margin, sizeof margin, ", forecast margin %g%s", p.forecast_margin,
                  p.margin_by_hour ? " by hour of day" : "");
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
  if (st.scaling.policy.margin_by_hour) {
    s.forecast.shortfall = st.tracker->forecaster().HourShortfall();  // what the margin counts
  }
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
    if (auto s = audit_.AppendAudit(a); !s.ok()) {
      spdlog::error("scaling: audit record not stored: {}", s.error().message);
    }
  }
  return JsonText(o);
}

}  // namespace gpufleet::scaling
