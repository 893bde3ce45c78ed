#include "lifecycle/rollout_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_map>

#include "common/clock.h"
#include "common/strings.h"
#include "lifecycle/internal.h"

namespace gpufleet::lifecycle {

namespace {

std::string Short(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.size() > 300) s = "..." + s.substr(s.size() - 300);
  return s;
}

}  // namespace

// The engine's effects, done on the fleet, the command bus and the store, within one tick
// (under mu_).
class RolloutService::TickEffects : public RolloutEffects {
 public:
  TickEffects(RolloutService& s, Snapshot& snap) : s_(s), snap_(snap) {}
  std::optional<LiveNode> Live(const std::string& node, RolloutKind kind) override {
    auto n = s_.fleet_.GetNode(node);
    if (!n.ok()) return std::nullopt;
    return LiveNode{n->state, n->resume_state, n->connected, RunningVersion(n.value(), kind)};
  }
  Status Act(const std::string& node, NodeAction action, const std::string& actor) override {
    auto done = s_.fleet_.Act(node, action, actor);
    if (!done.ok()) return done.error();
    return {};
  }
  bool RunsJobs(const std::string& node) override { return s_.hooks_.busy && s_.hooks_.busy(node); }
  void DrainTimeout(const std::string& node, int64_t timeout_ms) override {
    if (s_.hooks_.drain_timeout) s_.hooks_.drain_timeout(node, timeout_ms);
  }
  bool WindowOpen(const std::string& pool, int64_t now, std::string* why) override {
    return s_.WindowOpen(pool, now, snap_, why);
  }
  int64_t NewCommand() override { return s_.hooks_.commands ? s_.hooks_.commands->Issue(&s_) : 0; }
  void Save(const Rollout& r, size_t i) override { s_.Persist(r, {i}); }
  Status Send(const Rollout& r, size_t i, const NodeFacts& node,
              const proto::Command& cmd) override {
    if (!s_.hooks_.commands) return MakeError(ErrorCode::kUnavailable, "no agent connections");
    proto::Command out = cmd;
    // A simulated node told to install a faulty version turns faulty once it runs it.
    if (node.simulated && cmd.action == InstallAction(r.kind) && !cmd.args.empty()) {
      out.sim_faulty = s_.faulty_.Has(r.kind, cmd.args[0]);
    }
    return s_.hooks_.commands->Send(r.nodes[i].node, out);
  }
  int64_t AskedAgain(int64_t command) override {
    auto it = s_.asked_again_.find(command);
    return it == s_.asked_again_.end() ? 0 : it->second;
  }
  void SetAskedAgain(int64_t command, int64_t connected_ms) override {
    s_.asked_again_[command] = connected_ms;
  }

 private:
  RolloutService& s_;
  Snapshot& snap_;
};

RolloutService::RolloutService(FleetService& fleet, CompatService* compat,
                               store::RolloutStore& store, store::AuditLog& audit,
                               std::shared_ptr<Clock> clock, std::string zoneinfo)
    : fleet_(fleet),
      compat_(compat),
      store_(store),
      audit_(audit),
      clock_(std::move(clock)),
      zoneinfo_(std::move(zoneinfo)) {}

void RolloutService::set_hooks(RolloutHooks hooks) {
  std::lock_guard lock(mu_);
  hooks_ = std::move(hooks);
  // The commands sent before a restart whose answers are still awaited (an agent that ran an
  // install while the controller was away answers once it reconnects).
  if (!hooks_.commands) return;
  // (An aborted rollout's node finishes the step it is in, so ended rollouts are looked at too.)
  for (const auto& [id, r] : rollouts_) {
    for (const auto& n : r.nodes) {
      if (n.Busy() && n.command != 0 && n.result.empty()) hooks_.commands->Claim(n.command, this);
    }
  }
}

