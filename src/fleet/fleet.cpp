#include "fleet/fleet.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/crypto.h"
#include "common/json_text.h"
#include "common/strings.h"
#include "model/json.h"

namespace gpufleet {

FleetService::FleetService(Store& store, std::shared_ptr<const GpuCatalog> catalog,
                           std::shared_ptr<Clock> clock, FleetOptions options)
    : store_(store), catalog_(std::move(catalog)), clock_(std::move(clock)), options_(options) {}

Status FleetService::Load() {
  auto nodes = store_.LoadNodes();
  if (!nodes.ok()) return nodes.error();
  std::lock_guard lock(mu_);
  int64_t now = clock_->NowMs();
  for (auto& n : nodes.value()) {
    n.connected = false;
    // Give every agent a full timeout to reconnect after a controller restart.
    n.last_seen_ms = std::max(n.last_seen_ms, now);
    std::string name = n.name;  // not n.name: the right side is evaluated (and moved) first
    nodes_[name] = Entry{std::move(n), 0, {}};
  }
  spdlog::info("fleet: loaded {} nodes", nodes_.size());
  return {};
}

Result<Pool> FleetService::FindPool(const std::string& name) {
  auto pools = store_.ListPools();
  if (!pools.ok()) return pools.error();
  for (auto& p : pools.value()) {
    if (p.name == name) return p;
  }
  return MakeError(ErrorCode::kNotFound, "no pool '" + name + "'");
}

Result<ApplyCounts> FleetService::Apply(const FleetSpec& spec) {
  auto clusters = store_.ListClusters();
  if (!clusters.ok()) return clusters.error();
  auto pools = store_.ListPools();
  if (!pools.ok()) return pools.error();
  std::map<std::string, Cluster> old_clusters;
  std::map<std::string, Pool> old_pools;
  for (auto& c : clusters.value()) old_clusters[c.name] = c;
  for (auto& p : pools.value()) old_pools[p.name] = p;

  ApplyCounts counts;
  int64_t now = clock_->NowMs();
  std::vector<Cluster> new_clusters = spec.clusters;
  std::vector<Pool> new_pools = spec.pools;
  std::vector<std::string> changed_pools;
  for (auto& c : new_clusters) {
    auto it = old_clusters.find(c.name);
    if (it == old_clusters.end()) {
      c.created_ms = c.updated_ms = now;
      ++counts.clusters_created;
    } else if (it->second.type != c.type || it->second.site != c.site ||
               it->second.remediation != c.remediation || it->second.labels != c.labels) {
      c.created_ms = it->second.created_ms;
      c.updated_ms = now;
      ++counts.clusters_updated;
    } else {
      c = it->second;
      ++counts.clusters_unchanged;
    }
  }
  for (auto& p : new_pools) {
    auto it = old_pools.find(p.name);
    if (it == old_pools.end()) {
      p.created_ms = p.updated_ms = now;
      ++counts.pools_created;
      continue;
    }
    const Pool& old = it->second;
    if (old.cluster != p.cluster) {
      return MakeError(ErrorCode::kConflict, "pool '" + p.name + "' already belongs to cluster '" +
                                                 old.cluster + "', not '" + p.cluster +
                                                 "'; pools cannot move between clusters");
    }
    if (old.gpu_model != p.gpu_model || old.gpus_per_node != p.gpus_per_node ||
        old.size != p.size || old.labels != p.labels || old.exporters != p.exporters ||
        old.scrape_interval_ms != p.scrape_interval_ms) {
      p.created_ms = old.created_ms;
      p.updated_ms = now;
      ++counts.pools_updated;
      if (old.gpu_model != p.gpu_model || old.gpus_per_node != p.gpus_per_node) {
        changed_pools.push_back(p.name);
      }
    } else {
      p = old;
      ++counts.pools_unchanged;
    }
  }
  GF_TRY(store_.ApplyFleet(new_clusters, new_pools));

  // A pool's profile changed: judge its nodes again.
  std::lock_guard lock(mu_);
  for (const auto& name : changed_pools) {
    const Pool* pool = nullptr;
    for (const auto& p : new_pools) {
      if (p.name == name) pool = &p;
    }
    for (auto& [_, e] : nodes_) {
      if (e.node.pool != name) continue;
      auto [health, why] = Verdict(e, *pool);
      std::vector<NodeEvent> events;
      Move(e.node, OnHealth({e.node.state, e.node.resume_state}, health),
           "pool profile changed: " + why, "controller", events);
      if (auto s = Save(e, events); !s.ok()) {
        spdlog::error("fleet: saving {}: {}", e.node.name, s.error().message);
      }
    }
  }
  return counts;
}

bool FleetService::Matches(const Node& n, const NodeFilter& f) {
  if (!f.name.empty() && n.name != f.name) return false;
  if (!f.cluster.empty() && n.cluster != f.cluster) return false;
  if (!f.pool.empty() && n.pool != f.pool) return false;
  if (!f.state.empty() && ToString(n.state) != f.state) return false;
  if (!f.clusters.empty() &&
      std::find(f.clusters.begin(), f.clusters.end(), n.cluster) == f.clusters.end()) {
    return false;
  }
  if (!f.model.empty()) {
    return std::any_of(n.gpus.begin(), n.gpus.end(), [&](const Gpu& g) {
      return g.model == f.model || ToLower(g.name) == ToLower(f.model);
    });
  }
  return true;
}

void FleetService::ForEachNode(const NodeFilter& f,
                               const std::function<void(const Node&)>& fn) const {
  std::lock_guard lock(mu_);
  if (!f.name.empty()) {
    auto it = nodes_.find(f.name);
    if (it != nodes_.end() && Matches(it->second.node, f)) fn(it->second.node);
    return;
  }
  for (const auto& [_, e] : nodes_) {
    if (Matches(e.node, f)) fn(e.node);
  }
}

std::vector<Node> FleetService::Nodes(const NodeFilter& f) const {
  std::vector<Node> out;
  std::lock_guard lock(mu_);
  out.reserve(nodes_.size());
  for (const auto& [_, e] : nodes_) {
    if (Matches(e.node, f)) out.push_back(e.node);
  }
  return out;
}

NodeList FleetService::NodesJson(const NodeFilter& filter, size_t offset, size_t limit) {
  NodeList out;
  std::vector<Entry*> page;
  std::lock_guard lock(mu_);
  size_t bytes = 0;
  for (auto& [_, e] : nodes_) {
    if (!Matches(e.node, filter)) continue;
    size_t index = out.total++;
    if (index < offset || index >= offset + limit) continue;
    if (e.summary.empty()) {
      // Everything persisted, rendered once per change; what changes without a write (the
      // heartbeat's last_seen_at, connected) is appended on every read.
      boost::json::object o = ToJson(e.node, false);
      o.erase("last_seen_at");
      o.erase("connected");
      e.summary = JsonText(o);
      e.summary.pop_back();  // the closing brace
    }
    bytes += e.summary.size() + 64;
    page.push_back(&e);
  }
  out.items.reserve(bytes);  // one allocation: growing a large string page-faults at every step
  for (const Entry* e : page) {
    if (!out.items.empty()) out.items += ',';
    out.items += e->summary;
    out.items += e->node.connected ? ",\"connected\":true" : ",\"connected\":false";
    out.items += ",\"last_seen_at\":\"";
    out.items += FormatTime(e->node.last_seen_ms);
    out.items += "\"}";
  }
  return out;
}

Status FleetService::Save(Entry& entry, const std::vector<NodeEvent>& events) {
  entry.summary.clear();
  return store_.SaveNode(entry.node, events);
}

Result<Node> FleetService::GetNode(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return MakeError(ErrorCode::kNotFound, "no node '" + name + "'");
  return it->second.node;
}

Result<std::vector<NodeEvent>> FleetService::Events(const std::string& node, int limit) {
  if (!GetNode(node).ok()) return MakeError(ErrorCode::kNotFound, "no node '" + node + "'");
  return store_.ListNodeEvents(node, limit);
}

void FleetService::Move(Node& node, NodeStatus next, const std::string& reason,
                        const std::string& actor, std::vector<NodeEvent>& events) {
  NodeStatus current{node.state, node.resume_state};
  if (next == current) return;
  if (next.state != current.state) {
    NodeEvent e;
    e.node = node.name;
    e.time_ms = clock_->NowMs();
    e.from = std::string(ToString(node.state));
    e.to = std::string(ToString(next.state));
    e.reason = reason;
    e.actor = actor;
    events.push_back(std::move(e));
    node.state_since_ms = clock_->NowMs();
    node.reason = reason;
  }
  node.state = next.state;
  node.resume_state = next.resume;
}

FleetService::Verdict_ FleetService::Worst(const Verdict_& a, const Verdict_& b) {
  auto rank = [](NodeState s) {
    return s == NodeState::kUnhealthy ? 2 : s == NodeState::kDegraded ? 1 : 0;
  };
  if (rank(b.first) == 0) return a;
  if (rank(a.first) == 0) return b;
  return {rank(a.first) >= rank(b.first) ? a.first : b.first, a.second + "; " + b.second};
}

FleetService::Verdict_ FleetService::Verdict(Entry& entry, const Pool& pool) {
  entry.judged = Judge(pool, entry.node.gpus);
  return Worst(entry.judged, entry.health);
}

Result<bool> FleetService::SetHealth(const std::string& name, NodeState health,
                                     const std::string& reason) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return MakeError(ErrorCode::kNotFound, "no node '" + name + "'");
  Entry& e = it->second;
  if (e.health.first == health && e.health.second == reason) return false;
  e.health = {health, reason};
  Node& n = e.node;
  if (n.state == NodeState::kUnreachable || n.state == NodeState::kProvisioning ||
      n.state == NodeState::kJoining) {
    return true;  // the verdict applies when the node is back or has joined
  }
  auto [state, why] = Worst(e.judged, e.health);
  std::vector<NodeEvent> events;
  Move(n, OnHealth({n.state, n.resume_state}, state), why, "controller", events);
  if (events.empty() && state != NodeState::kReady) n.reason = why;
  if (auto s = Save(e, events); !s.ok()) return s.error();
  return true;
}

