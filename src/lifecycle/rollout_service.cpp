#include "lifecycle/rollout_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_map>

#include "common/clock.h"
#include "common/strings.h"
#include "lifecycle/internal.h"

namespace gpufleet::lifecycle {

namespace {

bool InService(NodeState s) { return s == NodeState::kReady || s == NodeState::kDegraded; }
bool Counted(NodeState s) { return s != NodeState::kRetired && s != NodeState::kDecommissioning; }

std::string StageName(const Rollout& r) {
  if (r.current < 0) return "test";
  if (r.current == 0) return "canary";
  return "batch " + std::to_string(r.current) + "/" + std::to_string(r.batches);
}

std::string Short(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.size() > 300) s = "..." + s.substr(s.size() - 300);
  return s;
}

std::string Duration(int64_t ms) {
  if (ms >= 3'600'000 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms >= 60'000 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  return std::to_string(ms / 1000) + "s";
}

constexpr int64_t kReconnectGraceMs = 60'000;

}  // namespace

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
  auto list = store_.ListRollouts();
  if (!list.ok()) return list.error();
  std::lock_guard lock(mu_);
  loaded_ms_ = clock_->NowMs();
  rollouts_.clear();
  node_holder_.clear();
  for (const auto& rec : list.value()) {
    auto r = RolloutFromDoc(rec.id, rec.doc);
    if (!r.ok()) return r.error();
    r->state = rec.state;
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
      if (n.Busy()) node_holder_[n.node] = r->id;
    }
    if (!r->Ended()) {
      spdlog::info("rollout {} ({} {}): resuming, {}", r->id, ToString(r->kind), r->target,
                   r->state);
    }
    rollouts_[rec.id] = std::move(r).value();
  }
  return {};
}

RolloutService::Snapshot RolloutService::Take(const std::set<RolloutKind>& kinds) const {
  Snapshot snap;
  fleet_.ForEachNode({}, [&](const Node& n) {
    NodeView v;
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
    for (RolloutKind k : kinds) v.version[static_cast<int>(k)] = RunningVersion(n, k);
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

Result<std::vector<RolloutNode>> RolloutService::Select(const RolloutRequest& req,
                                                        const Snapshot& snap,
                                                        std::vector<std::string>& skipped) const {
  const RolloutSelector& sel = req.selector;
  for (const auto& c : sel.clusters) {
    if (!snap.clusters.count(c)) {
      return MakeError(ErrorCode::kInvalidArgument, "selector.clusters: no cluster '" + c + "'");
    }
  }
  for (const auto& p : sel.pools) {
    if (!snap.pools.count(p)) {
      return MakeError(ErrorCode::kInvalidArgument, "selector.pools: no pool '" + p + "'");
    }
  }
  for (const auto& n : sel.nodes) {
    if (!snap.nodes.count(n)) {
      return MakeError(ErrorCode::kInvalidArgument, "selector.nodes: no node '" + n + "'");
    }
  }
  for (const auto& n : req.strategy.test_nodes) {
    if (!snap.nodes.count(n)) {
      return MakeError(ErrorCode::kInvalidArgument, "strategy.test_nodes: no node '" + n + "'");
    }
  }
  if (!req.strategy.test_pool.empty() && !snap.pools.count(req.strategy.test_pool)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "strategy.test_pool: no pool '" + req.strategy.test_pool + "'");
  }
  auto in = [](const std::vector<std::string>& list, const std::string& s) {
    return list.empty() || std::find(list.begin(), list.end(), s) != list.end();
  };
  auto labels_match = [&](const NodeView& v) {
    if (sel.labels.empty()) return true;
    Labels merged;
    if (auto c = snap.clusters.find(v.cluster); c != snap.clusters.end()) merged = c->second.labels;
    if (auto p = snap.pools.find(v.pool); p != snap.pools.end()) {
      for (const auto& [k, val] : p->second.labels) merged[k] = val;
    }
    for (const auto& [k, val] : sel.labels) {
      auto it = merged.find(k);
      if (it == merged.end() || it->second != val) return false;
    }
    return true;
  };
  std::vector<std::string> names;
  for (const auto& [name, v] : snap.nodes) {
    if (!Counted(v.state)) continue;
    bool test = std::find(req.strategy.test_nodes.begin(), req.strategy.test_nodes.end(), name) !=
                    req.strategy.test_nodes.end() ||
                (!req.strategy.test_pool.empty() && v.pool == req.strategy.test_pool);
    if (!test && !(in(sel.clusters, v.cluster) && in(sel.pools, v.pool) && in(sel.nodes, name) &&
                   labels_match(v))) {
      continue;
    }
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  std::vector<RolloutNode> out;
  for (const auto& name : names) {
    const NodeView& v = snap.nodes.at(name);
    const std::string& running = v.version[static_cast<int>(req.kind)];
    if (req.kind == RolloutKind::kNicFirmware && running.empty()) {
      skipped.push_back(name + ": no InfiniBand or RoCE adapter reported");
      continue;
    }
    if (req.kind == RolloutKind::kGpuFirmware && v.gpus == 0) {
      skipped.push_back(name + ": no GPU reported");
      continue;
    }
    RolloutNode n;
    n.node = name;
    n.pool = v.pool;
    n.cluster = v.cluster;
    n.from = running;
    n.to = req.target;
    bool test = std::find(req.strategy.test_nodes.begin(), req.strategy.test_nodes.end(), name) !=
                    req.strategy.test_nodes.end() ||
                (!req.strategy.test_pool.empty() && v.pool == req.strategy.test_pool);
    n.stage = test ? -1 : 0;
    out.push_back(std::move(n));
  }
  if (out.empty()) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "the selector selects no node" +
            (skipped.empty() ? std::string() : " that can take it (" + skipped.front() + ")"));
  }
  return out;
}

// Stages: the test nodes (-1); in each pool its canaries (0); the rest in rolling batches
// (1..), taken round robin across the pools so that each batch spreads over them.
void RolloutService::Assign(const RolloutRequest& req, std::vector<RolloutNode>& nodes,
                            int& batches) const {
  std::map<std::string, std::vector<size_t>> by_pool;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].stage == 0) by_pool[nodes[i].pool].push_back(i);
  }
  std::vector<std::vector<size_t>> rest;
  for (auto& [pool, idx] : by_pool) {
    int canaries = std::min<int>(static_cast<int>(idx.size()),
                                 req.strategy.canary.Of(static_cast<int>(idx.size())));
    rest.emplace_back(idx.begin() + canaries, idx.end());
  }
  std::vector<size_t> order;
  for (size_t round = 0;; ++round) {
    bool any = false;
    for (const auto& list : rest) {
      if (round < list.size()) {
        order.push_back(list[round]);
        any = true;
      }
    }
    if (!any) break;
  }
  batches = 0;
  size_t at = 0;
  int64_t size = req.strategy.batch_size;
  while (at < order.size()) {
    ++batches;
    int64_t n = req.strategy.batch_growth == "linear"        ? size * batches
                : req.strategy.batch_growth == "exponential" ? size << std::min(batches - 1, 30)
                                                             : size;
    for (int64_t k = 0; k < n && at < order.size(); ++k) nodes[order[at++]].stage = batches;
  }
  // Kept in stage order: the order they are worked in.
  std::stable_sort(nodes.begin(), nodes.end(),
                   [](const RolloutNode& a, const RolloutNode& b) { return a.stage < b.stage; });
}

