// The snapshot an evaluation sees, and the reader of the controller's telemetry store.

#include <atomic>
#include <cstdlib>

#include "alerting/eval.h"
#include "telemetry/telemetry.h"

namespace gpufleet::alerting {
namespace {

uint32_t Intern(std::vector<std::string>& table, std::map<std::string, uint32_t>& ids,
                const std::string& s) {
  auto [it, fresh] = ids.try_emplace(s, static_cast<uint32_t>(table.size()));
  if (fresh) table.push_back(s);
  return it->second;
}

}  // namespace

Snapshot MakeSnapshot(const std::vector<health::NodeHealth>& nodes,
                      const std::map<std::string, std::vector<health::XidSeen>>& xids,
                      const XidCatalog& catalog, int64_t now_ms, double api_p99_s) {
  static std::atomic<uint64_t> generations{0};
  Snapshot s;
  s.generation = ++generations;
  s.now_ms = now_ms;
  s.api_p99_s = api_p99_s;
  std::map<std::string, uint32_t> cluster_ids, pool_ids, model_ids;
  for (const auto& n : nodes) {
    if (LeftFleet(n.state)) continue;  // no series, so no alert
    Snapshot::NodeRow row;
    row.name = n.node;
    row.cluster = Intern(s.clusters, cluster_ids, n.cluster);
    row.pool = Intern(s.pools, pool_ids, n.pool);
    row.up = n.reachable;
    row.health = n.health == NodeState::kReady ? 0 : n.health == NodeState::kDegraded ? 1 : 2;
    row.cordoned = n.state == NodeState::kCordoned || n.state == NodeState::kDraining ||
                   n.state == NodeState::kDrained;
    row.last_seen_ms = n.last_seen_ms;
    auto node_index = static_cast<uint32_t>(s.nodes.size());
    s.nodes.push_back(std::move(row));
    for (const auto& g : n.gpus) {
      Snapshot::GpuRow gpu;
      gpu.node = node_index;
      gpu.gpu = std::to_string(g.index);
      gpu.uuid = g.uuid;
      gpu.model = Intern(s.models, model_ids, g.model);
      gpu.health = static_cast<int>(g.level);
      if (auto it = xids.find(g.uuid); it != xids.end()) {
        auto& list = s.xids[s.gpus.size()];
        for (const auto& x : it->second) {
          XidInfo info = catalog.Find(x.xid);
          list.push_back({x.time_ms, x.xid, std::string(ToString(info.severity)), info.action});
        }
      }
      s.gpus.push_back(std::move(gpu));
    }
  }
  return s;
}

void AddPools(Snapshot& s, const std::vector<PoolInput>& pools,
              const std::map<std::string, std::vector<int64_t>>& allocation) {
  std::map<std::string, uint32_t> cluster_ids, pool_ids;
  for (uint32_t i = 0; i < s.clusters.size(); ++i) cluster_ids[s.clusters[i]] = i;
  for (uint32_t i = 0; i < s.pools.size(); ++i) pool_ids[s.pools[i]] = i;
  std::vector<size_t> row_of;  // pool id -> its row + 1 (0: none)
  for (const auto& p : pools) {
    uint32_t id = Intern(s.pools, pool_ids, p.name);
    Snapshot::PoolRow row;
    row.pool = id;
    row.cluster = Intern(s.clusters, cluster_ids, p.cluster);
    row.queued_jobs = p.queued_jobs;
    row.queue_wait_p95_s = p.queue_wait_p95_s;
    if (s.pool_teams.size() <= id) s.pool_teams.resize(id + 1);
    s.pool_teams[id] = p.team;
    if (row_of.size() <= id) row_of.resize(id + 1);
    row_of[id] = s.pool_rows.size() + 1;
    s.pool_rows.push_back(row);
  }
  for (const auto& g : s.gpus) {
    const auto& n = s.nodes[g.node];
    if (n.pool >= row_of.size() || row_of[n.pool] == 0) continue;
    auto& row = s.pool_rows[row_of[n.pool] - 1];
    bool held = false;
    if (auto it = allocation.find(n.name); it != allocation.end()) {
      size_t index = std::strtoul(g.gpu.c_str(), nullptr, 10);
      held = index < it->second.size() && it->second[index] != 0;
    }
    if (held) {
      ++row.allocated_gpus;
    } else if (g.health == 0 && n.up && !n.cordoned && n.health != 2) {
      ++row.free_gpus;
    }
  }
}

std::string_view TeamOf(const Snapshot& s, std::string_view pool) {
  for (size_t i = 0; i < s.pools.size() && i < s.pool_teams.size(); ++i) {
    if (s.pools[i] == pool) return s.pool_teams[i];
  }
  return {};
}

namespace {

class TelemetryReader : public SeriesReader {
 public:
  explicit TelemetryReader(const TelemetryStore& store) : store_(store) {}
  void Latest(const Snapshot& snap, Field field, int64_t since_ms,
              std::vector<double>& out) override {
    Resolve(snap);
    store_.LatestMany(uuids_, handles_, field, samples_);
    out.assign(samples_.size(), NAN);
    for (size_t i = 0; i < samples_.size(); ++i) {
      if (samples_[i] && samples_[i]->t >= since_ms) out[i] = samples_[i]->v;
    }
  }
  // An earlier time (an offset): each row's samples in (at - kStalenessMs, at].
  void LatestAt(const Snapshot& snap, Field field, int64_t at_ms, const std::vector<char>* rows,
                std::vector<double>& out) override {
    if (at_ms >= snap.now_ms) return SeriesReader::LatestAt(snap, field, at_ms, rows, out);
    Resolve(snap);
    out.assign(snap.gpus.size(), NAN);
    std::vector<tsdb::Sample> window;
    for (size_t i = 0; i < snap.gpus.size(); ++i) {
      store_.Raw(snap.gpus[i].uuid, handles_[i], field, at_ms - kStalenessMs + 1, at_ms + 1,
                 window);
      if (!window.empty()) out[i] = window.back().v;
    }
  }
  void Prepare(const Snapshot& snap) override { Resolve(snap); }
  void Window(const Snapshot& snap, size_t row, Field field, int64_t start_ms, int64_t end_ms,
              std::vector<tsdb::Sample>& out) override {
    store_.Raw(snap.gpus[row].uuid, handles_[row], field, start_ms, end_ms + 1, out);
  }

 private:
  // The GPUs are resolved once per snapshot; each read is then by handle.
  void Resolve(const Snapshot& snap) {
    if (snap.generation != 0 && snap.generation == resolved_for_) return;
    uuids_.clear();
    for (const auto& g : snap.gpus) uuids_.push_back(&g.uuid);
    store_.Handles(uuids_, handles_);
    resolved_for_ = snap.generation;
  }

  const TelemetryStore& store_;
  uint64_t resolved_for_ = 0;  // the snapshot generation handles_ were resolved for
  std::vector<const std::string*> uuids_;
  std::vector<TelemetryStore::GpuHandle> handles_;
  std::vector<std::optional<tsdb::Sample>> samples_;
};

}  // namespace

std::unique_ptr<SeriesReader> MakeTelemetryReader(const TelemetryStore& store) {
  return std::make_unique<TelemetryReader>(store);
}

}  // namespace gpufleet::alerting