std::pair<NodeState, std::string> FleetService::Judge(const Pool& pool,
                                                      std::vector<Gpu>& gpus) const {
  std::vector<std::string> failed;
  int matching = 0;
  std::map<std::string, int> found;
  for (auto& g : gpus) {
    const GpuModelSpec* spec = catalog_->MatchDeviceName(g.name);
    g.model = spec ? spec->id : "";
    if (g.model == pool.gpu_model) ++matching;
    ++found[g.model.empty() ? (g.name.empty() ? "unknown GPU" : g.name) : g.model];
    if (!g.error.empty()) failed.push_back("GPU " + std::to_string(g.index) + ": " + g.error);
  }
  if (!failed.empty()) {
    std::string why;
    for (const auto& f : failed) why += (why.empty() ? "" : "; ") + f;
    return {NodeState::kUnhealthy, why};
  }
  if (matching != pool.gpus_per_node || static_cast<int>(gpus.size()) != pool.gpus_per_node) {
    std::string seen;
    for (const auto& [model, n] : found) {
      seen += (seen.empty() ? "" : " + ") + std::to_string(n) + " x " + model;
    }
    if (seen.empty()) seen = "no GPUs";
    return {NodeState::kDegraded, "pool " + pool.name + " expects " +
                                      std::to_string(pool.gpus_per_node) + " x " + pool.gpu_model +
                                      ", found " + seen};
  }
  return {NodeState::kReady,
          std::to_string(matching) + " x " + pool.gpu_model + " match pool " + pool.name};
}