Status RolloutService::Load() {
  // Read under the lock that every step and change writes under, so nothing read is older than
  // what memory holds; kept whole until all of it was read.
  std::lock_guard lock(mu_);
  auto list = store_.ListRollouts();
  if (!list.ok()) return list.error();
  std::map<int64_t, Rollout> rollouts;
  std::map<std::string, int64_t> holders;
  for (const auto& rec : list.value()) {
    auto r = RolloutFromDoc(rec.id, rec.doc);
    if (!r.ok()) return r.error();
    auto state = ParseRolloutState(rec.state);
    if (!state) {
      return MakeError(ErrorCode::kInternal,
                       "rollout " + std::to_string(rec.id) + ": state '" + rec.state + "'");
    }
    r->state = *state;
    r->updated_ms = rec.updated_ms;
    auto nodes = store_.ListRolloutNodes(rec.id);
    if (!nodes.ok()) return nodes.error();
    for (const auto& n : nodes.value()) {
      auto node = NodeFromDoc(n.node, n.doc);
      if (!node.ok()) return node.error();
      r->nodes.push_back(std::move(node).value());
    }
    // The nodes in their assigned order (stage, then the order they were chosen in).
    std::stable_sort(r->nodes.begin(), r->nodes.end(),
                     [](const RolloutNode& a, const RolloutNode& b) { return a.stage < b.stage; });
    for (const auto& n : r->nodes) {
      if (n.Busy()) holders[n.node] = r->id;
    }
    auto held = rollouts_.find(rec.id);
    if (!r->Ended() && (held == rollouts_.end() || held->second.state != r->state)) {
      spdlog::info("rollout {} ({} {}): resuming, {}", r->id, ToString(r->kind), r->target,
                   ToString(r->state));
    }
    rollouts[rec.id] = std::move(r).value();
  }
  loaded_ms_ = clock_->NowMs();
  rollouts_ = std::move(rollouts);
  node_holder_ = std::move(holders);
  return {};
}

RolloutService::Snapshot RolloutService::Take(const std::set<RolloutKind>& kinds) const {
  Snapshot snap;
  fleet_.ForEachNode({}, [&](const Node& n) {
    NodeFacts v;
    v.state = n.state;
    v.effective = n.state == NodeState::kUnreachable ? n.resume_state : n.state;
    v.connected = n.connected;
    v.simulated = n.simulated;
    v.connected_ms = n.connected_ms;
    v.state_since_ms = n.state_since_ms;
    v.pool = n.pool;
    v.cluster = n.cluster;
    v.reason = n.reason;
    v.gpus = static_cast<int>(n.gpus.size());
    for (RolloutKind k : kinds) v.version[static_cast<size_t>(k)] = RunningVersion(n, k);
    if (Counted(n.state)) {
      ++snap.pool_size[n.pool];
      ++snap.cluster_size[n.cluster];
      if (!InService(n.state)) {
        ++snap.pool_down[n.pool];
        ++snap.cluster_down[n.cluster];
      }
    }
    snap.nodes.emplace(n.name, std::move(v));
  });
  if (auto pools = fleet_.Pools(); pools.ok()) {
    for (auto& p : pools.value()) snap.pools[p.name] = p;
  }
  if (auto clusters = fleet_.Clusters(); clusters.ok()) {
    for (auto& c : clusters.value()) snap.clusters[c.name] = c;
  }
  return snap;
}

