// Helpers shared by jobs.cpp (a job's life: submit, end, requeue, store) and placement.cpp
// (placing queued jobs, the autoscaler's demand, idle nodes, consolidation). Not part of the
// component's interface.
#pragma once

#include <cstdint>
#include <string>

#include "workload/jobs.h"

namespace gpufleet::workload::internal {

// A queued job's reason.
inline std::string Waiting(int gpus) {
  return "waiting for " + std::to_string(gpus) + (gpus == 1 ? " free GPU" : " free GPUs");
}

// The GPU-hours of a running job's current run, up to `now`.
inline double RunHours(const Job& j, int64_t now) {
  return j.spec.gpus * static_cast<double>(now - j.start_ms) / 3'600'000.0;
}

}  // namespace gpufleet::workload::internal
