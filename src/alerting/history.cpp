#include "alerting/history.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "telemetry/telemetry.h"

namespace gpufleet::alerting {
namespace {

// A span longer than this is not cached raw for windows: each window is read when asked (a
// day of 1 Hz samples for every GPU would not fit the bound).
constexpr int64_t kMaxCachedWindowSpanMs = 6 * 3'600'000;

// The newest sample at or before `at_ms` and after `at_ms - lookback_ms`, if any.
const tsdb::Sample* At(const std::vector<tsdb::Sample>& s, int64_t at_ms, int64_t lookback_ms) {
  auto it = std::upper_bound(s.begin(), s.end(), at_ms,
                             [](int64_t t, const tsdb::Sample& x) { return t < x.t; });
  if (it == s.begin()) return nullptr;
  --it;
  return it->t > at_ms - lookback_ms ? &*it : nullptr;
}

}  // namespace

HistoryReader::HistoryReader(Load load, int64_t start_ms, int64_t end_ms, size_t max_samples,
                             Newest newest)
    : load_(std::move(load)),
      newest_(std::move(newest)),
      start_ms_(start_ms),
      end_ms_(end_ms),
      max_samples_(max_samples) {}

void HistoryReader::UseRollups(int64_t width_ms, LoadBuckets load) {
  rollup_ms_ = width_ms;
  load_buckets_ = std::move(load);
}

bool HistoryReader::Charge(size_t n) {
  loaded_ += n;
  if (loaded_ > max_samples_) exceeded_ = true;
  return !exceeded_;
}

const std::vector<tsdb::Sample>& HistoryReader::Samples(const Snapshot& snap, size_t row,
                                                        Field field) {
  auto& rows = cache_[field];
  if (rows.size() != snap.gpus.size()) rows.assign(snap.gpus.size(), std::nullopt);
  auto& slot = rows[row];
  if (!slot) {
    slot.emplace();
    if (!exceeded_) {
      load_(snap, row, field, start_ms_, end_ms_, *slot);
      if (!Charge(slot->size())) slot->clear();
    }
  }
  return *slot;
}

const std::vector<tsdb::Sample>& HistoryReader::Means(const Snapshot& snap, size_t row,
                                                      Field field) {
  auto& rows = means_[field];
  if (rows.size() != snap.gpus.size()) rows.assign(snap.gpus.size(), std::nullopt);
  auto& slot = rows[row];
  if (!slot) {
    slot.emplace();
    if (!exceeded_) {
      std::vector<tsdb::Bucket> buckets;
      load_buckets_(snap, row, field, start_ms_ - rollup_ms_, end_ms_ + 1, buckets);
      for (const auto& b : buckets) {
        if (b.count > 0) slot->push_back({b.start + rollup_ms_, b.sum / b.count});
      }
      if (!Charge(slot->size())) slot->clear();
    }
  }
  return *slot;
}

void HistoryReader::Latest(const Snapshot& snap, Field field, int64_t since_ms,
                           std::vector<double>& out) {
  LatestAt(snap, field, since_ms + kStalenessMs, nullptr, out);
}

void HistoryReader::LatestAt(const Snapshot& snap, Field field, int64_t at_ms,
                             const std::vector<char>* rows, std::vector<double>& out) {
  out.assign(snap.gpus.size(), NAN);
  if (rollup_ms_ > 0) {
    const int64_t lookback = std::max(kStalenessMs, rollup_ms_);
    for (size_t r = 0; r < snap.gpus.size(); ++r) {
      if (rows && (r >= rows->size() || !(*rows)[r])) continue;
      if (const auto* s = At(Means(snap, r, field), at_ms, lookback)) out[r] = s->v;
    }
    return;
  }
  const std::vector<std::optional<tsdb::Sample>>* newest = nullptr;
  if (newest_) {
    auto [it, fresh] = newest_of_.try_emplace(field);
    if (fresh) newest_(snap, field, it->second);
    newest = &it->second;
  }
  for (size_t r = 0; r < snap.gpus.size(); ++r) {
    if (rows && (r >= rows->size() || !(*rows)[r])) continue;
    if (newest && r < newest->size()) {
      // None: nothing since start-up, so the history may still hold some.
      const auto& n = (*newest)[r];
      if (n && n->t <= at_ms - kStalenessMs) continue;  // nothing within the lookback
      if (n && n->t <= at_ms) {
        out[r] = n->v;
        continue;
      }
    }
    if (const auto* s = At(Samples(snap, r, field), at_ms, kStalenessMs)) out[r] = s->v;
  }
}

void HistoryReader::Window(const Snapshot& snap, size_t row, Field field, int64_t start_ms,
                           int64_t end_ms, std::vector<tsdb::Sample>& out) {
  out.clear();
  auto cached = cache_.find(field);
  bool have = cached != cache_.end() && row < cached->second.size() && cached->second[row];
  if (!have && end_ms_ - start_ms_ > kMaxCachedWindowSpanMs) {
    if (!exceeded_) load_(snap, row, field, start_ms, end_ms, out);  // this window only
    return;
  }
  const auto& s = Samples(snap, row, field);
  auto lo = std::lower_bound(s.begin(), s.end(), start_ms,
                             [](const tsdb::Sample& x, int64_t t) { return x.t < t; });
  auto hi = std::upper_bound(lo, s.end(), end_ms,
                             [](int64_t t, const tsdb::Sample& x) { return t < x.t; });
  out.assign(lo, hi);
}

std::unique_ptr<HistoryReader> MakeHistoryReader(const TelemetryStore& store, int64_t start_ms,
                                                 int64_t end_ms, size_t max_samples,
                                                 int64_t rollup_ms) {
  // The GPUs' handles, resolved once per snapshot.
  struct Handles {
    uint64_t generation = ~uint64_t{0};
    const Snapshot* snap = nullptr;
    std::vector<const std::string*> uuids;
    std::vector<TelemetryStore::GpuHandle> handles;
  };
  auto handles = std::make_shared<Handles>();
  auto resolve = [&store, handles](const Snapshot& snap) {
    if (handles->snap != &snap || handles->generation != snap.generation) {
      handles->uuids.clear();
      for (const auto& g : snap.gpus) handles->uuids.push_back(&g.uuid);
      store.Handles(handles->uuids, handles->handles);
      handles->snap = &snap;
      handles->generation = snap.generation;
    }
  };
  auto load = [&store, handles, resolve](const Snapshot& snap, size_t row, Field field,
                                         int64_t start, int64_t end,
                                         std::vector<tsdb::Sample>& out) {
    resolve(snap);
    store.Raw(snap.gpus[row].uuid, handles->handles[row], field, start, end + 1, out);
  };
  auto newest = [&store, handles, resolve](const Snapshot& snap, Field field,
                                           std::vector<std::optional<tsdb::Sample>>& out) {
    resolve(snap);
    store.LatestMany(handles->uuids, handles->handles, field, out);
  };
  auto reader = std::make_unique<HistoryReader>(load, start_ms, end_ms, max_samples, newest);
  if (rollup_ms > 0) {
    tsdb::Resolution tier =
        rollup_ms >= 3'600'000 ? tsdb::Resolution::kHour : tsdb::Resolution::kMinute;
    reader->UseRollups(rollup_ms, [&store, handles, resolve, tier](
                                      const Snapshot& snap, size_t row, Field field, int64_t start,
                                      int64_t end, std::vector<tsdb::Bucket>& out) {
      resolve(snap);
      out = store.Range(snap.gpus[row].uuid, handles->handles[row], field, tier, start, end);
    });
  }
  return reader;
}

Result<std::vector<RangeSeries>> EvaluateRange(Evaluator& ev, HistoryReader& reader,
                                               const Expr& expr, int64_t start, int64_t end,
                                               int64_t step, size_t max_points,
                                               std::chrono::steady_clock::time_point deadline) {
  std::vector<RangeSeries> series;
  std::map<std::tuple<int, size_t, std::string>, size_t> index;
  size_t points = 0;
  for (int64_t t = start; t <= end; t += step) {
    ev.SetTime(t);
    auto d = ev.RunDense(expr);
    if (!d.ok()) return d.error();
    if (reader.exceeded()) {
      return MakeError(ErrorCode::kTooLarge,
                       "query processing would load too many samples into memory (more than " +
                           std::to_string(reader.max_samples()) +
                           "): narrow the selector, the time range, or the range of a function");
    }
    for (size_t r = 0; r < d->values.size(); ++r) {
      double v = d->values[r];
      if (std::isnan(v)) continue;
      auto [it, fresh] = index.try_emplace({d->space, r, d->name}, series.size());
      if (fresh) series.push_back({d->space, r, d->name, {}});
      series[it->second].points.emplace_back(t, v);
      if (++points > max_points) {
        return MakeError(ErrorCode::kTooLarge,
                         "the answer would hold more than " + std::to_string(max_points) +
                             " points: narrow the selector or the range, or raise the step");
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return MakeError(ErrorCode::kUnavailable, "query timed out in expression evaluation");
    }
  }
  return series;
}

}  // namespace gpufleet::alerting
