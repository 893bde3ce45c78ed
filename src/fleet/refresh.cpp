// Several controllers on one database: what another controller wrote to the nodes, taken into
// this one's registry (the controller calls Refresh when the store says the nodes changed).

#include <spdlog/spdlog.h>

#include <set>

#include "fleet/fleet.h"

namespace gpufleet {

std::string FleetService::Stored(const Node& n) {
  std::string out;
  for (const std::string& part :
       {n.cluster, n.pool, std::string(ToString(n.state)), std::string(ToString(n.resume_state)),
        n.reason, n.token_hash, std::to_string(n.state_since_ms),
        std::to_string(n.registered_ms)}) {
    out += part;
    out += '\x1f';
  }
  return out;
}

void FleetService::ForgetTopology() {
  std::lock_guard lock(topology_mu_);
  topology_.reset();
}

Result<int> FleetService::Refresh() {
  uint64_t before = 0;  // a node this controller wrote after the read is newer than what it read
  {
    std::lock_guard lock(mu_);
    before = write_seq_;
  }
  auto nodes = store_.LoadNodes();
  if (!nodes.ok()) return nodes.error();
  std::lock_guard lock(mu_);
  std::set<std::string> listed;
  int added = 0, changed = 0, removed = 0;
  // Connected to another controller, as far as the store says: its agent said hello there and
  // nobody has found it unreachable since.
  auto elsewhere = [](const Node& s) {
    return s.connected_ms > 0 && s.state != NodeState::kUnreachable &&
           s.state != NodeState::kRetired;
  };
  for (auto& n : nodes.value()) {
    listed.insert(n.name);
    auto [it, created] = nodes_.try_emplace(n.name);
    Entry& e = it->second;
    std::string stored = Stored(n);
    if (created) {
      n.connected = elsewhere(n);
      e.node = std::move(n);
      e.stored = std::move(stored);
      ++added;
      continue;
    }
    // A change of this controller's is being written, or waits for the store: it goes on.
    if (e.writing || e.unsaved || e.written > before) continue;
    const bool served_here = e.connection != 0;
    if (stored == e.stored && served_here) continue;
    Node& mine = e.node;
    if (served_here) {  // what its agent tells this controller stays
      n.facts = std::move(mine.facts);
      n.gpus = std::move(mine.gpus);
      n.last_seen_ms = mine.last_seen_ms;
      n.connected_ms = mine.connected_ms;
    } else {
      n.last_seen_ms = std::max(n.last_seen_ms, mine.last_seen_ms);
      // Its agent said hello to another controller after it left this one: that one's now.
      if (e.heard && n.connected_ms > mine.connected_ms) e.heard = false;
      if (e.heard) n.connected_ms = mine.connected_ms;
    }
    n.connected = served_here || (!e.heard && elsewhere(n));
    if (stored != e.stored) ++changed;
    mine = std::move(n);
    e.stored = std::move(stored);
    e.summary.clear();
  }
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    const Entry& e = it->second;
    if (!listed.count(it->first) && e.connection == 0 && !e.writing && !e.unsaved &&
        e.written <= before) {
      it = nodes_.erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  if (added || changed || removed) {
    changes_.fetch_add(1, std::memory_order_release);
    spdlog::info("fleet: took {} new, {} changed and {} removed node(s) from the store", added,
                 changed, removed);
  }
  return added + changed + removed;
}

}  // namespace gpufleet
