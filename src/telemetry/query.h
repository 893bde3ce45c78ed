#pragma once
// Range queries over the telemetry store: a field's values per GPU, or aggregated across the
// GPUs of a node, pool or cluster, on a grid of steps (GET /api/v1/query_range). Pure logic over
// TelemetryStore's reads; the caller chooses the GPUs (scope, filters) and renders the result.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "telemetry/telemetry.h"

namespace gpufleet {

enum class RangeAgg { kAvg, kMin, kMax, kSum, kP95 };
enum class RangeBy { kGpu, kNode, kPool, kCluster };
std::optional<RangeAgg> ParseRangeAgg(std::string_view text);  // "avg", ..., "p95"
std::optional<RangeBy> ParseRangeBy(std::string_view text);    // "gpu", "node", "pool", "cluster"

struct RangeQuery {
  Field field = Field::kGpuUtil;
  int64_t start = 0;  // ms, inclusive
  int64_t end = 0;    // ms, exclusive
  int64_t step = 60'000;
  RangeAgg agg = RangeAgg::kAvg;
  RangeBy by = RangeBy::kGpu;
};

// A GPU the query reads, with the labels its series carries.
struct RangeGpu {
  std::string node, cluster, pool, uuid;
  int index = 0;
};

struct RangeSeries {
  RangeGpu labels;  // by=gpu: the GPU; else only the group's labels are set
  int gpus = 1;     // how many GPUs the series aggregates
  std::vector<std::pair<int64_t, double>> points;  // (step start, value); empty steps left out
};

struct RangeResult {
  tsdb::Resolution tier = tsdb::Resolution::kRaw;  // the coarsest tier that serves the step
  std::vector<RangeSeries> series;                 // by=gpu in the GPUs' order; groups by their key
};

// Limits, so that one query cannot take the controller's memory.
inline constexpr int64_t kMaxRangeSteps = 11'000;     // per series
inline constexpr size_t kMaxRangePoints = 2'000'000;  // series x steps in one reply

// by=node|pool|cluster: each GPU is first reduced to one value per step (its min for agg=min,
// its max for max, else its mean), then `agg` runs across the group's GPUs: sum is e.g. a
// pool's power, p95 the hot tail of its GPUs. p95 is by nearest rank. kInvalidArgument, with a
// message for the caller, for a bad step or window or too many points.
//
// Several controllers: `elsewhere` holds, by GPU UUID, the per-step values the other
// controllers hold (a by=gpu query of theirs with the same step and, for groups, the per-GPU
// reduction as `agg`); a step with no local sample takes the value from there.
using RangeElsewhere = std::map<std::string, std::vector<std::pair<int64_t, double>>>;
Result<RangeResult> QueryRange(const TelemetryStore& store, const RangeQuery& query,
                               const std::vector<RangeGpu>& gpus,
                               const RangeElsewhere* elsewhere = nullptr);

}  // namespace gpufleet
