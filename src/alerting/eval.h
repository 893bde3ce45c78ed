#pragma once
// Evaluates rule expressions over one snapshot of the fleet: its GPUs and nodes with their
// health (from the health model's reports), recent XIDs, and the time series behind them.
//
// Series are dense: a vector holds one value per row of its space (every GPU, every node, or
// the groups of an aggregation), NaN where it has none, so comparisons and arithmetic are tight
// loops and nothing builds labels until a row makes it into the result. Within one Evaluator,
// equal subexpressions (by their canonical text) are computed once, so 500 rules over the same
// few fields read each field once.

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "alerting/expr.h"
#include "common/result.h"
#include "health/health.h"
#include "model/telemetry.h"
#include "model/xid_catalog.h"
#include "tsdb/chunk.h"

namespace gpufleet {
class TelemetryStore;
}

namespace gpufleet::alerting {
struct MetricDef;

// What one evaluation sees. Built by MakeSnapshot, or by hand in tests and benchmarks.
struct Snapshot {
  uint64_t generation = 0;  // unique per MakeSnapshot; 0: made by hand (nothing is cached)
  int64_t now_ms = 0;       // the evaluation's time
  // When the facts below (health, nodes, pools) were observed: they have no history, so an
  // evaluation more than kStalenessMs away from it sees none of them. 0: at now_ms.
  int64_t facts_ms = 0;
  std::vector<std::string> clusters, pools, models;  // the ids below index these
  struct NodeRow {
    std::string name;
    uint32_t cluster = 0, pool = 0;
    bool up = true;
    int health = 0;  // 0 ready, 1 degraded, 2 unhealthy
    bool cordoned = false;
    int64_t last_seen_ms = 0;
  };
  struct GpuRow {
    uint32_t node = 0;  // index into nodes
    std::string gpu;    // the index, as its label: "0"
    std::string uuid;
    uint32_t model = 0;
    int health = 0;  // 0 healthy, 1 warning, 2 failed
    // dcgm-exporter's pci_bus_id and device labels: filled for the Prometheus API only
    // (alerts' labels stay as they were).
    std::string pci_bus_id, device;
  };
  struct Xid {
    int64_t time_ms = 0;
    int xid = 0;
    std::string severity, action;  // from the XID catalogue
  };
  // A pool's allocation and queue (AddPools).
  struct PoolRow {
    uint32_t pool = 0, cluster = 0;
    double free_gpus = 0;       // available GPUs (as gpu_available) that no job holds
    double allocated_gpus = 0;  // GPUs jobs hold
    double queued_jobs = 0;
    double queue_wait_p95_s = 0;
  };
  std::vector<NodeRow> nodes;
  std::vector<GpuRow> gpus;
  std::vector<PoolRow> pool_rows;
  // The team that owns each pool, by pool id (empty: none): the `team` label of its GPUs',
  // nodes' and own rows, and of the health alerts about them.
  std::vector<std::string> pool_teams;
  std::unordered_map<size_t, std::vector<Xid>> xids;  // by GPU row
  double api_p99_s = NAN;                             // NaN: no requests since the last cycle
  // The figures other components contribute (AlertInputs), by the metric's name: per node by
  // the node's name (a node absent reads 0), and the controller's own.
  std::map<std::string, std::unordered_map<std::string, double>, std::less<>> node_inputs;
  std::map<std::string, double, std::less<>> controller_inputs;
};

// The figures components contribute to the rules, each under the name of a node or controller
// metric of the catalogue (metrics.h: node_rollout_failed, node_cve_max_cvss,
// node_drift_severity, rollouts_halted): registered once at start, read at each evaluation by
// Fill. Not thread-safe while registering; Fill may run from one thread at a time.
class AlertInputs {
 public:
  using NodeFigures = std::function<std::map<std::string, double>()>;
  using Figure = std::function<double()>;
  // kInvalidArgument when the name is not a contributed metric of that kind, or taken.
  Status AddNode(std::string_view name, NodeFigures figures);
  Status AddController(std::string_view name, Figure figure);
  // Each input's figures into the snapshot.
  void Fill(Snapshot& snap) const;

