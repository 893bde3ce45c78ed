#pragma once
// The fleet component: clusters and pools (fleet as code), the node registry and its state
// machine, node registration through join tokens, heartbeats and the unreachable monitor.
// FleetService is thread-safe: the registry is guarded by mu_, and every change of a node is
// written through to the Store (with its events) before it is acknowledged. A registration
// writes its node outside mu_ (so a storm of them on PostgreSQL goes at the database's pace,
// not one round trip at a time); any other change of that node waits for the write to end.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "config/fleet_spec.h"
#include "model/catalog.h"
#include "model/state_machine.h"
#include "proto/agent_handler.h"
#include "store/store.h"

namespace gpufleet {

// NodeFacts::backend of a node the controller scrapes instead of hearing from an agent.
inline constexpr std::string_view kExporterBackend = "dcgm-exporter";

struct FleetOptions {
  int heartbeat_interval_ms = 5'000;  // told to agents in the welcome
  int heartbeat_timeout_ms = 30'000;  // no heartbeat for this long: unreachable
};

struct NodeFilter {
  std::string cluster;
  std::string pool;
  std::string state;
  std::string model;                  // catalogue id or driver name
  std::vector<std::string> clusters;  // allowed clusters (a scoped token); empty: all
  std::string name;                   // one node
};

struct ApplyCounts {
  int clusters_created = 0, clusters_updated = 0, clusters_unchanged = 0;
  int pools_created = 0, pools_updated = 0, pools_unchanged = 0;
};

// What applying a fleet file would do (gpufleet diff): each cluster and pool it creates, each it
// changes with the fields that differ (dotted paths into the API's JSON of it, old and new
// values as JSON text), and each the store holds that the file does not name (what apply
// --prune deletes). Unchanged ones are left out; clusters first, then pools, by name.
struct FleetChange {
  struct Field {
    std::string field, from, to;
  };
  std::string kind;  // "cluster", "pool", "scaling", "channel" or "rule"
  std::string name;
  std::string action;  // "create", "update" or "delete"
  std::vector<Field> fields;
};
std::vector<FleetChange> DiffFleet(const std::vector<Cluster>& clusters,
                                   const std::vector<Pool>& pools, const FleetSpec& spec);
// Two JSON objects' differing fields, as above ("" is an empty object): for what the fleet file
// carries beside clusters and pools (channels, alert rules).
std::vector<FleetChange::Field> DiffJson(const std::string& before, const std::string& after);
// The scaling blocks (kind "scaling", named by pool): `have`, the policies in effect, against
// the file's. A policy of a pool the file does not name is a delete (it goes with its pool);
// a pool the file names without a scaling block keeps its policy, so that is no change.
std::vector<FleetChange> DiffScaling(const std::vector<PoolScaling>& have, const FleetSpec& spec);

// What apply --prune deletes: the pools and clusters the store holds that the file does not
// name.
struct PrunePlan {
  std::vector<std::string> pools, clusters;
};

// A page of nodes as JSON objects joined by commas (the inside of a JSON array).
struct NodeList {
  std::string items;
  size_t total = 0;  // how many matched, before paging
};

struct IssuedJoinToken {
  JoinToken token;
  std::string secret;  // shown once
};

class FleetService : public proto::AgentHandler {
 public:
  FleetService(store::FleetStore& store, store::TokenStore& tokens,
               std::shared_ptr<const GpuCatalog> catalog, std::shared_ptr<Clock> clock,
               FleetOptions options);

  // Loads the nodes from the store. Nodes start disconnected; those that do not come back within
  // the heartbeat timeout turn unreachable.
  Status Load();
  // Several controllers on one database: takes what another controller wrote since (a node it
  // registered, a cordon made through its API, a node it deleted). A node whose agent is
  // connected here keeps what this controller knows live (its facts, GPUs, last heartbeat and
  // connection) and takes the rest; a change of this controller's still on its way to the store
  // is kept. Returns how many nodes were added, changed or removed.
  Result<int> Refresh();
  // Reads the clusters and pools from the store again on next use (another controller applied
  // a fleet file).
  void ForgetTopology();

  Result<ApplyCounts> Apply(const FleetSpec& spec);
  // DiffFleet against what the store holds.
  Result<std::vector<FleetChange>> Diff(const FleetSpec& spec);
  // What Prune(spec) would delete; kConflict, naming each, when such a pool still has nodes
  // (they must be decommissioned and deleted first).
  Result<PrunePlan> PlanPrune(const FleetSpec& spec);
  // Deletes the plan's pools, then its clusters, in one transaction; kConflict (deleting
  // nothing) when one of the pools has gained a node since.
  Status Prune(const PrunePlan& plan);
  // From memory once read (Apply() reads them again), so jobs and API reads go on while the
  // store is away.
  Result<std::vector<Cluster>> Clusters();
  Result<std::vector<Pool>> Pools();
  Result<Pool> FindPool(const std::string& name);

