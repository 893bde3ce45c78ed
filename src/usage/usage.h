#pragma once
// The usage ledger: a durable record of every allocation (a job's GPUs from a start to its end,
// requeue or move) with who it was for (team, project), where (cluster, pool, GPU model, nodes
// and GPUs), when, how long it waited, and what the GPUs did in that time: mean and p95 GPU
// utilization, mean and peak memory used, energy. The job service hands over each allocation
// as it ends (workload::JobService::TakeEnded); the service reads the GPUs' telemetry over the
// allocation's time and stores the record, kept for the retention time (13 months unless
// told). Reports (utilization, cost, energy) read it.

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "fleet/fleet.h"
#include "store/store.h"
#include "tsdb/chunk.h"
#include "workload/jobs.h"

namespace gpufleet {
class TelemetryStore;
}

namespace gpufleet::usage {

// What the GPUs of an allocation did over its time; NaN (0 for energy) where no sample came.
struct Effective {
  double util_mean = NAN, util_p95 = NAN;             // % of the GPUs' time busy
  double mem_mean_bytes = NAN, mem_peak_bytes = NAN;  // memory used, per GPU
  double energy_j = 0;                                // all its GPUs together
  int64_t samples = 0;                                // utilization samples read
};

// The samples of each of an allocation's GPUs over [start_ms, end_ms): utilization (%), memory
// used (MiB) and power (mW). Utilization and memory are averaged over all the GPUs' samples,
// p95 is the nearest rank of them; energy is each GPU's power held until its next sample (the
// last one until the end, at most 60 s), within the window.
Effective Summarize(const std::vector<std::vector<tsdb::Sample>>& util,
                    const std::vector<std::vector<tsdb::Sample>>& mem_mib,
                    const std::vector<std::vector<tsdb::Sample>>& power_mw, int64_t start_ms,
                    int64_t end_ms);

struct Entry {
  int64_t id = 0;
  workload::EndedAllocation allocation;
  Effective effective;
  double gpu_hours() const {
    return allocation.gpus * static_cast<double>(allocation.end_ms - allocation.start_ms) / 3.6e6;
  }
};
std::string EntryDoc(const Entry& e);  // the stored document
Result<Entry> EntryFromRecord(const store::UsageRecord& r);

class UsageService {
 public:
  static constexpr int64_t kDefaultRetentionMs = 400 * 86'400'000LL;  // 13 months and more
  UsageService(workload::JobService& jobs, FleetService& fleet, const TelemetryStore& telemetry,
               store::UsageStore& store, std::shared_ptr<Clock> clock,
               int64_t retention_ms = kDefaultRetentionMs);
  // Records the allocations that ended since the last call (with their effective use); once
  // an hour drops those that ended before the retention time. Allocations whose write failed
  // are kept for the next call.
  Status Tick();
  Result<std::vector<Entry>> List(const store::UsageQuery& query, int64_t* total);
  int64_t retention_ms() const { return retention_ms_; }

 private:
  Effective Measure(const workload::EndedAllocation& a, int64_t now) const;
  workload::JobService& jobs_;
  FleetService& fleet_;
  const TelemetryStore& telemetry_;
  store::UsageStore& store_;
  std::shared_ptr<Clock> clock_;
  int64_t retention_ms_;
  int64_t next_prune_ms_ = 0;
  std::vector<store::UsageRecord> unsaved_;  // the monitor thread's
};

}  // namespace gpufleet::usage
