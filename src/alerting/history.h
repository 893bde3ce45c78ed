#pragma once
// A series reader for evaluations at many times over one span: a range query's steps, an
// instant query in the past, an `offset`. Each GPU's samples of a field are loaded once over
// the span (plus the lookback and the longest range before it) and every time is answered from
// them. Loading is bounded: past `max_samples` it loads nothing more and says so.

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "alerting/eval.h"
#include "tsdb/bucket_chunk.h"

namespace gpufleet {
class TelemetryStore;
}

namespace gpufleet::alerting {

class HistoryReader : public SeriesReader {
 public:
  // Loads GPU row `row`'s raw samples of `field` in [start_ms, end_ms], oldest first.
  using Load = std::function<void(const Snapshot& snap, size_t row, Field field, int64_t start_ms,
                                  int64_t end_ms, std::vector<tsdb::Sample>& out)>;
  // Each GPU row's newest sample of `field` (nullopt: none), read for every row at once.
  using Newest = std::function<void(const Snapshot& snap, Field field,
                                    std::vector<std::optional<tsdb::Sample>>& out)>;
  // With `newest`, a time at or after a GPU's newest sample is answered from it without a
  // load (an instant query at now reads no history).
  HistoryReader(Load load, int64_t start_ms, int64_t end_ms, size_t max_samples,
                Newest newest = nullptr);

  // Loads GPU row `row`'s rollup buckets of `field` in [start_ms, end_ms).
  using LoadBuckets =
      std::function<void(const Snapshot& snap, size_t row, Field field, int64_t start_ms,
                         int64_t end_ms, std::vector<tsdb::Bucket>& out)>;
  // Instant selectors read the rollups of `width_ms` (a minute, an hour) instead of raw
  // samples: a GPU's value at a time is the mean of its last whole bucket before it, within
  // the lookback or one bucket, whichever is longer (a range query at a step of a minute or
  // more, over the tiers the store keeps beyond the raw samples' day).
  void UseRollups(int64_t width_ms, LoadBuckets load);

  void Latest(const Snapshot& snap, Field field, int64_t since_ms,
              std::vector<double>& out) override;
  void LatestAt(const Snapshot& snap, Field field, int64_t at_ms, const std::vector<char>* rows,
                std::vector<double>& out) override;
  bool ReadsAllRows() const override { return false; }
  void Window(const Snapshot& snap, size_t row, Field field, int64_t start_ms, int64_t end_ms,
              std::vector<tsdb::Sample>& out) override;

  // True once a load was refused for the bound: the answer would be incomplete.
  bool exceeded() const { return exceeded_; }
  size_t loaded() const { return loaded_; }
  size_t max_samples() const { return max_samples_; }

 private:
  const std::vector<tsdb::Sample>& Samples(const Snapshot& snap, size_t row, Field field);
  // The rollups' means as samples at each bucket's end.
  const std::vector<tsdb::Sample>& Means(const Snapshot& snap, size_t row, Field field);
  bool Charge(size_t n);  // false once the bound is passed

  Load load_;
  Newest newest_;
  std::map<Field, std::vector<std::optional<tsdb::Sample>>> newest_of_;
  int64_t start_ms_, end_ms_;
  size_t max_samples_;
  size_t loaded_ = 0;
  bool exceeded_ = false;
  // By field, then GPU row: raw samples, and rollup means.
  std::map<Field, std::vector<std::optional<std::vector<tsdb::Sample>>>> cache_, means_;
  int64_t rollup_ms_ = 0;
  LoadBuckets load_buckets_;
};

// Over the controller's telemetry store: the span [start_ms, end_ms] the evaluations read
// (their times less the lookback, the longest range and the largest offset). `rollup_ms`
// (60,000 or 3,600,000; 0: raw) as UseRollups.
std::unique_ptr<HistoryReader> MakeHistoryReader(const TelemetryStore& store, int64_t start_ms,
                                                 int64_t end_ms, size_t max_samples,
                                                 int64_t rollup_ms = 0);

// A range query: the expression at each step from start to end (SetTime), each series' points
// in time order. Errors: the evaluation's; kTooLarge past the reader's bound or `max_points`;
// kUnavailable past `deadline`.
struct RangeSeries {
  int space = 0;
  size_t row = 0;
  std::string name;
  std::vector<std::pair<int64_t, double>> points;
};
Result<std::vector<RangeSeries>> EvaluateRange(Evaluator& ev, HistoryReader& reader,
                                               const Expr& expr, int64_t start, int64_t end,
                                               int64_t step, size_t max_points,
                                               std::chrono::steady_clock::time_point deadline);

}  // namespace gpufleet::alerting