Result<Rollout> RolloutService::Create(const RolloutRequest& req, const std::string& actor,
                                       const std::string& forced) {
  Snapshot snap = Take({req.kind});
  std::vector<std::string> skipped;
  auto nodes = Select(req, snap, skipped);
  if (!nodes.ok()) return nodes.error();
  Rollout r;
  r.kind = req.kind;
  r.target = req.target;
  r.package = req.package;
  r.selector = req.selector;
  r.strategy = req.strategy;
  r.created_by = actor;
  r.forced = forced;
  r.created_ms = r.updated_ms = r.started_ms = clock_->NowMs();
  r.nodes = std::move(nodes).value();
  Assign(req, r.nodes, r.batches);
  r.state = RolloutState::kRunning;
  r.current = -1;
  r.stage =
      std::any_of(r.nodes.begin(), r.nodes.end(), [](const RolloutNode& n) { return n.stage < 0; })
          ? "test"
          : "canary";
  r.reason = "started by " + actor;
  std::lock_guard lock(mu_);
  for (const auto& n : r.nodes) {
    if (auto h = node_holder_.find(n.node); h != node_holder_.end()) {
      return MakeError(ErrorCode::kConflict, "node " + n.node + " is being updated by rollout " +
                                                 std::to_string(h->second));
    }
  }
  for (const auto& [id, other] : rollouts_) {
    if (other.Ended() || other.kind != r.kind) continue;
    for (const auto& n : other.nodes) {
      if (n.Done()) continue;
      auto mine = std::find_if(r.nodes.begin(), r.nodes.end(),
                               [&](const RolloutNode& m) { return m.node == n.node; });
      if (mine != r.nodes.end()) {
        return MakeError(ErrorCode::kConflict,
                         "node " + n.node + " is still in rollout " + std::to_string(id) +
                             " of the " + std::string(ToString(r.kind)) + ": abort it first");
      }
    }
  }
  store::RolloutRecord rec{0, std::string(ToString(r.state)), RolloutDoc(r), r.created_ms,
                           r.updated_ms};
  auto id = store_.CreateRollout(rec);
  if (!id.ok()) return id.error();
  r.id = id.value();
  rec.id = r.id;
  rec.doc = RolloutDoc(r);
  std::vector<store::RolloutNodeRecord> docs;
  for (const auto& n : r.nodes) docs.push_back({n.node, NodeDoc(n), r.created_ms});
  GF_TRY(store_.SaveRolloutNodes(rec, docs));
  std::vector<store::RolloutEventRecord> events{
      {0, r.id, r.created_ms, "", "started",
       std::string(ToString(r.kind)) + " " + r.target + " on " + std::to_string(r.nodes.size()) +
           " node(s) by " + actor + (forced.empty() ? "" : " (forced: " + forced + ")")}};
  (void)store_.AppendRolloutEvents(events);
  spdlog::info("rollout {}: {} {} on {} node(s), {} batch(es), by {}", r.id, ToString(r.kind),
               r.target, r.nodes.size(), r.batches, actor);
  rollouts_[r.id] = r;
  return r;
}

std::vector<Rollout> RolloutService::List() const {
  std::lock_guard lock(mu_);
  std::vector<Rollout> out;
  for (auto it = rollouts_.rbegin(); it != rollouts_.rend(); ++it) out.push_back(it->second);
  return out;
}

Result<Rollout> RolloutService::Get(int64_t id) const {
  std::lock_guard lock(mu_);
  auto it = rollouts_.find(id);
  if (it == rollouts_.end())
    return MakeError(ErrorCode::kNotFound, "no rollout " + std::to_string(id));
  return it->second;
}