Result<Node> FleetService::Act(const std::string& name, NodeAction action,
                               const std::string& actor) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return MakeError(ErrorCode::kNotFound, "no node '" + name + "'");
  Entry& entry = it->second;
  Node& node = entry.node;
  auto pool = FindPool(node.pool);
  NodeState health = NodeState::kReady;
  std::string health_reason;
  if (pool.ok()) std::tie(health, health_reason) = Verdict(entry, pool.value());
  Node before = node;
  std::vector<NodeEvent> events;
  auto next = ApplyAction({node.state, node.resume_state}, action, health);
  if (!next.ok()) return next.error();
  std::string reason = std::string(ToString(action)) + " by " + actor;
  if (action == NodeAction::kUncordon) reason += "; " + health_reason;
  Move(node, next.value(), reason, actor, events);
  if (action == NodeAction::kDrain && node.state == NodeState::kDraining) {
    // A node running jobs stays draining until they end (the workload component finishes the
    // drain, or requeues them after its timeout); an idle one is drained at once.
    if (busy_ && busy_(name)) {
      node.reason = "drain by " + actor + ": waiting for its jobs to end";
    } else {
      auto done = ApplyAction({node.state, node.resume_state}, NodeAction::kDrainDone, health);
      if (done.ok()) Move(node, done.value(), "drain complete: no jobs to wait for", actor, events);
    }
  }
  if (auto s = Save(entry, events); !s.ok()) {
    node = before;
    return s.error();
  }
  return node;
}

