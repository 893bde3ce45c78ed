#include "telemetry/query.h"

#include <algorithm>
#include <map>

namespace gpufleet {

namespace {

// The 95th percentile by nearest rank (the value at rank ceil(0.95 n)); sorts `values`.
double P95(std::vector<double>& values) {
  size_t rank = (values.size() * 95 + 99) / 100;
  std::nth_element(values.begin(), values.begin() + (rank - 1), values.end());
  return values[rank - 1];
}

// One step's aggregate: of a GPU's samples (by=gpu) or of the GPUs' step values (by=group).
struct StepAcc {
  double min = 0, max = 0, sum = 0, count = 0;
  std::vector<double> values;  // kept for p95 only
  void Add(double mn, double mx, double s, double c, double v, bool keep) {
    min = count ? std::min(min, mn) : mn;
    max = count ? std::max(max, mx) : mx;
    sum += s;
    count += c;
    if (keep) values.push_back(v);
  }
  double Value(RangeAgg agg) {
    switch (agg) {
      case RangeAgg::kMin:
        return min;
      case RangeAgg::kMax:
        return max;
      case RangeAgg::kSum:
        return sum;
      case RangeAgg::kP95:
        return P95(values);
      case RangeAgg::kAvg:
        break;
    }
    return sum / count;
  }
};

// Tier buckets on a grid of steps over [start, start + n*step).
std::vector<StepAcc> Grid(const std::vector<tsdb::Bucket>& buckets, int64_t start, int64_t step,
                          size_t n, bool p95) {
  std::vector<StepAcc> grid(n);
  for (const auto& b : buckets) {
    if (b.start < start || b.count <= 0) continue;
    size_t i = static_cast<size_t>((b.start - start) / step);
    if (i >= n) continue;
    grid[i].Add(b.min, b.max, b.sum, b.count, b.sum / b.count, p95);
  }
  return grid;
}

std::vector<std::pair<int64_t, double>> Points(std::vector<StepAcc>& grid, int64_t start,
                                               int64_t step, RangeAgg agg) {
  std::vector<std::pair<int64_t, double>> points;
  for (size_t i = 0; i < grid.size(); ++i) {
    if (grid[i].count <= 0) continue;
    points.emplace_back(start + static_cast<int64_t>(i) * step, grid[i].Value(agg));
  }
  return points;
}

}  // namespace

std::optional<RangeAgg> ParseRangeAgg(std::string_view text) {
  if (text == "avg") return RangeAgg::kAvg;
  if (text == "min") return RangeAgg::kMin;
  if (text == "max") return RangeAgg::kMax;
  if (text == "sum") return RangeAgg::kSum;
  if (text == "p95") return RangeAgg::kP95;
  return std::nullopt;
}

std::optional<RangeBy> ParseRangeBy(std::string_view text) {
  if (text == "gpu") return RangeBy::kGpu;
  if (text == "node") return RangeBy::kNode;
  if (text == "pool") return RangeBy::kPool;
  if (text == "cluster") return RangeBy::kCluster;
  return std::nullopt;
}

Result<RangeResult> QueryRange(const TelemetryStore& store, const RangeQuery& q,
                               const std::vector<RangeGpu>& gpus, const RangeElsewhere* elsewhere) {
  if (q.step <= 0) {
    return MakeError(ErrorCode::kInvalidArgument, "'step' must be a duration such as 1s, 1m, 1h");
  }
  if (q.start >= q.end) {
    return MakeError(ErrorCode::kInvalidArgument, "'start' must be before 'end'");
  }
  if ((q.end - q.start) / q.step > kMaxRangeSteps) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "too many points: at most 11000 steps per series; use a larger step");
  }
  RangeResult out;
  out.tier = q.step >= 3'600'000 ? tsdb::Resolution::kHour
             : q.step >= 60'000  ? tsdb::Resolution::kMinute
                                 : tsdb::Resolution::kRaw;
  const size_t steps = static_cast<size_t>((q.end - q.start + q.step - 1) / q.step);
  struct Group {
    RangeGpu labels;
    std::vector<StepAcc> grid;
    int gpus = 0;
  };
  std::map<std::string, Group> groups;
  const bool p95 = q.agg == RangeAgg::kP95;
  // The group's GPUs are first reduced with their min, max or mean.
  const RangeAgg per_gpu =
      q.agg == RangeAgg::kMin || q.agg == RangeAgg::kMax ? q.agg : RangeAgg::kAvg;
  for (const RangeGpu& g : gpus) {
    if ((std::max(out.series.size(), groups.size()) + 1) * steps > kMaxRangePoints) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "too many points: at most " + std::to_string(kMaxRangePoints) +
                           " series x steps (" + std::to_string(steps) +
                           " steps each); narrow the selection, group it with 'by', or use a "
                           "larger step");
    }
    auto buckets = store.Range(g.uuid, q.field, out.tier, q.start, q.end);
    // The steps another controller has a value for, by index.
    std::map<size_t, double> far;
    auto held = elsewhere ? elsewhere->find(g.uuid) : RangeElsewhere::const_iterator();
    if (elsewhere && held != elsewhere->end()) {
      for (const auto& [t, v] : held->second) {
        if (t < q.start || t >= q.end || (t - q.start) % q.step != 0) continue;
        far[static_cast<size_t>((t - q.start) / q.step)] = v;
      }
    }
    if (q.by == RangeBy::kGpu) {
      auto grid = Grid(buckets, q.start, q.step, steps, p95);
      auto points = Points(grid, q.start, q.step, q.agg);
      if (!far.empty()) {
        std::map<int64_t, double> merged;
        for (const auto& [i, v] : far) merged[q.start + static_cast<int64_t>(i) * q.step] = v;
        for (const auto& [t, v] : points) merged[t] = v;  // what this controller holds first
        points.assign(merged.begin(), merged.end());
      }
      out.series.push_back({g, 1, std::move(points)});
      continue;
    }
    const std::string& key = q.by == RangeBy::kNode   ? g.node
                             : q.by == RangeBy::kPool ? g.pool
                                                      : g.cluster;
    Group& group = groups[key];
    if (group.grid.empty()) {
      group.grid.resize(steps);
      group.labels.cluster = g.cluster;
      if (q.by != RangeBy::kCluster) group.labels.pool = g.pool;
      if (q.by == RangeBy::kNode) group.labels.node = g.node;
    }
    ++group.gpus;
    auto grid = Grid(buckets, q.start, q.step, steps, false);
    for (size_t i = 0; i < steps; ++i) {
      double v;
      if (grid[i].count > 0) {
        v = grid[i].Value(per_gpu);
      } else if (auto f = far.find(i); f != far.end()) {
        v = f->second;
      } else {
        continue;
      }
      group.grid[i].Add(v, v, v, 1, v, p95);
    }
  }
  for (auto& [_, group] : groups) {
    out.series.push_back(
        {std::move(group.labels), group.gpus, Points(group.grid, q.start, q.step, q.agg)});
  }
  return out;
}

}  // namespace gpufleet
