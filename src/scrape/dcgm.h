#pragma once
// Reads a dcgm-exporter page into what an agent would have reported: the node's facts, its GPUs
// (from the series' labels) and one sample row per GPU in gpufleet's own units.

#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "model/telemetry.h"
#include "model/types.h"
#include "scrape/exposition.h"

namespace gpufleet::scrape {

struct DcgmReading {
  NodeFacts facts;              // hostname, driver and CUDA version from the labels
  std::vector<Gpu> gpus;        // by index
  std::vector<SampleRow> rows;  // one per GPU, time_ms left 0 for the caller
  size_t samples = 0;           // values taken
  size_t skipped = 0;           // DCGM's "blank" values (not supported / not found)
};

// Series without a `gpu` label, MIG instances (GPU_I_ID) and fields gpufleet does not keep are
// passed over. Errors when the page has no GPU series at all, or a GPU's labels contradict.
Result<DcgmReading> ReadDcgm(const std::vector<ExpoSample>& samples);

}  // namespace gpufleet::scrape