Result<Node> FleetService::Provision(const std::string& pool_name, const std::string& name,
                                     bool simulated, const std::string& reason,
                                     const std::string& actor) {
  if (!IsValidName(name)) {
    return MakeError(ErrorCode::kInvalidArgument, "'" + name + "' is not a valid node name");
  }
  auto pool = FindPool(pool_name);
  if (!pool.ok()) return pool.error();
  std::lock_guard lock(mu_);
  auto [it, created] = nodes_.try_emplace(name);
  Entry& entry = it->second;
  Node& node = entry.node;
  Node before = node;
  if (!created && node.state != NodeState::kRetired) {
    return MakeError(ErrorCode::kConflict,
                     "node " + name + " exists and is " + std::string(ToString(node.state)));
  }
  int64_t now = clock_->NowMs();
  std::vector<NodeEvent> events;
  if (created) {
    node.name = name;
    node.registered_ms = now;
    node.state = node.resume_state = NodeState::kProvisioning;
    node.state_since_ms = now;
    node.reason = reason;
    NodeEvent e;
    e.node = name;
    e.time_ms = now;
    e.from = "none";
    e.to = std::string(ToString(NodeState::kProvisioning));
    e.reason = reason;
    e.actor = actor;
    events.push_back(std::move(e));
  }
  node.cluster = pool->cluster;
  node.pool = pool->name;
  node.simulated = simulated;
  node.connected = false;
  node.token_hash.clear();  // it joins with a join token, like a new machine
  entry.connection = 0;
  entry.summary.clear();
  entry.health = {NodeState::kReady, ""};
  entry.judged = {NodeState::kReady, ""};
  Move(node, {NodeState::kProvisioning, NodeState::kProvisioning}, reason, actor, events);
  if (auto s = Save(entry, events); !s.ok()) {
    if (created) {
      nodes_.erase(it);
    } else {
      node = before;
    }
    return s.error();
  }
  return node;
}