  std::vector<Node> Nodes(const NodeFilter& filter) const;
  // Calls fn for every matching node, in name order, under the registry's lock and without
  // copying (what fleet-wide reads of thousands of nodes need). fn must not call back into the
  // FleetService. filter.name, when set, visits that node only.
  void ForEachNode(const NodeFilter& filter, const std::function<void(const Node&)>& fn) const;
  // The same nodes (without GPUs) rendered for the API; per-node JSON is cached until the node
  // changes, so listing thousands of nodes costs little more than copying bytes.
  NodeList NodesJson(const NodeFilter& filter, size_t offset, size_t limit);
  Result<Node> GetNode(const std::string& name) const;
  // An operator action; returns the node after it. `actor` is recorded on the events, `why`
  // (when given) added to the reason.
  Result<Node> Act(const std::string& name, NodeAction action, const std::string& actor,
                   const std::string& why = {});
  // An event on the node's history that changes nothing (what another system saw: Slurm
  // marked it DOWN).
  Status NoteEvent(const std::string& name, const std::string& what, const std::string& actor);
  // Whether a node runs jobs (set once, before serving, by the workload component): a drain of
  // a busy node stays `draining` until FinishDrain. Called under the fleet's lock: it must not
  // call back into the fleet.
  void set_busy_check(std::function<bool(const std::string& node)> busy) {
    busy_ = std::move(busy);
  }
  // Whether a frame from the node's agent has arrived and waits to be handled (set by the API
  // server while it serves; null: none): a node past the heartbeat timeout with a frame waiting
  // is not silent, the controller is behind (at 12,500 agents registering at once, heartbeats
  // waited behind telemetry for more than the timeout), and stays as it is. Called under the
  // fleet's lock: it must not call back into the fleet.
  void set_frame_waiting(std::function<bool(const std::string& node)> waiting) {
    std::lock_guard lock(mu_);
    frame_waiting_ = std::move(waiting);
  }
  // Clears the node's identity (its node token): the next agent that says hello with the name
  // and a join token, of any pool, takes it, as a machine reinstalled without its state does.
  // Until then a join token is refused for a registered name. The agent connected now, if any,
  // keeps its connection until it closes. Returns the node after it.
  Result<Node> ResetIdentity(const std::string& name, const std::string& actor);
  // Autoscaling. Provision records a node that is being started for `pool` (state
  // provisioning, until its agent registers); a retired node of that name is brought back.
  // kConflict for a node that exists and is not retired.
  Result<Node> Provision(const std::string& pool, const std::string& name, bool simulated,
                         const std::string& reason, const std::string& actor);
  // Decommissions and retires a node in one step (a scaled-down or failed-to-start node).
  Status Retire(const std::string& name, const std::string& reason, const std::string& actor);
  // Forgets a retired (or decommissioning, disconnected) node: its record and GPUs leave the
  // store; its events stay. kConflict for any other node.
  Status Delete(const std::string& name);
  // A draining node whose jobs have ended (or been requeued) becomes drained.
  Status FinishDrain(const std::string& name, const std::string& reason);
  Result<std::vector<NodeEvent>> Events(const std::string& node, int limit);

  Result<IssuedJoinToken> CreateJoinToken(const std::string& pool, int64_t ttl_ms,
                                          const std::string& actor);

  // Turns nodes whose heartbeats stopped unreachable; returns how many changed. With
  // `judge_unheard` false, only nodes whose agent (or exporter) reached this controller since it
  // started are judged: with several controllers, the others' nodes are theirs to judge.
  int CheckHeartbeats(bool judge_unheard = true);
  int ConnectedAgents() const;  // agents (and scraped exporters) connected to this controller
  // Counts changes to the nodes this controller holds (a record written, registered, deleted,
  // or taken from the store): what was read from them at one count still holds at the same.
  uint64_t changes() const { return changes_.load(std::memory_order_acquire); }
  // Several controllers: the nodes whose agent is connected to another controller (the store
  // says connected, and it has not reached this one since): that one holds their telemetry.
  std::set<std::string> HeldElsewhere() const;
  // The UUIDs of a node's GPUs, by index (empty strings for gaps); empty for an unknown node.
  std::vector<std::string> GpuUuids(const std::string& node) const;

  // Scrape mode: a successful scrape of a node's dcgm-exporter. Registers the node in `pool` on
  // the first one, judges its GPUs like an agent's, and keeps it reachable; `silence_ms` is how
  // long without another success before it turns unreachable. Refused for a node that a
  // gpufleet agent serves.
  Status ObserveExporter(const std::string& name, const Pool& pool, const NodeFacts& facts,
                         std::vector<Gpu> gpus, int64_t silence_ms);