Result<Rollout> RolloutService::Control(int64_t id, const std::string& control,
                                        const std::string& actor) {
  std::lock_guard lock(mu_);
  auto it = rollouts_.find(id);
  if (it == rollouts_.end())
    return MakeError(ErrorCode::kNotFound, "no rollout " + std::to_string(id));
  Rollout& r = it->second;
  RolloutState before = r.state;
  GF_TRY(lifecycle::Control(r, control, actor, clock_->NowMs()));
  std::vector<size_t> all(r.nodes.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  Persist(r, control == "abort" ? all : std::vector<size_t>{});
  (void)store_.AppendRolloutEvents({{0, r.id, r.updated_ms, "", control, r.reason}});
  spdlog::info("rollout {}: {} by {} ({} -> {})", id, control, actor, ToString(before),
               ToString(r.state));
  return r;
}

Result<std::vector<store::RolloutEventRecord>> RolloutService::Events(int64_t id, int64_t after,
                                                                      int limit) {
  {
    std::lock_guard lock(mu_);
    if (!rollouts_.count(id))
      return MakeError(ErrorCode::kNotFound, "no rollout " + std::to_string(id));
  }
  return store_.ListRolloutEvents(id, after, limit);
}

std::vector<RolloutService::VersionChange> RolloutService::History(const std::string& node) const {
  std::lock_guard lock(mu_);
  std::vector<VersionChange> out;
  for (auto it = rollouts_.rbegin(); it != rollouts_.rend(); ++it) {
    for (const auto& n : it->second.nodes) {
      if (n.node != node || n.state == NodeProgress::kPending ||
          n.state == NodeProgress::kSkipped) {
        continue;
      }
      out.push_back({it->second.id, it->second.kind, n});
    }
  }
  return out;
}

void RolloutService::OnResult(const std::string& node, const proto::CommandResult& res) {
  std::lock_guard lock(mu_);
  std::string outcome =
      res.ok
          ? "ok"
          : (res.exit_code >= 0 ? "exit " + std::to_string(res.exit_code) + ": " : std::string()) +
                Short(res.message);
  if (outcome.empty()) outcome = "failed";
  for (auto& [id, op] : operations_) {
    if (op.command == res.id && op.node == node) {
      op.result = outcome;
      return;
    }
  }
  // The rollout node waiting for this command (an answer to an earlier attempt finds none).
  auto it = rollouts_.begin();
  size_t index = 0;
  for (; it != rollouts_.end(); ++it) {  // ended ones too: an aborted one's step finishes
    const auto& nodes = it->second.nodes;
    index = std::find_if(nodes.begin(), nodes.end(),
                         [&](const RolloutNode& n) { return n.command == res.id; }) -
            nodes.begin();
    if (index < nodes.size()) break;
  }
  if (it == rollouts_.end() || it->second.nodes[index].node != node) return;
  RolloutNode& n = it->second.nodes[index];
  n.result = outcome;
  if (!res.ok || res.action == "validate") n.message = res.action + ": " + Short(res.message);
  Persist(it->second, {index});
  (void)store_.AppendRolloutEvents(
      {{0, it->second.id, clock_->NowMs(), node, res.action,
        (res.ok ? "ok" : "failed: " + outcome) +
            (res.duration_ms ? " in " + std::to_string(res.duration_ms / 1000) + " s" : "")}});
}

const TimeZone* RolloutService::Zone(const std::string& name) {
  auto it = zones_.find(name);
  if (it != zones_.end()) return &it->second;
  auto z = TimeZone::Load(name, zoneinfo_);
  if (!z.ok()) return nullptr;
  return &zones_.emplace(name, std::move(z).value()).first->second;
}

bool RolloutService::WindowOpen(const std::string& pool, int64_t now, Snapshot& snap,
                                std::string* why) {
  auto cached = snap.windows.find(pool);
  if (cached == snap.windows.end()) {
    auto p = snap.pools.find(pool);
    std::vector<MaintenanceWindow> windows;
    std::string owner = "pool " + pool;
    if (p != snap.pools.end()) {
      windows = p->second.lifecycle.windows;
      if (windows.empty()) {
        windows = snap.clusters[p->second.cluster].lifecycle.windows;
        owner = "cluster " + p->second.cluster;
      }
    }
    std::vector<TimeZone> zones;
    for (const auto& w : windows) {
      if (const TimeZone* z = Zone(w.timezone)) zones.push_back(*z);
    }
    WindowState st = EvaluateWindows(windows, zones, now / 1000);
    std::string text;
    if (!st.open) {
      text = "outside the maintenance windows of " + owner +
             (st.next_open_s > 0 ? ": the next opens " + FormatTime(st.next_open_s * 1000) : "");
    }
    cached = snap.windows.emplace(pool, std::make_pair(st.open, text)).first;
  }
  if (why) *why = cached->second.second;
  return cached->second.first;
}

void RolloutService::Persist(const Rollout& r, const std::vector<size_t>& changed) {
  store::RolloutRecord rec{r.id, std::string(ToString(r.state)), RolloutDoc(r), r.created_ms,
                           r.updated_ms};
  std::vector<store::RolloutNodeRecord> docs;
  for (size_t i : changed) {
    if (i < r.nodes.size()) docs.push_back({r.nodes[i].node, NodeDoc(r.nodes[i]), r.updated_ms});
  }
  if (auto s = store_.SaveRolloutNodes(rec, docs); !s.ok()) {
    spdlog::error("rollout {}: saving its progress failed: {}", r.id, s.error().message);
  }
}

void RolloutService::Audit(const std::string& actor, const std::string& action,
                           const std::string& target, int status, const std::string& result) {
  AuditRecord a;
  a.time_ms = clock_->NowMs();
  a.actor = actor;
  a.action = action;
  a.target = target;
  a.status = status;
  a.result = result;
  (void)audit_.AppendAudit(a);
}

int RolloutService::Tick() {
  int64_t now = clock_->NowMs();
  std::set<RolloutKind> kinds;
  bool gates = false, any = false;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, r] : rollouts_) {
      bool busy = std::any_of(r.nodes.begin(), r.nodes.end(),
                              [](const RolloutNode& n) { return n.Busy(); });
      if (r.Ended() && !busy) continue;
      kinds.insert(r.kind);
      any = true;
      gates |= !r.Ended();
    }
    any |= !operations_.empty() &&
           std::any_of(operations_.begin(), operations_.end(), [](const auto& kv) {
             return kv.second.state == "waiting_for_jobs" || kv.second.state == "running";
           });
  }
  if (!any) return 0;
  kinds.insert(RolloutKind::kDriver);
  Snapshot snap = Take(kinds);
  RolloutHooks hooks;
  {
    std::lock_guard lock(mu_);
    hooks = hooks_;
  }
  if (gates && hooks.last_xid) snap.last_xid = hooks.last_xid();
  if (gates && hooks.alerting) snap.alerting = hooks.alerting();
  std::lock_guard lock(mu_);
  snap.loaded_ms = loaded_ms_;
  snap.holders.swap(node_holder_);  // the engine takes and lets go of nodes; back below
  for (const auto& [id, op] : operations_) {
    if (op.state == "waiting_for_jobs" || op.state == "running") {
      snap.operations[op.node] = "operation " + std::to_string(id) + " (" + op.action + ")";
    }
  }
  TickEffects effects(*this, snap);
  int steps = 0;
  for (auto& [id, r] : rollouts_) {
    bool busy =
        std::any_of(r.nodes.begin(), r.nodes.end(), [](const RolloutNode& n) { return n.Busy(); });
    if (r.Ended() && !busy) continue;
    std::vector<store::RolloutEventRecord> events;
    RolloutState before = r.state;
    int64_t updated = r.updated_ms;
    std::vector<size_t> changed = lifecycle::Step(r, snap, now, effects, events);
    if (!changed.empty() || r.updated_ms != updated || r.state != before) Persist(r, changed);
    if (!events.empty()) {
      if (auto s = store_.AppendRolloutEvents(events); !s.ok()) {
        spdlog::error("rollout {}: its events were not stored: {}", id, s.error().message);
      }
    }
    if (r.state != before) {
      Audit("rollout " + std::to_string(id),
            "rollout " + std::string(ToString(before)) + " -> " + std::string(ToString(r.state)),
            "rollout/" + std::to_string(id), 200, r.reason);
    }
    steps += static_cast<int>(changed.size());
  }
  node_holder_.swap(snap.holders);
  // Only the commands still in flight are worth remembering as asked again.
  std::erase_if(asked_again_, [&](const auto& kv) {
    for (const auto& [id, r] : rollouts_) {
      for (const auto& n : r.nodes) {
        if (n.command == kv.first && n.Busy()) return false;
      }
    }
    return true;
  });
  AdvanceOperations(snap, now);
  return steps;
}