Status FleetService::Retire(const std::string& name, const std::string& reason,
                            const std::string& actor) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return MakeError(ErrorCode::kNotFound, "no node '" + name + "'");
  Entry& entry = it->second;
  Node& node = entry.node;
  Node before = node;
  std::vector<NodeEvent> events;
  for (NodeAction a : {NodeAction::kDecommission, NodeAction::kRetire}) {
    auto next = ApplyAction({node.state, node.resume_state}, a, node.state);
    if (!next.ok()) {
      node = before;
      return next.error();
    }
    Move(node, next.value(), reason, actor, events);
  }
  if (auto s = Save(entry, events); !s.ok()) {
    node = before;
    return s.error();
  }
  return {};
}

Status FleetService::FinishDrain(const std::string& name, const std::string& reason) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return MakeError(ErrorCode::kNotFound, "no node '" + name + "'");
  Entry& entry = it->second;
  Node& node = entry.node;
  if (node.state != NodeState::kDraining) return {};
  Node before = node;
  std::vector<NodeEvent> events;
  auto done = ApplyAction({node.state, node.resume_state}, NodeAction::kDrainDone, node.state);
  if (!done.ok()) return done.error();
  Move(node, done.value(), reason, "workload", events);
  if (auto s = Save(entry, events); !s.ok()) {
    node = before;
    return s.error();
  }
  return {};
}

Result<IssuedJoinToken> FleetService::CreateJoinToken(const std::string& pool, int64_t ttl_ms,
                                                      const std::string& actor) {
  auto p = FindPool(pool);
  if (!p.ok()) return p.error();
  IssuedJoinToken out;
  out.secret = "gfj_" + RandomHex(24);
  out.token.id = "jt-" + RandomHex(6);
  out.token.pool = pool;
  out.token.hash = Sha256Hex(out.secret);
  out.token.created_by = actor;
  out.token.created_ms = clock_->NowMs();
  out.token.expires_ms = ttl_ms > 0 ? out.token.created_ms + ttl_ms : 0;
  GF_TRY(store_.CreateJoinToken(out.token));
  return out;
}

int FleetService::CheckHeartbeats() {
  std::lock_guard lock(mu_);
  int64_t now = clock_->NowMs();
  int changed = 0;
  for (auto& [_, e] : nodes_) {
    Node& n = e.node;
    if (n.state == NodeState::kUnreachable || n.state == NodeState::kRetired ||
        n.state == NodeState::kProvisioning) {
      continue;
    }
    int64_t silent = now - n.last_seen_ms;
    int64_t limit = e.silence_ms ? e.silence_ms : options_.heartbeat_timeout_ms;
    if (silent <= limit) continue;
    std::vector<NodeEvent> events;
    Move(
        n, OnLost({n.state, n.resume_state}),
        std::string(n.facts.backend == kExporterBackend ? "no successful scrape" : "no heartbeat") +
            " for " + std::to_string(silent / 1000) + "s (timeout " + std::to_string(limit / 1000) +
            "s)",
        "controller", events);
    n.connected = false;
    if (auto s = Save(e, events); !s.ok()) {
      spdlog::error("fleet: saving {}: {}", n.name, s.error().message);
    }
    ++changed;
  }
  return changed;
}

int FleetService::ConnectedAgents() const {
  std::lock_guard lock(mu_);
  int n = 0;
  for (const auto& [_, e] : nodes_) n += e.node.connected ? 1 : 0;
  return n;
}

