// The usage ledger's part of the store (store.h includes it): its records, the daily sums the
// reports read, and UsageStore.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "model/types.h"

namespace gpufleet::store {

// The usage ledger (src/usage): one record per allocation that ended (a job's GPUs from a
// start to its end, requeue or move), its fields for filtering and the whole record as a JSON
// document. Kept for months (the ledger's retention), so reads are by time.
// The figures reports add up, in columns of their own beside the document (migration 18). A
// record stored before them has gpus 0 here and its figures only in its document.
struct UsageFigures {
  std::string gpu_model;
  int64_t gpus = 0;
  int64_t wait_ms = 0;
  int64_t util_milli = -1;      // mean GPU utilization, % x 1000; -1: no sample
  int64_t util_p95_milli = -1;  // likewise its 95th percentile
  int64_t mem_peak_mib = -1;    // the most memory one of its GPUs used; -1: no sample
  int64_t energy_j = 0;         // all its GPUs together
  std::string placement;        // "node-a:0,1;node-b:0,1"
  std::string outcome;
  // Whose job it was (migration 21): "slurm" and the Slurm job id; empty for gpufleet's own.
  // Read with kOutcome.
  std::string source, external_id;
};
struct UsageRecord {
  int64_t id = 0;  // given by the store
  int64_t job = 0;
  std::string team, project, pool, cluster;
  int64_t start_ms = 0, end_ms = 0;
  std::string doc;  // ScanUsage: only for records from before migration 18
  UsageFigures figures{};
};
// A pool's hour (migration 18): what its GPUs were and did, added to minute by minute. The
// idle share of energy and the idle cost (installed less allocated) come from here.
struct PoolHour {
  std::string pool, cluster, gpu_model;
  int64_t hour_ms = 0;        // the hour's start (UTC)
  int64_t covered_ms = 0;     // how much of the hour was recorded (the controller ran)
  int64_t gpu_ms = 0;         // GPUs installed (registered nodes') x time
  int64_t alloc_gpu_ms = 0;   // GPUs a job held x time
  int64_t queued_gpu_ms = 0;  // GPUs queued jobs asked for x time (demand not met)
  int64_t energy_j = 0;       // all of its GPUs
  int64_t free_energy_j = 0;  // GPUs no job held
  int64_t idle_energy_j = 0;  // GPUs a job held that computed nothing (utilization under 5%)
};
// The part of one or more allocations inside a period, as the ledger's daily sums keep it
// (migration 20: a row per UTC day, team, project, pool, cluster and model, added to as each
// record is appended). The reports that add the ledger up read these instead of a million
// records, and only the records at a period's ragged ends.
struct UsageDay {
  int64_t day_ms = 0;  // the day's start (UTC)
  std::string team, project, pool, cluster, gpu_model;
  double gpu_ms = 0;            // GPUs held x time
  double measured_gpu_ms = 0;   // the part of gpu_ms with utilization samples
  double effective_gpu_ms = 0;  // measured GPU time x utilization: the GPU time put to use
  double energy_j = 0;          // the records' energy, in proportion to their time inside
  double idle_energy_j = 0;     // the part of energy_j of records under 5% utilization
  int64_t max_span_ms = 0;      // the longest record in it, start to end (bounds edge scans)
};
constexpr int64_t kUsageDayMs = 86'400'000;
constexpr int64_t kIdleUtilMilli = 5'000;  // an allocation under 5% utilization did nothing
// The part of `record` (its figure columns) inside [from_ms, to_ms); zero where none is.
UsageDay UsagePiece(const UsageRecord& record, int64_t from_ms, int64_t to_ms);
// Its parts in each UTC day it spans, oldest first.
std::vector<UsageDay> UsageDaysOf(const UsageRecord& record);
// Adds `part`'s figures to `sum` (the same day and key).
void AddTo(UsageDay& sum, const UsageDay& part);

struct UsageQuery {
  int64_t from_ms = 0;                       // allocations that ended at or after this
  int64_t to_ms = INT64_MAX;                 // and started before this
  int64_t end_before_ms = INT64_MAX;         // and ended before this
  std::string team, project, pool, cluster;  // empty: any
  int64_t limit = 1000, offset = 0;          // newest end first
  // ScanUsage: which records (those with figure columns, those from before migration 18 that
  // have them only in their document, or both), and which of their columns beyond the job,
  // times and GPU count (those left out are empty or 0): a narrow scan is a faster one.
  enum class Rows { kAll, kWithFigures, kDocumentOnly } rows = Rows::kAll;
  enum Column : uint32_t {
    kTeam = 1,
    kProject = 2,
    kPool = 4,
    kCluster = 8,
    kModel = 16,
    kWait = 32,
    kUtil = 64,     // util_milli and util_p95_milli
    kMemory = 128,  // mem_peak_mib
    kEnergy = 256,
    kPlacement = 512,
    kOutcome = 1024,
    kAllColumns = 2047,
  };
  uint32_t columns = kAllColumns;
  // ScanUsage by pages (an export): `page` > 0 reads at most that many, those with an id over
  // `after_id`, by id; the next page starts after the last one's id.
  int64_t after_id = 0;
  int64_t page = 0;
};
class UsageStore {
 public:
  virtual ~UsageStore() = default;
  virtual Status AppendUsage(const std::vector<UsageRecord>& records) = 0;  // one transaction
  // The records the query matches, newest end first, a page of them; `total` the count of all.
  virtual Result<std::vector<UsageRecord>> ListUsage(const UsageQuery& query, int64_t* total) = 0;
  // Records that ended before `before_ms`; how many went.
  virtual Result<int64_t> DeleteUsageBefore(int64_t before_ms) = 0;
  // Every record the query matches (limit and offset unused), in no set order (by id with a
  // `page`), handed to `fn` one at a time while they are read a batch at a time: memory stays
  // a batch's however many there are. The documents are left out but for records from before
  // migration 18.
  virtual Status ScanUsage(const UsageQuery& query,
                           const std::function<void(const UsageRecord&)>& fn) = 0;
  // Adds each delta's figures to its pool's hour (a new hour starts at zero), in one
  // transaction.
  virtual Status AddPoolHours(const std::vector<PoolHour>& deltas) = 0;
  // The pools' hours in [from_ms, to_ms), by hour then pool.
  virtual Result<std::vector<PoolHour>> ListPoolHours(int64_t from_ms, int64_t to_ms) = 0;
  virtual Result<int64_t> DeletePoolHoursBefore(int64_t before_ms) = 0;
  // The ledger's daily sums (AppendUsage keeps them; records from before migration 18 are not
  // in them) of the days in [from_ms, to_ms), of `cluster` (empty: all), oldest first.
  virtual Result<std::vector<UsageDay>> ListUsageDays(int64_t from_ms, int64_t to_ms,
                                                      const std::string& cluster) = 0;
  // The longest record in those days (0: none): a record that overlaps them ended before
  // their end plus this.
  virtual Result<int64_t> MaxUsageSpan(int64_t from_ms, int64_t to_ms) = 0;
};

}  // namespace gpufleet::store