void RolloutService::MarkFaulty(RolloutKind kind, const std::string& version, bool faulty) {
  faulty_.Mark(kind, version, faulty);
}

std::vector<std::pair<RolloutKind, std::string>> RolloutService::Faulty() const {
  return faulty_.List();
}

std::set<std::string> RolloutService::FailedNodes() const {
  std::lock_guard lock(mu_);
  std::set<std::string> out;
  int64_t now = clock_->NowMs();
  for (const auto& [id, r] : rollouts_) {
    if (r.Ended() && now - r.ended_ms >= 3'600'000) continue;
    for (const auto& n : r.nodes) {
      if (n.state == NodeProgress::kFailed) out.insert(n.node);
    }
  }
  return out;
}

std::map<std::string, std::string> RolloutService::ActiveTargets() const {
  std::lock_guard lock(mu_);
  std::map<std::string, std::string> out;
  for (const auto& [id, r] : rollouts_) {
    if (r.Ended() || r.state == RolloutState::kRollingBack) continue;
    for (const auto& n : r.nodes) {
      if (n.state == NodeProgress::kPending || (n.Busy() && !n.rollback)) {
        out[n.node] = std::string(ToString(r.kind)) + " " + r.target;
      }
    }
  }
  return out;
}

std::vector<RolloutService::Alarm> RolloutService::Alarms() const {
  std::lock_guard lock(mu_);
  std::vector<Alarm> out;
  for (const auto& [id, r] : rollouts_) {
    // A rollback stays an alarm for an hour after it ended, so that it is seen.
    bool recent = r.state == RolloutState::kRolledBack && clock_->NowMs() - r.ended_ms < 3'600'000;
    if (r.state == RolloutState::kHalted || r.state == RolloutState::kRollingBack || recent) {
      out.push_back(
          {id, std::string(ToString(r.kind)), r.target, std::string(ToString(r.state)), r.reason});
    }
  }
  return out;
}

}  // namespace gpufleet::lifecycle
