#include "fleet/fleet.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/crypto.h"
#include "common/json_text.h"
#include "common/strings.h"
#include "model/json.h"

namespace gpufleet {

FleetService::FleetService(store::FleetStore& store, store::TokenStore& tokens,
                           std::shared_ptr<const GpuCatalog> catalog, std::shared_ptr<Clock> clock,
                           FleetOptions options)
    : store_(store),
      tokens_(tokens),
      catalog_(std::move(catalog)),
      clock_(std::move(clock)),
      options_(options) {}

Status FleetService::Load() {
  auto nodes = store_.LoadNodes();
  if (!nodes.ok()) return nodes.error();
  std::lock_guard lock(mu_);
  int64_t now = clock_->NowMs();
  for (auto& n : nodes.value()) {
    n.connected = false;
    // Give every agent a full timeout to reconnect after a controller restart.
    n.last_seen_ms = std::max(n.last_seen_ms, now);
    std::string name = n.name;
    Entry& entry = nodes_[name] = Entry();
    entry.node = std::move(n);
    entry.stored = Stored(entry.node);
  }
  spdlog::info("fleet: loaded {} nodes", nodes_.size());
  return {};
}

Status FleetService::ReadTopologyLocked() {
  if (topology_) return {};
  auto clusters = store_.ListClusters();
  if (!clusters.ok()) return clusters.error();
  auto pools = store_.ListPools();
  if (!pools.ok()) return pools.error();
  topology_ = Topology{std::move(clusters.value()), std::move(pools.value())};
  return {};
}

Result<std::vector<Cluster>> FleetService::Clusters() {
  std::lock_guard lock(topology_mu_);
  GF_TRY(ReadTopologyLocked());
  return topology_->clusters;
}

Result<std::vector<Pool>> FleetService::Pools() {
  std::lock_guard lock(topology_mu_);
  GF_TRY(ReadTopologyLocked());
  return topology_->pools;
}

Result<Pool> FleetService::FindPool(const std::string& name) {
  auto pools = Pools();
  if (!pools.ok()) return pools.error();
  for (auto& p : pools.value()) {
    if (p.name == name) return p;
  }
  return MakeError(ErrorCode::kNotFound, "no pool '" + name + "'");
}

namespace {

// Each cluster of `next` created, updated or unchanged against `old`, its times set.
void CountClusters(const std::map<std::string, Cluster>& old, std::vector<Cluster>& next,
                   int64_t now, ApplyCounts& counts) {
  for (auto& c : next) {
    auto it = old.find(c.name);
    if (it == old.end()) {
      c.created_ms = c.updated_ms = now;
      ++counts.clusters_created;
    } else if (it->second.type != c.type || it->second.site != c.site ||
               it->second.team != c.team || it->second.remediation != c.remediation ||
               it->second.scheduler != c.scheduler || it->second.labels != c.labels ||
               it->second.lifecycle != c.lifecycle) {
      c.created_ms = it->second.created_ms;
      c.updated_ms = now;
      ++counts.clusters_updated;
    } else {
      c = it->second;
      ++counts.clusters_unchanged;
    }
  }
}

}  // namespace

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
  CountClusters(old_clusters, new_clusters, now, counts);
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
        old.size != p.size || old.team != p.team || old.labels != p.labels ||
        old.exporters != p.exporters || old.scrape_interval_ms != p.scrape_interval_ms ||
        old.lifecycle != p.lifecycle) {
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
  {
    // Under the lock, so that no reader keeps what the store held before this write.
    std::lock_guard lock(topology_mu_);
    GF_TRY(store_.ApplyFleet(new_clusters, new_pools));
    topology_.reset();  // read again, in the store's order, on the next call
  }

  // A pool's profile changed: judge its nodes again.
  std::lock_guard lock(mu_);
  for (const auto& name : changed_pools) {
    const Pool* pool = nullptr;
    for (const auto& p : new_pools) {
      if (p.name == name) pool = &p;
    }
    for (auto& [_, e] : nodes_) {
      // A node being registered is judged by its registration, against the pool it read.
      if (e.node.pool != name || e.writing) continue;
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

Status FleetService::Save(Entry& entry, const std::vector<NodeEvent>& events, bool retry) {
  entry.summary.clear();
  changes_.fetch_add(1, std::memory_order_release);
  // The events of earlier changes whose write failed go first.
  const size_t kept = entry.unsaved_events.size();
  entry.unsaved_events.insert(entry.unsaved_events.end(), events.begin(), events.end());
  Status saved = store_.SaveNode(entry.node, entry.unsaved_events);
  if (saved.ok()) {
    entry.stored = Stored(entry.node);
    entry.written = ++write_seq_;
    entry.unsaved = false;
    entry.unsaved_events.clear();
  } else if (retry) {
    entry.unsaved = true;
  } else {
    entry.unsaved_events.resize(kept);  // the caller undoes the change
  }
  return saved;
}

void FleetService::AwaitWrite(std::unique_lock<std::mutex>& lock, const std::string& name) {
  written_.wait(lock, [&] {
    auto it = nodes_.find(name);
    return it == nodes_.end() || !it->second.writing;
  });
}

std::unique_lock<std::mutex> FleetService::LockFor(const std::string& name) {
  std::unique_lock lock(mu_);
  AwaitWrite(lock, name);
  return lock;
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
  auto lock = LockFor(name);
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
  // A node in a health state says its latest verdict; one an operator or remediation took out
  // (cordoned, draining, ...) keeps why it was (remediation finds its own nodes by it).
  if (events.empty() && state != NodeState::kReady && !IsAdminState(n.state)) n.reason = why;
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

Result<Node> FleetService::Act(const std::string& name, NodeAction action, const std::string& actor,
                               const std::string& why) {
  auto lock = LockFor(name);
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
  if (!why.empty()) reason += ": " + why;
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
  if (auto s = Save(entry, events, /*retry=*/false); !s.ok()) {
    node = before;
    return s.error();
  }
  return node;
}

Result<Node> FleetService::ResetIdentity(const std::string& name, const std::string& actor) {
  auto lock = LockFor(name);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return MakeError(ErrorCode::kNotFound, "no node '" + name + "'");
  Entry& entry = it->second;
  Node& node = entry.node;
  if (node.facts.backend == kExporterBackend) {
    return MakeError(ErrorCode::kConflict,
                     "node " + name + " is scraped from dcgm-exporter; it has no agent identity");
  }
  Node before = node;
  node.token_hash = std::string(kJoinableNode);
  NodeEvent e;
  e.node = name;
  e.time_ms = clock_->NowMs();
  e.from = e.to = std::string(ToString(node.state));
  e.reason = "identity cleared by " + actor + ": the next agent with a join token takes the name";
  e.actor = actor;
  entry.summary.clear();
  if (auto s = Save(entry, {e}, /*retry=*/false); !s.ok()) {
    node = before;
    return s.error();
  }
  return node;
}

Status FleetService::NoteEvent(const std::string& name, const std::string& what,
                               const std::string& actor) {
  auto lock = LockFor(name);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return MakeError(ErrorCode::kNotFound, "no node '" + name + "'");
  NodeEvent e;
  e.node = name;
  e.time_ms = clock_->NowMs();
  e.from = e.to = std::string(ToString(it->second.node.state));
  e.reason = what;
  e.actor = actor;
  return Save(it->second, {e});
}

Result<Node> FleetService::Provision(const std::string& pool_name, const std::string& name,
                                     bool simulated, const std::string& reason,
                                     const std::string& actor) {
  if (!IsValidName(name)) {
    return MakeError(ErrorCode::kInvalidArgument, "'" + name + "' is not a valid node name");
  }
  auto pool = FindPool(pool_name);
  if (!pool.ok()) return pool.error();
  auto lock = LockFor(name);
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
  if (auto s = Save(entry, events, /*retry=*/false); !s.ok()) {
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
  auto lock = LockFor(name);
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
  if (auto s = Save(entry, events, /*retry=*/false); !s.ok()) {
    node = before;
    return s.error();
  }
  return {};
}

Status FleetService::Delete(const std::string& name) {
  auto lock = LockFor(name);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return MakeError(ErrorCode::kNotFound, "no node '" + name + "'");
  const Node& node = it->second.node;
  bool gone = node.state == NodeState::kRetired ||
              (node.state == NodeState::kDecommissioning && !node.connected);
  if (!gone) {
    return MakeError(ErrorCode::kConflict,
                     "node " + name + " is " + std::string(ToString(node.state)) +
                         ": only a retired node (or a decommissioning one whose agent is gone) "
                         "can be deleted; decommission it first");
  }
  if (auto s = store_.DeleteNode(name); !s.ok() && s.error().code != ErrorCode::kNotFound) {
    return s.error();
  }
  nodes_.erase(it);
  changes_.fetch_add(1, std::memory_order_release);
  return {};
}

Status FleetService::FinishDrain(const std::string& name, const std::string& reason) {
  auto lock = LockFor(name);
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
  if (auto s = Save(entry, events, /*retry=*/false); !s.ok()) {
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
  out.token.prefix = SecretPrefix(out.secret);
  out.token.created_by = actor;
  out.token.created_ms = clock_->NowMs();
  out.token.expires_ms = ttl_ms > 0 ? out.token.created_ms + ttl_ms : 0;
  GF_TRY(tokens_.CreateJoinToken(out.token));
  return out;
}

}  // namespace gpufleet
