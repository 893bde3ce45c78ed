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
#include "usage/advice.h"
#include "usage/ledger.h"
#include "usage/reports.h"
#include "workload/jobs.h"

namespace gpufleet {
class TelemetryStore;
}

namespace gpufleet::usage {

class UsageService {
 public:
  static constexpr int64_t kDefaultRetentionMs = 400 * 86'400'000LL;  // 13 months and more
  UsageService(workload::JobService& jobs, FleetService& fleet, const TelemetryStore& telemetry,
               store::UsageStore& store, std::shared_ptr<Clock> clock,
               int64_t retention_ms = kDefaultRetentionMs);
  // Records the allocations that ended since the last call (with their effective use); once a
  // minute adds to each pool's hour (Capacity); once an hour drops the records and hours older
  // than the retention time. What could not be written is kept for the next call.
  Status Tick();
  Result<std::vector<Entry>> List(const store::UsageQuery& query, int64_t* total);
  int64_t retention_ms() const { return retention_ms_; }

  // Adds the time since the last call to each pool's hour (store::PoolHour): its GPUs (those
  // of its registered nodes), those a job holds, those its queued jobs ask for, and energy: each
  // GPU's latest power (when under two minutes old) over the time, split into the GPUs no job
  // holds and those held that compute nothing (latest utilization under 5%). The first call
  // only starts the clock; a gap over five minutes (or two intervals) counts as that.
  Status Capacity(int64_t now);
  // How often Tick calls Capacity (default a minute).
  void set_capacity_interval(int64_t ms) { capacity_interval_ms_ = ms; }

  // A report over the ledger and the pools' hours in [from, to); `cluster` non-empty: that
  // cluster's only.
  Result<Report> Run(const ReportRequest& request, ReportContext context,
                     const std::string& cluster = "");

  // Optimization advice (usage/advice.h) over the ledger, the pools' hours and the jobs running
  // now, each measured over its allocation so far.
  Result<std::vector<Recommendation>> Advise(const AdviceRequest& request, ReportContext context,
                                             std::map<std::string, PoolFacts> pools);

  // The prices the reports use (the settings store's "report_rates"; the catalogue's when none
  // were set), and setting them. Without a settings store: the defaults, not settable.
  void set_settings(store::SettingStore* settings) { settings_ = settings; }
  Result<Rates> GetRates(const GpuCatalog& catalog) const;
  Status SetRates(const Rates& rates);

 private:
  Effective Measure(const workload::EndedAllocation& a, int64_t now) const;
  workload::JobService& jobs_;
  FleetService& fleet_;
  const TelemetryStore& telemetry_;
  store::UsageStore& store_;
  std::shared_ptr<Clock> clock_;
  int64_t retention_ms_;
  int64_t next_prune_ms_ = 0;
  std::vector<store::UsageRecord> unsaved_;     // the monitor thread's
  std::vector<store::PoolHour> unsaved_hours_;  // likewise
  int64_t last_capacity_ms_ = 0;
  int64_t next_capacity_ms_ = 0;
  int64_t capacity_interval_ms_ = 60'000;
  store::SettingStore* settings_ = nullptr;
};

}  // namespace gpufleet::usage