  // The health model's verdict on a node from its telemetry (ready, degraded or unhealthy, with
  // the reason). The node's state is the worse of this and its pool match; admin states such
  // as cordoned keep it as their resume state. Returns whether the verdict changed.
  Result<bool> SetHealth(const std::string& name, NodeState health, const std::string& reason);

  // proto::AgentHandler
  Result<proto::Welcome> OnHello(const proto::Hello& hello, const std::string& remote) override;
  std::optional<proto::Message> OnMessage(const std::string& node,
                                          const proto::Message& message) override;
  void OnClosed(const std::string& node, uint64_t connection) override;
  uint64_t OnConnected(const std::string& node) override;

  // The verdict on a node's reported GPUs against its pool: ready, degraded or unhealthy, with
  // the reason. Sets each GPU's catalogue model. Public for tests.
  std::pair<NodeState, std::string> Judge(const Pool& pool, std::vector<Gpu>& gpus) const;

 private:
  using Verdict_ = std::pair<NodeState, std::string>;
  struct Entry {
    Node node;
    uint64_t connection = 0;  // the live connection's id, 0 when none
    std::string summary;      // cached JSON of the persisted fields; empty when stale
    int64_t silence_ms = 0;   // allowed silence before unreachable; 0: the heartbeat timeout
    Verdict_ judged{NodeState::kReady, ""};  // the last pool match (Judge)
    Verdict_ health{NodeState::kReady, ""};  // the health model's last verdict (SetHealth)
    // A change whose write failed (the database was away): kept, with its events, until a
    // later Save() or the heartbeat check's retry writes it.
    bool unsaved = false;
    std::vector<NodeEvent> unsaved_events;
    // A registration (OnHello) is writing this node outside mu_: no other change until it ends.
    bool writing = false;
    // The agent has its node token: it spoke after the welcome that carried it, or came back
    // with it. Until then (a welcome lost on the way) the same pool's join token may register
    // the name again. Memory only: a node read from the store is taken as confirmed.
    bool confirmed = true;
    bool heard = false;  // its agent or exporter reached this controller since it started
    // Stored(node) as this controller last read or wrote it: Refresh tells another
    // controller's change by it.
    std::string stored;
    uint64_t written = 0;  // write_seq_ after this controller's last write of it
  };
  // The fields another controller's change would touch: state, reason, token, pool.
  static std::string Stored(const Node& node);
  // mu_, once no registration is writing node `name` (LockFor's wait is on written_).
  std::unique_lock<std::mutex> LockFor(const std::string& name);
  void AwaitWrite(std::unique_lock<std::mutex>& lock, const std::string& name);
  static Verdict_ Worst(const Verdict_& a, const Verdict_& b);
  // Judges the node against its pool and combines that with its health verdict.
  Verdict_ Verdict(Entry& entry, const Pool& pool);

  static bool Matches(const Node& node, const NodeFilter& filter);
  // Writes the node and its events; every persisted change goes through here, which is what
  // keeps Entry::summary honest. A failed write is kept for a retry unless `retry` is false
  // (the caller undoes the change instead). Caller holds mu_.
  Status Save(Entry& entry, const std::vector<NodeEvent>& events, bool retry = true);

  // Moves the node to `next`, recording an event; caller holds mu_ and saves.
  void Move(Node& node, NodeStatus next, const std::string& reason, const std::string& actor,
            std::vector<NodeEvent>& events);

  store::FleetStore& store_;
  store::TokenStore& tokens_;
  // The clusters and pools as the store last listed them; empty until read, cleared by Apply.
  struct Topology {
    std::vector<Cluster> clusters;
    std::vector<Pool> pools;
  };
  std::mutex topology_mu_;            // after mu_ when both are held; mu_ is never taken under it
  std::optional<Topology> topology_;  // guarded by topology_mu_
  Status ReadTopologyLocked();        // fills topology_ from the store when empty
  std::shared_ptr<const GpuCatalog> catalog_;
  std::shared_ptr<Clock> clock_;
  FleetOptions options_;
  mutable std::mutex mu_;
  std::function<bool(const std::string&)> busy_;           // set before serving
  std::function<bool(const std::string&)> frame_waiting_;  // guarded by mu_
  std::map<std::string, Entry> nodes_;                     // guarded by mu_
  std::condition_variable written_;                        // an Entry::writing ended
  uint64_t next_connection_ = 1;                           // guarded by mu_
  bool judged_unheard_ = true;        // CheckHeartbeats' last judge_unheard; guarded by mu_
  uint64_t write_seq_ = 0;            // counts this controller's node writes; guarded by mu_
  std::atomic<uint64_t> changes_{0};  // changes(); bumped under mu_
};

}  // namespace gpufleet
