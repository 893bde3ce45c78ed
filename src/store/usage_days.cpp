// The ledger's daily sums: how a record splits into the days it spans.

#include <algorithm>

#include "store/store.h"

namespace gpufleet::store {

UsageDay UsagePiece(const UsageRecord& r, int64_t from_ms, int64_t to_ms) {
  UsageDay d;
  d.day_ms = from_ms / kUsageDayMs * kUsageDayMs;
  d.team = r.team;
  d.project = r.project;
  d.pool = r.pool;
  d.cluster = r.cluster;
  const UsageFigures& f = r.figures;
  d.gpu_model = f.gpu_model;
  const int64_t a = std::max(r.start_ms, from_ms), b = std::min(r.end_ms, to_ms);
  if (b <= a || r.end_ms <= r.start_ms || f.gpus <= 0) return d;
  const double inside = static_cast<double>(b - a);
  d.gpu_ms = static_cast<double>(f.gpus) * inside;
  d.energy_j =
      static_cast<double>(f.energy_j) * inside / static_cast<double>(r.end_ms - r.start_ms);
  if (f.util_milli >= 0) {
    d.measured_gpu_ms = d.gpu_ms;
    d.effective_gpu_ms = d.gpu_ms * static_cast<double>(f.util_milli) / 100'000.0;
    if (f.util_milli < kIdleUtilMilli) d.idle_energy_j = d.energy_j;
  }
  d.max_span_ms = r.end_ms - r.start_ms;
  return d;
}

std::vector<UsageDay> UsageDaysOf(const UsageRecord& r) {
  std::vector<UsageDay> out;
  if (r.end_ms <= r.start_ms || r.figures.gpus <= 0) return out;
  for (int64_t day = r.start_ms / kUsageDayMs * kUsageDayMs; day < r.end_ms; day += kUsageDayMs) {
    out.push_back(UsagePiece(r, day, day + kUsageDayMs));
  }
  return out;
}

void AddTo(UsageDay& sum, const UsageDay& part) {
  sum.gpu_ms += part.gpu_ms;
  sum.measured_gpu_ms += part.measured_gpu_ms;
  sum.effective_gpu_ms += part.effective_gpu_ms;
  sum.energy_j += part.energy_j;
  sum.idle_energy_j += part.idle_energy_j;
  sum.max_span_ms = std::max(sum.max_span_ms, part.max_span_ms);
}

}  // namespace gpufleet::store
