#pragma once
// One record of the usage ledger: an allocation that ended and what its GPUs did in its time,
// with its stored forms. What the ledger's reader (usage.h) writes and the reports
// (reports.h) read; defined in usage.cpp.

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "store/store.h"
#include "tsdb/chunk.h"
#include "workload/jobs.h"

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
std::string EntryDoc(const Entry& e);         // the stored document
store::UsageFigures Figures(const Entry& e);  // the stored columns
Result<Entry> EntryFromRecord(const store::UsageRecord& r);

}  // namespace gpufleet::usage