Result<proto::Welcome> FleetService::OnHello(const proto::Hello& hello, const std::string& remote) {
  std::string name = ToLower(hello.facts.hostname);
  if (!IsValidName(name)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "hostname '" + hello.facts.hostname + "' is not a valid node name");
  }
  std::string pool_name, via;
  bool by_node_token = false;
  if (!hello.node_token.empty()) {
    std::string hash = Sha256Hex(hello.node_token);
    std::lock_guard lock(mu_);
    auto it = nodes_.find(name);
    if (it != nodes_.end() && !it->second.node.token_hash.empty() &&
        ConstantTimeEqual(it->second.node.token_hash, hash)) {
      pool_name = it->second.node.pool;
      by_node_token = true;
      via = "node token";
    }
  }
  if (!by_node_token) {
    if (hello.join_token.empty()) {
      return MakeError(ErrorCode::kUnauthenticated, "no valid node token and no join token");
    }
    auto jt = store_.FindJoinToken(Sha256Hex(hello.join_token));
    if (!jt.ok()) return MakeError(ErrorCode::kUnauthenticated, "unknown join token");
    if (jt->revoked)
      return MakeError(ErrorCode::kUnauthenticated, "join token " + jt->id + " was revoked");
    if (jt->expires_ms && jt->expires_ms < clock_->NowMs()) {
      return MakeError(ErrorCode::kUnauthenticated, "join token " + jt->id + " has expired");
    }
    pool_name = jt->pool;
    via = "join token " + jt->id;
  }
  auto pool = FindPool(pool_name);
  if (!pool.ok()) return pool.error();

  std::lock_guard lock(mu_);
  int64_t now = clock_->NowMs();
  auto [it, created] = nodes_.try_emplace(name);
  Node& node = it->second.node;
  Node before = node;
  std::vector<NodeEvent> events;
  proto::Welcome welcome;
  if (created) {
    node.name = name;
    node.registered_ms = now;
    node.state = NodeState::kProvisioning;
  }
  if (!by_node_token) {
    std::string secret = "gfn_" + RandomHex(24);
    node.token_hash = Sha256Hex(secret);
    welcome.node_token = secret;
  }
  if (!created && node.pool != pool->name) {
    Move(node, {NodeState::kJoining, NodeState::kJoining},
         "moved from pool " + node.pool + " to " + pool->name + " (" + via + ")", "agent", events);
  }
  node.cluster = pool->cluster;
  node.pool = pool->name;
  node.facts = hello.facts;
  node.facts.hostname = name;
  node.simulated = hello.simulated;
  node.gpus = hello.gpus;
  node.last_seen_ms = now;
  node.connected = true;
  auto [health, why] = Verdict(it->second, pool.value());
  if (node.state == NodeState::kProvisioning) {
    Move(node, {NodeState::kJoining, NodeState::kJoining},
         "registered from " + remote + " with " + via, "agent", events);
  }
  if (node.state == NodeState::kJoining) {
    Move(node, {health, health}, why, "agent", events);
  } else {
    Move(node, OnBack({node.state, node.resume_state}, health),
         (before.state == NodeState::kUnreachable ? "agent reconnected; " : "") + why, "agent",
         events);
  }
  if (auto s = Save(it->second, events); !s.ok()) {
    if (created) {
      nodes_.erase(it);
    } else {
      node = before;
    }
    return s.error();
  }
  welcome.node = node.name;
  welcome.cluster = node.cluster;
  welcome.pool = node.pool;
  welcome.heartbeat_interval_ms = options_.heartbeat_interval_ms;
  return welcome;
}

