// The fleet's side of the agent channel: a node's hello (join, rejoin, its GPUs checked against
// the pool), its messages, connections and heartbeats, and the exporter-scraped nodes' health.

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/crypto.h"
#include "common/strings.h"
#include "fleet/fleet.h"

namespace gpufleet {

int FleetService::CheckHeartbeats(bool judge_unheard) {
  std::lock_guard lock(mu_);
  int64_t now = clock_->NowMs();
  int changed = 0, behind = 0;
  if (judge_unheard && !judged_unheard_) {
    // The other controllers have gone: their nodes' agents get a full timeout to come here.
    for (auto& [_, e] : nodes_) {
      if (!e.heard) e.node.last_seen_ms = std::max(e.node.last_seen_ms, now);
    }
  }
  judged_unheard_ = judge_unheard;
  for (auto& [_, e] : nodes_) {
    Node& n = e.node;
    // Connected to another live controller, which judges it: as recent as this one can tell
    // (else every such node would look late to the alert rules here).
    if (!judge_unheard && !e.heard && n.connected) n.last_seen_ms = std::max(n.last_seen_ms, now);
    if (n.state == NodeState::kUnreachable || n.state == NodeState::kRetired ||
        n.state == NodeState::kProvisioning || e.writing || (!judge_unheard && !e.heard)) {
      continue;  // (a node being registered has just been heard from)
    }
    int64_t silent = now - n.last_seen_ms;
    int64_t limit = e.silence_ms ? e.silence_ms : options_.heartbeat_timeout_ms;
    if (silent <= limit) continue;
    if (frame_waiting_ && frame_waiting_(n.name)) {
      ++behind;
      continue;
    }
    const NodeStatus lost = OnLost({n.state, n.resume_state});
    if (lost == NodeStatus{n.state, n.resume_state} && !n.connected) continue;  // said once
    std::vector<NodeEvent> events;
    Move(
        n, lost,
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
  if (behind) {
    spdlog::warn(
        "fleet: {} node(s) past the heartbeat timeout have a frame waiting to be handled: this "
        "controller is behind on its agents' frames, they stay as they are",
        behind);
  }
  // Changes whose write failed while the database was away, oldest state first: written now.
  // The first failure ends the round: the store is still away, and each try may wait for its
  // connect timeout.
  int retried = 0, left = 0;
  for (auto& [_, e] : nodes_) {
    if (!e.unsaved || e.writing) continue;
    if (left == 0 && Save(e, {}).ok()) {
      ++retried;
    } else {
      ++left;
    }
  }
  if (retried)
    spdlog::info("fleet: wrote {} node change(s) kept while the store was away", retried);
  if (left) spdlog::warn("fleet: {} node change(s) still wait for the store", left);
  return changed;
}

int FleetService::ConnectedAgents() const {
  std::lock_guard lock(mu_);
  int n = 0;
  // Connected here: another controller's nodes read from the store may say connected too.
  for (const auto& [_, e] : nodes_) n += e.connection != 0 || (e.heard && e.node.connected);
  return n;
}

std::set<std::string> FleetService::HeldElsewhere() const {
  std::lock_guard lock(mu_);
  std::set<std::string> out;
  for (const auto& [name, e] : nodes_) {
    if (e.node.connected && e.connection == 0 && !e.heard) out.insert(name);
  }
  return out;
}

Result<proto::Welcome> FleetService::OnHello(const proto::Hello& hello, const std::string& remote) {
  std::string name = ToLower(hello.facts.hostname);
  if (!IsValidName(name)) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "hostname '" + Printable(hello.facts.hostname, 80) + "' is not a valid node name");
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
    auto jt = tokens_.FindJoinToken(Sha256Hex(hello.join_token));
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

  auto lock = LockFor(name);
  int64_t now = clock_->NowMs();
  auto [it, created] = nodes_.try_emplace(name);
  Node& node = it->second.node;
  if (!created && !by_node_token) {
    // A join token admits a name not registered yet; a registered one needs its own node
    // token, or an admin's reset of its identity, or to be a node provisioned for this pool,
    // or one this pool's token registered whose agent never got the welcome (it has not
    // spoken since: a lost welcome must not lock the machine out).
    const bool reset = node.token_hash == kJoinableNode;
    const bool provisioned =
        node.state == NodeState::kProvisioning && node.token_hash.empty() && node.pool == pool_name;
    const bool unconfirmed = !it->second.confirmed && node.pool == pool_name;
    if (!reset && !provisioned && !unconfirmed) {
      return MakeError(ErrorCode::kPermissionDenied,
                       "node '" + name + "' is already registered (cluster " + node.cluster +
                           "): a join token admits only a new name; the node's agent must "
                           "present its node token, or an admin clears its identity with "
                           "`gpufleet nodes reset-identity " +
                           name + "`");
    }
  }
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
  node.connected_ms = now;
  it->second.heard = true;
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
  // Written outside mu_, with the events of earlier changes whose write failed first; other
  // changes of this node wait (LockFor), so the entry is as this registration left it.
  Entry& entry = it->second;
  entry.summary.clear();
  changes_.fetch_add(1, std::memory_order_release);
  entry.writing = true;
  const Node snapshot = node;
  std::vector<NodeEvent> all = entry.unsaved_events;
  all.insert(all.end(), events.begin(), events.end());
  lock.unlock();
  Status saved = store_.SaveNode(snapshot, all);
  lock.lock();
  entry.writing = false;  // the entry stayed: nothing erases a node that is being written
  written_.notify_all();
  if (!saved.ok()) {
    if (created) {
      nodes_.erase(it);
    } else {
      node = before;
      entry.summary.clear();  // a reader may have rendered the change meanwhile
    }
    changes_.fetch_add(1, std::memory_order_release);
    return saved.error();
  }
  entry.unsaved = false;
  entry.unsaved_events.clear();
  entry.stored = Stored(snapshot);
  entry.written = ++write_seq_;
  entry.confirmed = by_node_token;  // a new node token is confirmed by the agent's next word
  welcome.node = node.name;
  welcome.cluster = node.cluster;
  welcome.pool = node.pool;
  welcome.heartbeat_interval_ms = options_.heartbeat_interval_ms;
  return welcome;
}

Status FleetService::ObserveExporter(const std::string& name, const Pool& pool,
                                     const NodeFacts& facts, std::vector<Gpu> gpus,
                                     int64_t silence_ms) {
  auto lock = LockFor(name);
  int64_t now = clock_->NowMs();
  auto [it, created] = nodes_.try_emplace(name);
  Entry& entry = it->second;
  Node& node = entry.node;
  if (!created && node.facts.backend != kExporterBackend) {
    return MakeError(ErrorCode::kConflict, "node " + name + " is served by a gpufleet agent (" +
                                               node.facts.backend + "); not scraping it");
  }
  entry.silence_ms = silence_ms;
  entry.heard = true;
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
  if (auto s = Save(entry, events, /*retry=*/false); !s.ok()) {
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
  auto lock = LockFor(name);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return std::nullopt;
  it->second.confirmed = true;  // it speaks after the welcome: it has its node token
  it->second.heard = true;
  Node& node = it->second.node;
  node.last_seen_ms = clock_->NowMs();
  const auto* inventory = std::get_if<proto::Inventory>(&message);
  bool back = node.state == NodeState::kUnreachable;
  if (!inventory && !back) return std::nullopt;  // the common case: memory only
  std::string pool_name = node.pool;
  lock.unlock();
  auto pool = FindPool(pool_name);
  lock.lock();
  AwaitWrite(lock, name);
  it = nodes_.find(name);
  if (!pool.ok() || it == nodes_.end()) return std::nullopt;
  Node& n = it->second.node;
  if (inventory) {
    n.gpus = inventory->gpus;
    if (inventory->facts) {
      std::string hostname = n.facts.hostname;
      n.facts = *inventory->facts;
      n.facts.hostname = hostname;  // the name it registered with stays
    }
  }
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
