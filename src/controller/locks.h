#pragma once
// One controller per data directory and per SQLite store: the locks that refuse a second.

#include <string>
#include <vector>

#include "common/file_lock.h"
#include "common/result.h"

namespace gpufleet {

// Takes `data_dir`/controller.lock and, for a SQLite store (`sqlite:PATH` or a bare PATH),
// PATH.controller-lock; kConflict, with a message that says what to do, when another
// controller holds either. Held until the returned locks go (or the process ends).
Result<std::vector<FileLock>> TakeControllerLocks(const std::string& data_dir,
                                                  const std::string& store_url);

// Writes `data_dir`/controller.addr (through a rename): where the controller listens, for the
// scripts and tests that asked for port 0.
void WriteControllerAddress(const std::string& data_dir, const std::string& shown);

}  // namespace gpufleet