Status FleetService::ObserveExporter(const std::string& name, const Pool& pool,
                                     const NodeFacts& facts, std::vector<Gpu> gpus,
                                     int64_t silence_ms) {
  std::lock_guard lock(mu_);
  int64_t now = clock_->NowMs();
  auto [it, created] = nodes_.try_emplace(name);
  Entry& entry = it->second;
  Node& node = entry.node;
  if (!created && node.facts.backend != kExporterBackend) {
    return MakeError(ErrorCode::kConflict, "node " + name + " is served by a gpufleet agent (" +
                                               node.facts.backend + "); not scraping it");
  }
  entry.silence_ms = silence_ms;
  node.last_seen_ms = now;
  node.connected = true;
  entry.judged = Judge(pool, gpus);
  auto [health, why] = Worst(entry.judged, entry.health);
  bool same_gpus = !created && gpus.size() == node.gpus.size();
  for (size_t i = 0; same_gpus && i < gpus.size(); ++i) {
    same_gpus = gpus[i].uuid == node.gpus[i].uuid && gpus[i].model == node.gpus[i].model &&
                gpus[i].serial == node.gpus[i].serial;
  }
  bool same_facts = !created && node.facts.hostname == facts.hostname &&
                    node.facts.driver_version == facts.driver_version &&
                    node.facts.cuda_driver_version == facts.cuda_driver_version;
  if (same_gpus && same_facts && node.pool == pool.name && node.state != NodeState::kUnreachable &&
      node.state != NodeState::kJoining) {
    NodeStatus next = OnHealth({node.state, node.resume_state}, health);
    if (next.state == node.state && next.resume == node.resume_state) {
      return {};  // the common case: nothing to write
    }
  }
  Node before = node;
  std::vector<NodeEvent> events;
  if (created) {
    node.name = name;
    node.registered_ms = now;
    node.state = NodeState::kProvisioning;
  }
  node.cluster = pool.cluster;
  node.pool = pool.name;
  node.facts = facts;
  node.facts.backend = std::string(kExporterBackend);
  node.simulated = false;
  node.gpus = std::move(gpus);
  if (node.state == NodeState::kProvisioning) {
    Move(node, {NodeState::kJoining, NodeState::kJoining},
         "first scrape of its dcgm-exporter succeeded", "controller", events);
  }
  if (node.state == NodeState::kJoining) {
    Move(node, {health, health}, why, "controller", events);
  } else if (node.state == NodeState::kUnreachable) {
    Move(node, OnBack({node.state, node.resume_state}, health), "scrapes resumed; " + why,
         "controller", events);
  } else {
    Move(node, OnHealth({node.state, node.resume_state}, health), why, "controller", events);
  }
  if (auto s = Save(entry, events); !s.ok()) {
    if (created) {
      nodes_.erase(it);
    } else {
      node = before;
    }
    return s.error();
  }
  return {};
}

uint64_t FleetService::OnConnected(const std::string& node) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return 0;
  it->second.connection = next_connection_++;
  it->second.node.connected = true;
  return it->second.connection;
}

void FleetService::OnClosed(const std::string& node, uint64_t connection) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.connection != connection) return;
  it->second.connection = 0;
  it->second.node.connected = false;
}

std::vector<std::string> FleetService::GpuUuids(const std::string& node) const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return out;
  for (const auto& g : it->second.node.gpus) {
    if (g.index < 0 || g.index > 64) continue;
    if (out.size() <= static_cast<size_t>(g.index)) out.resize(g.index + 1);
    out[g.index] = g.uuid;
  }
  return out;
}

std::optional<proto::Message> FleetService::OnMessage(const std::string& name,
                                                      const proto::Message& message) {
  std::unique_lock lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return std::nullopt;
  Node& node = it->second.node;
  node.last_seen_ms = clock_->NowMs();
  const auto* inventory = std::get_if<proto::Inventory>(&message);
  bool back = node.state == NodeState::kUnreachable;
  if (!inventory && !back) return std::nullopt;  // the common case: memory only
  std::string pool_name = node.pool;
  lock.unlock();
  auto pool = FindPool(pool_name);
  lock.lock();
  it = nodes_.find(name);
  if (!pool.ok() || it == nodes_.end()) return std::nullopt;
  Node& n = it->second.node;
  if (inventory) n.gpus = inventory->gpus;
  auto [health, why] = Verdict(it->second, pool.value());
  std::vector<NodeEvent> events;
  NodeStatus current{n.state, n.resume_state};
  Move(n, n.state == NodeState::kUnreachable ? OnBack(current, health) : OnHealth(current, health),
       n.state == NodeState::kUnreachable ? "heartbeats resumed; " + why : why, "agent", events);
  if (auto s = Save(it->second, events); !s.ok()) {
    spdlog::error("fleet: saving {}: {}", n.name, s.error().message);
  }
  return std::nullopt;
}

}  // namespace gpufleet