Result<std::vector<Refusal>> RolloutService::Check(const RolloutRequest& req) {
  Snapshot snap = Take({req.kind});
  std::vector<std::string> skipped;
  auto nodes = Select(req, snap, skipped);
  if (!nodes.ok()) return nodes.error();
  std::vector<Refusal> out;
  if (req.kind != RolloutKind::kDriver || !compat_) return out;
  std::set<std::string> pools;
  for (const auto& n : nodes.value()) pools.insert(n.pool);
  for (const auto& p : pools) {
    auto pool = snap.pools.find(p);
    if (pool == snap.pools.end()) continue;
    auto cluster = snap.clusters.find(pool->second.cluster);
    if (cluster == snap.clusters.end()) continue;
    CompatResult res = compat_->Check(cluster->second, pool->second, req.target, "");
    for (const auto& f : res.failed) out.push_back({p, f});
  }
  return out;
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
  r.state = "running";
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
  store::RolloutRecord rec{0, r.state, RolloutDoc(r), r.created_ms, r.updated_ms};
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

Result<RolloutPlan> RolloutService::Plan(const RolloutRequest& req) {
  Snapshot snap = Take({req.kind});
  RolloutPlan plan;
  auto nodes = Select(req, snap, plan.skipped);
  if (!nodes.ok()) return nodes.error();
  int batches = 0;
  Assign(req, nodes.value(), batches);
  plan.nodes = static_cast<int>(nodes->size());
  int64_t node_ms = req.expect_drain_ms + req.expect_install_ms + req.expect_reboot_ms;
  // A stage takes as many rounds of node_ms as its fullest pool or cluster needs at
  // max_unavailable (less what is already down there).
  auto stage_ms = [&](const std::vector<const RolloutNode*>& in, int64_t per_node) -> int64_t {
    std::map<std::string, int> per_pool, per_cluster;
    for (const auto* n : in) {
      ++per_pool[n->pool];
      ++per_cluster[n->cluster];
    }
    int64_t rounds = 0;
    auto fold = [&](const std::map<std::string, int>& count, const std::map<std::string, int>& size,
                    const std::map<std::string, int>& down) {
      for (const auto& [name, k] : count) {
        int total = size.count(name) ? size.at(name) : k;
        int room = req.strategy.max_unavailable.Of(total) - (down.count(name) ? down.at(name) : 0);
        room = std::max(1, room);
        rounds = std::max<int64_t>(rounds, (k + room - 1) / room);
      }
    };
    fold(per_pool, snap.pool_size, snap.pool_down);
    fold(per_cluster, snap.cluster_size, snap.cluster_down);
    return rounds * per_node;
  };
  for (int s = -1; s <= batches; ++s) {
    std::vector<const RolloutNode*> in;
    PlanStage st;
    for (const auto& n : nodes.value()) {
      if (n.stage != s) continue;
      if (n.from == req.target) {
        plan.skipped.push_back(n.node + ": already runs " + req.target);
        continue;
      }
      in.push_back(&n);
      st.nodes.push_back(n.node);
    }
    if (in.empty()) continue;
    st.name = s < 0 ? "test" : s == 0 ? "canary" : "batch " + std::to_string(s);
    st.expected_ms =
        stage_ms(in, node_ms + (s < 0 && req.strategy.validate ? req.expect_validate_ms : 0));
    plan.expected_ms += st.expected_ms;
    if (s == 0) plan.expected_ms += req.strategy.confidence_ms;
    plan.stages.push_back(std::move(st));
  }
  std::set<std::string> pools;
  for (const auto& n : nodes.value()) pools.insert(n.pool);
  int64_t now_s = clock_->NowMs() / 1000;
  std::lock_guard lock(mu_);
  for (const auto& p : pools) {
    PlanWindow w;
    w.pool = p;
    auto pool = snap.pools.find(p);
    if (pool == snap.pools.end()) continue;
    const auto& windows = !pool->second.lifecycle.windows.empty()
                              ? pool->second.lifecycle.windows
                              : snap.clusters[pool->second.cluster].lifecycle.windows;
    std::vector<TimeZone> zones;
    for (const auto& win : windows) {
      if (const TimeZone* z = Zone(win.timezone)) zones.push_back(*z);
    }
    WindowState st = EvaluateWindows(windows, zones, now_s);
    w.always = st.always;
    w.open = st.open;
    w.next_open_ms = st.next_open_s > 0 ? st.next_open_s * 1000 : 0;
    w.closes_ms = st.closes_s > 0 ? st.closes_s * 1000 : 0;
    plan.windows.push_back(w);
  }
  return plan;
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
  auto refuse = [&](const std::string& why) {
    return MakeError(ErrorCode::kConflict, "cannot " + control + " rollout " + std::to_string(id) +
                                               ": it is " + r.state +
                                               (why.empty() ? "" : " (" + why + ")"));
  };
  int64_t now = clock_->NowMs();
  std::string before = r.state;
  if (control == "pause") {
    if (r.state != "running" && r.state != "waiting_window" && r.state != "awaiting_approval") {
      return refuse("");
    }
    r.state = "paused";
    r.reason = "paused by " + actor + ": nodes in progress finish, no new one starts";
  } else if (control == "resume") {
    if (r.state != "paused" && r.state != "halted") return refuse("only a paused or halted one");
    r.state = "running";
    r.reason = "resumed by " + actor;
  } else if (control == "approve") {
    if (r.state != "awaiting_approval") return refuse("nothing waits for an approval");
    r.approved = r.current;
    r.state = "running";
    r.reason = "approved by " + actor;
  } else if (control == "abort") {
    if (r.Ended() || r.state == "rolling_back") return refuse("");
    r.state = "aborted";
    r.ended_ms = now;
    r.reason = "aborted by " + actor + ": nodes in progress finish their step";
    for (auto& n : r.nodes) {
      if (n.state == "pending") {
        n.state = "skipped";
        n.message = "the rollout was aborted";
      }
    }
  } else if (control == "rollback") {
    if (r.state == "rolled_back" || r.state == "rolling_back") return refuse("");
    r.state = "rolling_back";
    r.ended_ms = 0;
    r.reason = "rollback asked by " + actor;
  } else {
    return MakeError(ErrorCode::kInvalidArgument,
                     "unknown control '" + control + "': pause, resume, abort, approve, rollback");
  }
  r.updated_ms = now;
  std::vector<size_t> all(r.nodes.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  Persist(r, control == "abort" ? all : std::vector<size_t>{});
  (void)store_.AppendRolloutEvents({{0, r.id, now, "", control, r.reason}});
  spdlog::info("rollout {}: {} by {} ({} -> {})", id, control, actor, before, r.state);
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
      if (n.node != node || n.state == "pending" || n.state == "skipped") continue;
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

void RolloutService::Persist(Rollout& r, const std::vector<size_t>& changed) {
  store::RolloutRecord rec{r.id, r.state, RolloutDoc(r), r.created_ms, r.updated_ms};
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

bool RolloutService::Send(Rollout& r, size_t i, const std::string& action,
                          std::vector<std::string> args, const NodeView* view, int64_t now,
                          std::vector<store::RolloutEventRecord>& events) {
  RolloutNode& n = r.nodes[i];
  // A controller that just started has not heard from its agents yet: one not connected in
  // the first minute after Load is waited for (the step stays, so the next tick sends again)
  // rather than failed. Later, a node that cannot be reached fails at once.
  if (view && !view->connected &&
      now - loaded_ms_ < std::min<int64_t>(kReconnectGraceMs, r.strategy.boot_timeout_ms)) {
    n.message = "waits for its agent to reconnect to this controller";
    return false;
  }
  proto::Command cmd;
  cmd.id = hooks_.commands ? hooks_.commands->Issue(this) : 0;
  cmd.action = action;
  cmd.timeout_ms = r.strategy.action_timeout_ms;
  // The simulator's faulty versions (MarkFaulty): a simulated node told so turns faulty once
  // the version runs. Real agents ignore the flag.
  if (view && view->simulated && action == InstallAction(r.kind) && !args.empty()) {
    cmd.sim_faulty = faulty_.count({r.kind, args[0]}) > 0;
  }
  cmd.args = std::move(args);
  // Written before it is sent: a controller killed in between waits for an answer that does
  // not come (and fails the node at the deadline) rather than running the action twice.
  n.command = cmd.id;
  n.result.clear();
  n.step = action == "reboot" ? "reboot" : action == "validate" ? "validate" : "install";
  n.step_ms = now;
  n.message = std::string(n.rollback ? "rollback: " : "") + action +
              (cmd.args.empty() ? "" : " " + cmd.args[0]);  // what it does now
  r.updated_ms = now;
  Persist(r, {i});
  Status sent = hooks_.commands ? hooks_.commands->Send(n.node, cmd)
                                : MakeError(ErrorCode::kUnavailable, "no agent connections");
  events.push_back({0, r.id, now, n.node, n.step,
                    action + (cmd.args.empty() ? "" : " " + cmd.args[0]) +
                        (sent.ok() ? "" : ": " + sent.error().message)});
  if (!sent.ok()) {
    Fail(r, n, "cannot reach its agent for " + action + ": " + sent.error().message, now, events);
    return false;
  }
  return true;
}

void RolloutService::Fail(Rollout& r, RolloutNode& n, const std::string& why, int64_t now,
                          std::vector<store::RolloutEventRecord>& events) {
  n.state = "failed";
  n.message = (n.rollback ? "rollback: " : "") + why;
  n.step.clear();
  n.ended_ms = now;
  node_holder_.erase(n.node);
  // Set aside: out of the rollout. One that still runs what it ran before (its install failed,
  // say) goes back to work as it was; one that changed stays out for an operator.
  if (!n.rollback && !n.from.empty()) {
    auto node = fleet_.GetNode(n.node);
    if (node.ok() && node->connected && RunningVersion(node.value(), r.kind) == n.from &&
        (node->state == NodeState::kDrained || node->state == NodeState::kDraining)) {
      std::string actor = "rollout " + std::to_string(r.id);
      if (fleet_.Act(n.node, NodeAction::kUncordon, actor).ok()) {
        if (n.resume == "cordoned") (void)fleet_.Act(n.node, NodeAction::kCordon, actor);
        n.message += " (it still runs " + n.from + ": back in service)";
      }
    }
  }
  events.push_back({0, r.id, now, n.node, "failed", n.message});
  spdlog::error("rollout {}: node {} failed: {}", r.id, n.node, Printable(n.message, 400));
}

void RolloutService::Restore(Rollout& r, RolloutNode& n, int64_t now,
                             std::vector<store::RolloutEventRecord>& events) {
  std::string actor = "rollout " + std::to_string(r.id);
  auto node = fleet_.GetNode(n.node);
  if (node.ok()) {
    NodeState s = node->state == NodeState::kUnreachable ? node->resume_state : node->state;
    if (s == NodeState::kDrained || s == NodeState::kMaintenance || s == NodeState::kCordoned) {
      if (auto done = fleet_.Act(n.node, NodeAction::kUncordon, actor); !done.ok()) {
        spdlog::warn("rollout {}: uncordon {}: {}", r.id, n.node, done.error().message);
      }
    }
    if (n.resume == "cordoned") (void)fleet_.Act(n.node, NodeAction::kCordon, actor);
  }
  n.state = n.rollback ? "rolled_back" : "updated";
  n.message = n.rollback ? "back on " + n.from : "runs " + n.to;
  n.step.clear();
  n.result.clear();
  n.ended_ms = now;
  node_holder_.erase(n.node);
  events.push_back({0, r.id, now, n.node, n.state, n.message});
}

bool RolloutService::Begin(Rollout& r, size_t i, Snapshot& snap, int64_t now,
                           std::vector<store::RolloutEventRecord>& events) {
  RolloutNode& n = r.nodes[i];
  auto v = snap.nodes.find(n.node);
  if (v == snap.nodes.end()) {
    n.state = "skipped";
    n.message = "the node is gone";
    return false;
  }
  const std::string running = v->second.version[static_cast<int>(r.kind)];
  const std::string& wanted = n.rollback ? n.from : n.to;
  if (!n.rollback) {
    if (running == n.to) {
      n.state = "updated";
      n.message = "already runs " + n.to;
      n.started_ms = n.ended_ms = now;
      events.push_back({0, r.id, now, n.node, "updated", n.message});
      return false;
    }
    if (running.empty() || running == "mixed") {
      Fail(r, n,
           running.empty() ? "cannot tell which version it runs"
                           : "its GPUs or NICs run different versions",
           now, events);
      return false;
    }
    n.from = running;
  }
  if (auto h = node_holder_.find(n.node); h != node_holder_.end() && h->second != r.id) {
    n.message = "waits for rollout " + std::to_string(h->second) + ", which is updating it";
    return false;
  }
  for (const auto& [id, op] : operations_) {
    if (op.node == n.node && (op.state == "waiting_for_jobs" || op.state == "running")) {
      n.message = "waits for operation " + std::to_string(id) + " (" + op.action + ")";
      return false;
    }
  }
  // The node's state now, not the tick's snapshot: a node restored earlier in this tick (its
  // update just finished, and the rollout now rolls it back) was uncordoned since.
  if (auto live = fleet_.GetNode(n.node); live.ok()) {
    v->second.state = live->state;
    v->second.effective = live->state == NodeState::kUnreachable ? live->resume_state : live->state;
  }
  NodeState s = v->second.effective;
  bool out = s == NodeState::kDrained || s == NodeState::kMaintenance;
  if (!out && r.strategy.busy == "skip" && hooks_.busy && hooks_.busy(n.node)) {
    n.message = "runs jobs: left for later (on_busy: skip)";
    return false;
  }
  if (!n.rollback) n.resume = std::string(ToString(s));  // a rollback puts it back as it was
  n.started_ms = now;
  n.state = n.rollback ? "rolling_back" : "draining";
  n.step = "drain";
  n.step_ms = now;
  n.result.clear();
  n.message = n.rollback ? "putting " + wanted + " back" : "draining";
  // A node whose jobs run on waits for them, up to the drain timeout: the rollout says so.
  if (!out && !n.rollback && hooks_.busy && hooks_.busy(n.node)) {
    n.message = "draining: waiting for its jobs to end (requeued after " +
                Duration(r.strategy.drain_timeout_ms) + ")";
  }
  node_holder_[n.node] = r.id;
  if (!out) {
    if (hooks_.drain_timeout) hooks_.drain_timeout(n.node, r.strategy.drain_timeout_ms);
    auto drained = fleet_.Act(n.node, NodeAction::kDrain, "rollout " + std::to_string(r.id));
    if (!drained.ok()) {
      Fail(r, n, "drain refused: " + drained.error().message, now, events);
      return false;
    }
  }
  if (InService(v->second.state)) {
    ++snap.pool_down[n.pool];
    ++snap.cluster_down[n.cluster];
  }
  v->second.state = v->second.effective = out ? s : NodeState::kDraining;
  events.push_back({0, r.id, now, n.node, "drain", n.message});
  return true;
}

void RolloutService::Step(Rollout& r, size_t i, Snapshot& snap, int64_t now,
                          std::vector<store::RolloutEventRecord>& events) {
  RolloutNode& n = r.nodes[i];
  auto it = snap.nodes.find(n.node);
  if (it == snap.nodes.end()) {
    Fail(r, n, "the node is gone", now, events);
    return;
  }
  const NodeView& v = it->second;
  const std::string& wanted = n.rollback ? n.from : n.to;
  const std::string& running = v.version[static_cast<int>(r.kind)];
  bool back = v.connected && v.connected_ms > n.step_ms;  // reconnected since the step began
  auto after_version = [&] {
    if (!n.rollback && n.stage < 0 && r.strategy.validate) {
      Send(r, i, "validate", {wanted}, &v, now, events);
    } else {
      Restore(r, n, now, events);
    }
  };
  if (n.step == "drain") {
    if (v.effective == NodeState::kDrained || v.effective == NodeState::kMaintenance) {
      if (running == wanted) {
        Restore(r, n, now, events);  // nothing to do: it runs it already
        return;
      }
      std::vector<std::string> args{wanted};
      if (!r.package.empty() && !n.rollback) args.push_back(r.package);
      n.state = n.rollback ? "rolling_back" : "installing";
      Send(r, i, std::string(InstallAction(r.kind)), std::move(args), &v, now, events);
    } else if (now - n.step_ms > r.strategy.drain_timeout_ms + 5 * 60'000) {
      Fail(r, n,
           "its drain did not finish within " + Duration(r.strategy.drain_timeout_ms + 5 * 60'000),
           now, events);
    }
    return;
  }
  if (n.step == "install") {
    if (n.result == "ok") {
      if (!n.rollback) n.state = "rebooting";
      Send(r, i, "reboot", {}, &v, now, events);
    } else if (!n.result.empty()) {
      Fail(r, n, std::string(InstallAction(r.kind)) + " failed: " + n.result, now, events);
    } else if (back && running == wanted) {
      after_version();  // answered while this controller was away, and rebooted
    } else if (now - n.step_ms > r.strategy.action_timeout_ms + 60'000) {
      Fail(r, n,
           "no answer to " + std::string(InstallAction(r.kind)) + " within " +
               Duration(r.strategy.action_timeout_ms),
           now, events);
    }
    return;
  }
  if (n.step == "reboot") {
    if (!n.result.empty() && n.result != "ok") {
      Fail(r, n, "reboot failed: " + n.result, now, events);
    } else if (back) {
      if (running == wanted) {
        if (!n.rollback) n.state = "validating";
        after_version();
      } else {
        Fail(r, n,
             "came back running " + (running.empty() ? "an unknown version" : running) + ", not " +
                 wanted,
             now, events);
      }
    } else if (now - n.step_ms > r.strategy.boot_timeout_ms) {
      Fail(r, n,
           "did not come back reporting " + wanted + " within " +
               Duration(r.strategy.boot_timeout_ms),
           now, events);
    }
    return;
  }
  if (n.step == "validate") {
    if (n.result == "ok") {
      Restore(r, n, now, events);
    } else if (!n.result.empty()) {
      Fail(r, n, "validation failed: " + n.result, now, events);
    } else if (now - n.step_ms > r.strategy.action_timeout_ms + 60'000) {
      Fail(r, n, "no answer to validate within " + Duration(r.strategy.action_timeout_ms), now,
           events);
    }
  }
}

void RolloutService::Advance(Rollout& r, Snapshot& snap, int64_t now, std::vector<size_t>& changed,
                             std::vector<store::RolloutEventRecord>& events) {
  auto snapshot_of = [&](size_t i) {
    const RolloutNode& n = r.nodes[i];
    return n.state + "|" + n.step + "|" + n.message + "|" + std::to_string(n.command);
  };
  std::vector<std::string> before(r.nodes.size());
  for (size_t i = 0; i < r.nodes.size(); ++i) before[i] = snapshot_of(i);
  std::string state_before = r.state + "|" + r.stage + "|" + r.reason;

  // Steps in flight go on whatever the rollout's state: paused, halted and aborted rollouts let
  // a node finish the step it is in rather than leave it half done.
  int busy = 0;
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    if (r.nodes[i].Busy()) Step(r, i, snap, now, events);
    busy += r.nodes[i].Busy();
  }
  const bool active =
      r.state == "running" || r.state == "waiting_window" || r.state == "awaiting_approval";
  if (active) {
    // Gates on the updated nodes: the health model's verdict, XIDs since the update (unless the
    // rest of the pool has them as much), alerts firing, each against the node alone.
    std::map<std::string, std::pair<int, int>> pool_xids;  // pool -> not updated: with, all
    bool counted = false;
    for (auto& n : r.nodes) {
      if (n.state != "updated" || n.rollback || n.ended_ms == 0) continue;
      auto v = snap.nodes.find(n.node);
      if (v == snap.nodes.end()) continue;
      std::string why;
      if (v->second.state == NodeState::kUnhealthy) {
        why = "unhealthy since its update: " + v->second.reason;
      } else if (auto x = snap.last_xid.find(n.node);
                 x != snap.last_xid.end() && x->second > n.ended_ms) {
        if (!counted) {
          counted = true;
          std::set<std::string> updated;
          for (const auto& m : r.nodes) {
            if (m.state == "updated" || m.state == "failed") updated.insert(m.node);
          }
          for (const auto& [name, view] : snap.nodes) {
            if (updated.count(name) || !Counted(view.state)) continue;
            auto& [with, all] = pool_xids[view.pool];
            ++all;
            auto nx = snap.last_xid.find(name);
            with += nx != snap.last_xid.end() && nx->second > r.started_ms;
          }
        }
        auto [with, all] = pool_xids[n.pool];
        if (all == 0 || with * 2 < all) {
          why = "XID after its update (the rest of pool " + n.pool + ": " + std::to_string(with) +
                " of " + std::to_string(all) + " nodes with XIDs since the rollout began)";
        }
      } else if (auto a = snap.alerting.find(n.node); a != snap.alerting.end()) {
        why = "alert " + a->second + " firing since its update";
      }
      if (why.empty()) continue;
      (void)fleet_.Act(n.node, NodeAction::kCordon, "rollout " + std::to_string(r.id));
      n.rollback = false;
      Fail(r, n, why, now, events);
    }
    // The failure threshold.
    int failed = 0;
    std::string first;
    for (const auto& n : r.nodes) {
      if (n.state == "failed" && !n.rollback) {
        if (first.empty()) first = n.node + ": " + n.message;
        ++failed;
      }
    }
    int limit = r.strategy.max_failed_nodes.Of(static_cast<int>(r.nodes.size()));
    bool test_failed = false;
    for (const auto& n : r.nodes) test_failed |= n.stage < 0 && n.state == "failed";
    if (failed >= limit || test_failed) {
      r.reason = (test_failed ? std::string("the test stage failed")
                              : std::to_string(failed) + " node(s) failed (max_failed_nodes " +
                                    r.strategy.max_failed_nodes.Text() + ")") +
                 "; first: " + first;
      r.state = r.strategy.rollback == "automatic" ? "rolling_back" : "halted";
      if (r.state == "halted") r.reason += "; roll back or resume it";
      events.push_back({0, r.id, now, "", "halted", r.reason});
      spdlog::error("rollout {} halted: {}", r.id, r.reason);
    }
  }
  if (r.state == "running" || r.state == "waiting_window") {
    auto stage_done = [&](int s) {
      for (const auto& n : r.nodes) {
        if (n.stage == s && !n.Done()) return false;
      }
      return true;
    };
    auto has_stage = [&](int s) {
      return std::any_of(r.nodes.begin(), r.nodes.end(),
                         [s](const RolloutNode& n) { return n.stage == s; });
    };
    bool hold = false;  // confidence or approval: nothing starts
    for (;;) {
      if (r.current > r.batches) break;
      if (!has_stage(r.current)) {
        ++r.current;
        continue;
      }
      if (!stage_done(r.current)) break;
      if (r.current == 0 && r.strategy.confidence_ms > 0) {
        if (r.confidence_until_ms == 0) {
          r.confidence_until_ms = now + r.strategy.confidence_ms;
          events.push_back({0, r.id, now, "", "confidence",
                            "the canaries run " + r.target + ": watching them for " +
                                Duration(r.strategy.confidence_ms)});
        }
        if (now < r.confidence_until_ms) {
          r.stage = "confidence";
          r.reason = "confidence period: watching the updated nodes until " +
                     FormatTime(r.confidence_until_ms);
          hold = true;
          break;
        }
      }
      bool more = std::any_of(r.nodes.begin(), r.nodes.end(),
                              [&](const RolloutNode& n) { return n.stage > r.current; });
      if (r.strategy.approve_between_stages && r.current <= 0 && r.approved < r.current && more) {
        r.state = "awaiting_approval";
        r.reason = "the " + StageName(r) + " stage passed: approve to go on";
        events.push_back({0, r.id, now, "", "awaiting_approval", r.reason});
        hold = true;
        break;
      }
      ++r.current;
      if (r.current <= r.batches && has_stage(r.current)) {
        events.push_back({0, r.id, now, "", "stage", "stage " + StageName(r) + " begins"});
      }
    }
    if (r.current > r.batches) {
      int failed = 0;
      for (const auto& n : r.nodes) failed += n.state == "failed";
      r.state = "completed";
      r.stage = "";
      r.ended_ms = now;
      r.reason = failed ? std::to_string(failed) + " node(s) failed and were set aside"
                        : "every node runs " + r.target;
      events.push_back({0, r.id, now, "", "completed", r.reason});
      spdlog::info("rollout {} completed: {}", r.id, r.reason);
    } else if (!hold && r.state != "awaiting_approval") {
      r.stage = StageName(r);
      int started = 0, closed = 0;
      std::string window_why, room_why;
      for (size_t i = 0; i < r.nodes.size(); ++i) {
        RolloutNode& n = r.nodes[i];
        if (n.stage != r.current || n.state != "pending") continue;
        auto v = snap.nodes.find(n.node);
        if (v == snap.nodes.end() || !Counted(v->second.state)) {
          n.state = "skipped";
          n.message = "the node is gone or retired";
          continue;
        }
        if (!v->second.connected) {
          // Waited for (a controller that restarted sees its agents come back one by one);
          // one unreachable for longer than boot_timeout is left for another rollout.
          if (v->second.state == NodeState::kUnreachable &&
              now - v->second.state_since_ms > r.strategy.boot_timeout_ms) {
            n.state = "skipped";
            n.message = "unreachable for more than " + Duration(r.strategy.boot_timeout_ms) +
                        " when its turn came";
            n.ended_ms = now;
            events.push_back({0, r.id, now, n.node, "skipped", n.message});
          } else {
            n.message = "waiting for its agent to connect";
          }
          continue;
        }
        if (r.strategy.RespectsWindows(r.kind) && !WindowOpen(n.pool, now, snap, &window_why)) {
          ++closed;
          continue;
        }
        bool in_service = InService(v->second.state);
        int pool_room =
            r.strategy.max_unavailable.Of(snap.pool_size[n.pool]) - snap.pool_down[n.pool];
        int cluster_room = r.strategy.max_unavailable.Of(snap.cluster_size[n.cluster]) -
                           snap.cluster_down[n.cluster];
        if (in_service && (pool_room <= 0 || cluster_room <= 0)) {
          bool pool_full = pool_room <= 0;
          const std::string& where = pool_full ? n.pool : n.cluster;
          room_why =
              (pool_full ? "pool " : "cluster ") + where + " has " +
              std::to_string(pool_full ? snap.pool_down[n.pool] : snap.cluster_down[n.cluster]) +
              " node(s) out of service (max_unavailable " + r.strategy.max_unavailable.Text() + ")";
          continue;
        }
        started += Begin(r, i, snap, now, events);
      }
      busy = 0;
      for (const auto& n : r.nodes) busy += n.Busy();
      if (busy == 0 && started == 0 && closed > 0) {
        r.state = "waiting_window";
        r.reason = "waiting for a maintenance window: " + window_why;
      } else if (r.state == "waiting_window") {
        r.state = "running";
        r.reason = "the maintenance window is open";
      } else if (busy > 0) {
        r.reason = std::to_string(busy) + " node(s) in progress in " + r.stage;
      } else if (!room_why.empty()) {
        r.reason = "waiting: " + room_why;
      }
    }
  }
  if (r.state == "rolling_back") {
    r.stage = "rollback";
    int waiting = 0;
    for (size_t i = 0; i < r.nodes.size(); ++i) {
      RolloutNode& n = r.nodes[i];
      if (n.state == "pending") {
        n.state = "skipped";
        n.message = "the rollout rolled back before its turn";
        continue;
      }
      if (n.rollback || n.Busy() || (n.state != "updated" && n.state != "failed")) continue;
      auto v = snap.nodes.find(n.node);
      if (v == snap.nodes.end()) continue;
      if (n.from.empty() || v->second.version[static_cast<int>(r.kind)] == n.from) {
        // Never changed (its install failed, say): back in service, nothing to undo.
        n.rollback = true;
        Restore(r, n, now, events);
        continue;
      }
      ++waiting;
      bool in_service = InService(v->second.state);
      int pool_room =
          r.strategy.max_unavailable.Of(snap.pool_size[n.pool]) - snap.pool_down[n.pool];
      int cluster_room = r.strategy.max_unavailable.Of(snap.cluster_size[n.cluster]) -
                         snap.cluster_down[n.cluster];
      if (in_service && (pool_room <= 0 || cluster_room <= 0)) continue;
      n.rollback = true;
      Begin(r, i, snap, now, events);
    }
    busy = 0;
    for (const auto& n : r.nodes) busy += n.Busy();
    if (busy == 0 && waiting == 0) {
      r.state = "rolled_back";
      r.ended_ms = now;
      int failed = 0;
      for (const auto& n : r.nodes) failed += n.state == "failed";
      r.reason += failed ? "; rolled back, " + std::to_string(failed) + " node(s) could not be"
                         : "; every touched node runs its previous version again";
      events.push_back({0, r.id, now, "", "rolled_back", r.reason});
      spdlog::warn("rollout {} rolled back", r.id);
    } else {
      r.reason = r.reason.substr(0, r.reason.find("; rolling back")) + "; rolling back " +
                 std::to_string(busy + waiting) + " node(s)";
    }
  }
  if (r.state == "aborted" && busy == 0) r.stage = "";
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    if (snapshot_of(i) != before[i]) changed.push_back(i);
  }
  if (!changed.empty() || r.state + "|" + r.stage + "|" + r.reason != state_before) {
    r.updated_ms = now;
  }
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
  int steps = 0;
  for (auto& [id, r] : rollouts_) {
    bool busy =
        std::any_of(r.nodes.begin(), r.nodes.end(), [](const RolloutNode& n) { return n.Busy(); });
    if (r.Ended() && !busy) continue;
    std::vector<size_t> changed;
    std::vector<store::RolloutEventRecord> events;
    std::string before = r.state;
    int64_t updated = r.updated_ms;
    Advance(r, snap, now, changed, events);
    if (!changed.empty() || r.updated_ms != updated || r.state != before) Persist(r, changed);
    if (!events.empty()) {
      if (auto s = store_.AppendRolloutEvents(events); !s.ok()) {
        spdlog::error("rollout {}: its events were not stored: {}", id, s.error().message);
      }
    }
    if (r.state != before) {
      Audit("rollout " + std::to_string(id), "rollout " + before + " -> " + r.state,
            "rollout/" + std::to_string(id), 200, r.reason);
    }
    steps += static_cast<int>(changed.size());
  }
  AdvanceOperations(snap, now);
  return steps;
}

void RolloutService::MarkFaulty(RolloutKind kind, const std::string& version, bool faulty) {
  std::lock_guard lock(mu_);
  if (faulty) {
    faulty_.insert({kind, version});
  } else {
    faulty_.erase({kind, version});
  }
}

std::vector<std::pair<RolloutKind, std::string>> RolloutService::Faulty() const {
  std::lock_guard lock(mu_);
  return {faulty_.begin(), faulty_.end()};
}

std::set<std::string> RolloutService::FailedNodes() const {
  std::lock_guard lock(mu_);
  std::set<std::string> out;
  int64_t now = clock_->NowMs();
  for (const auto& [id, r] : rollouts_) {
    if (r.Ended() && now - r.ended_ms >= 3'600'000) continue;
    for (const auto& n : r.nodes) {
      if (n.state == "failed") out.insert(n.node);
    }
  }
  return out;
}

std::map<std::string, std::string> RolloutService::ActiveTargets() const {
  std::lock_guard lock(mu_);
  std::map<std::string, std::string> out;
  for (const auto& [id, r] : rollouts_) {
    if (r.Ended() || r.state == "rolling_back") continue;
    for (const auto& n : r.nodes) {
      if (n.state == "pending" || (n.Busy() && !n.rollback)) {
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
    bool recent = r.state == "rolled_back" && clock_->NowMs() - r.ended_ms < 3'600'000;
    if (r.state == "halted" || r.state == "rolling_back" || recent) {
      out.push_back({id, std::string(ToString(r.kind)), r.target, r.state, r.reason});
    }
  }
  return out;
}

}  // namespace gpufleet::lifecycle