 private:
  std::map<std::string, NodeFigures, std::less<>> nodes_;
  std::map<std::string, Figure, std::less<>> controller_;
};

// From the health model's reports (which carry every node, its state and its GPUs), the recent
// XIDs by GPU UUID, and the API's recent p99.
Snapshot MakeSnapshot(const std::vector<health::NodeHealth>& nodes,
                      const std::map<std::string, std::vector<health::XidSeen>>& xids,
                      const XidCatalog& catalog, int64_t now_ms, double api_p99_s);

// What AddPools is told of each pool.
struct PoolInput {
  std::string name, cluster;
  std::string team;  // the owner: the pool's own, else its cluster's; empty: none
  int queued_jobs = 0;
  double queue_wait_p95_s = 0;
};
// Adds a row per pool, and each pool's team. `allocation` is each node's GPUs by index: the job
// holding it, 0 when free (workload::JobService::Allocation).
void AddPools(Snapshot& snap, const std::vector<PoolInput>& pools,
              const std::map<std::string, std::vector<int64_t>>& allocation);
// The team of a pool of the snapshot, by name; empty when none.
std::string_view TeamOf(const Snapshot& snap, std::string_view pool);

// The time series an evaluation reads.
class SeriesReader {
 public:
  virtual ~SeriesReader() = default;
  // The field's latest value per GPU row of `snap` (out[i] for snap.gpus[i]), NaN where the
  // newest sample is older than `since_ms` or there is none.
  virtual void Latest(const Snapshot& snap, Field field, int64_t since_ms,
                      std::vector<double>& out) = 0;
  // The value each GPU row had at `at_ms`: its newest sample in (at_ms - kStalenessMs, at_ms].
  // The default serves an evaluation at the snapshot's time from Latest; readers that serve
  // other times (an offset, a range query's steps) override it.
  // `rows` (may be null: all) are the rows wanted; a reader may leave the others NaN when
  // ReadsAllRows() is false.
  virtual void LatestAt(const Snapshot& snap, Field field, int64_t at_ms,
                        const std::vector<char>* rows, std::vector<double>& out);
  // True when LatestAt reads every row whatever `rows` says (so one read serves every
  // selector of the field).
  virtual bool ReadsAllRows() const { return true; }
  // Called before the Window calls for `snap`.
  virtual void Prepare(const Snapshot& snap) {}
  // The raw samples of GPU row `row` of `snap` in [start_ms, end_ms], oldest first.
  virtual void Window(const Snapshot& snap, size_t row, Field field, int64_t start_ms,
                      int64_t end_ms, std::vector<tsdb::Sample>& out) = 0;
};

// The reader over the controller's telemetry store.
std::unique_ptr<SeriesReader> MakeTelemetryReader(const TelemetryStore& store);

// A sample is stale (absent) when older than this, as Prometheus's lookback.
inline constexpr int64_t kStalenessMs = 5 * 60'000;

struct OutputSample {
  Labels labels;
  double value = 0;
};

struct EvalOptions {
  // Prometheus's output: a selector's (and a filter's) series keep their metric's name as
  // __name__, and GPU rows carry pci_bus_id and device.
  bool prometheus = false;
};

class Evaluator {
 public:
  Evaluator(const Snapshot& snap, SeriesReader& reader, EvalOptions options = {});
  ~Evaluator();
  // The series the expression gives at the snapshot's time (or SetTime's), with their labels.
  Result<std::vector<OutputSample>> Run(const Expr& expr);
  // Evaluates at another time from now on (a range query's steps): what was computed for the
  // last time is dropped; the matched rows and groupings, which do not change, are kept.
  void SetTime(int64_t at_ms);
  // Run's result before labels are made: a value per row of `space` (NaN: no series), rows
  // that stay the same across SetTime, so a range query makes each series' labels once.
  struct Dense {
    int space = 0;
    std::string name;  // __name__ when kept (EvalOptions::prometheus)
    std::vector<double> values;
  };
  Result<Dense> RunDense(const Expr& expr);
  Labels OutputLabels(int space, size_t row, const std::string& name) const;

  // The dense vectors and groupings (eval_parts.h), named here for the evaluator's helpers.
  struct Vec;
  struct Space;

 private:
  Result<std::shared_ptr<const Vec>> Eval(const Expr& e);
  Result<std::shared_ptr<const Vec>> Compute(const Expr& e);
  Result<std::shared_ptr<const Vec>> Select(const Expr& e);
  double RowValue(const MetricDef& metric, size_t r, const std::vector<double>* latest,
                  const std::unordered_map<std::string, double>* node_input) const;
  Result<std::shared_ptr<const Vec>> RangeCall(const Expr& call);
  Result<std::shared_ptr<const Vec>> Aggregate(const Expr& e);
  Result<std::shared_ptr<const Vec>> Binary(const Expr& e);
  Result<std::shared_ptr<const Vec>> Instant(const Expr& e);
  Result<std::shared_ptr<const Vec>> LabelReplace(const Expr& e);
  int Grouping(const Expr& e, int source_space);
  bool FactsVisible(int64_t at_ms) const;
  const std::vector<char>& Mask(const Expr& selector, int space);
  const std::vector<double>& LatestOf(Field field, int64_t at_ms, const Expr& selector,
                                      const std::vector<char>& mask);
  std::string_view Label(int space, size_t row, std::string_view name) const;
  Labels LabelsOf(int space, size_t row) const;
  std::string_view TeamOfPool(uint32_t pool) const;
  size_t Rows(int space) const;

  const Snapshot& snap_;
  SeriesReader& reader_;
  EvalOptions options_;
  int64_t now_ = 0;
  std::unordered_map<std::string, std::shared_ptr<const Vec>> cache_;
  std::unordered_map<std::string, std::vector<char>> masks_;
  // By field, time and (for readers that read only the rows asked) the selector.
  std::map<std::tuple<Field, int64_t, std::string>, std::vector<double>> latest_;
  std::vector<std::unique_ptr<Space>> spaces_;                       // groupings, index = space id
  std::unordered_map<std::string, int> space_ids_;                   // by source space and labels
  std::unordered_map<std::string, std::vector<uint32_t>> group_of_;  // row -> group, same key
};

}  // namespace gpufleet::alerting
