// RolloutService's choice of nodes and stages: which nodes a request selects, the canaries and
// the rolling batches they are assigned to, the compatibility check and the dry run (plan).

#include <algorithm>

#include "lifecycle/internal.h"
#include "lifecycle/rollout_service.h"

namespace gpufleet::lifecycle {

namespace {

// The clusters, pools and nodes a request names exist (in RolloutService's snapshot).
template <class Snapshot>
Status CheckNamed(const RolloutRequest& req, const Snapshot& snap) {
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
  return {};
}

bool IsTestNode(const RolloutStrategy& strategy, const std::string& name, const std::string& pool) {
  return std::find(strategy.test_nodes.begin(), strategy.test_nodes.end(), name) !=
             strategy.test_nodes.end() ||
         (!strategy.test_pool.empty() && pool == strategy.test_pool);
}

}  // namespace

Result<std::vector<RolloutNode>> RolloutService::Select(const RolloutRequest& req,
                                                        const Snapshot& snap,
                                                        std::vector<std::string>& skipped) const {
  const RolloutSelector& sel = req.selector;
  GF_TRY(CheckNamed(req, snap));
  auto in = [](const std::vector<std::string>& list, const std::string& s) {
    return list.empty() || std::find(list.begin(), list.end(), s) != list.end();
  };
  auto labels_match = [&](const NodeFacts& v) {
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
    bool test = IsTestNode(req.strategy, name, v.pool);
    if (!test && !(in(sel.clusters, v.cluster) && in(sel.pools, v.pool) && in(sel.nodes, name) &&
                   labels_match(v))) {
      continue;
    }
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  std::vector<RolloutNode> out;
  for (const auto& name : names) {
    const NodeFacts& v = snap.nodes.at(name);
    const std::string& running = v.version[static_cast<size_t>(req.kind)];
    if (!Spec(req.kind).none.empty() && running.empty()) {
      skipped.push_back(name + ": " + std::string(Spec(req.kind).none));
      continue;
    }
    RolloutNode n;
    n.node = name;
    n.pool = v.pool;
    n.cluster = v.cluster;
    n.from = running;
    n.to = req.target;
    bool test = IsTestNode(req.strategy, name, v.pool);
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
      plan.runs.emplace_back(n.node, n.from);
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

}  // namespace gpufleet::lifecycle
