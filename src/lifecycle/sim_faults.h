#pragma once
// The simulator's faulty versions (POST /api/v1/sim/faulty-versions): a simulated node told to
// install one turns faulty once it runs it, so that the demo and the tests can watch a rollout's
// gates halt it and roll it back. Real agents ignore the flag. Thread-safe.

#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lifecycle/rollout.h"

namespace gpufleet::lifecycle {

class FaultyVersions {
 public:
  void Mark(RolloutKind kind, const std::string& version, bool faulty);
  std::vector<std::pair<RolloutKind, std::string>> List() const;
  bool Has(RolloutKind kind, const std::string& version) const;

 private:
  mutable std::mutex mu_;
  std::set<std::pair<RolloutKind, std::string>> versions_;  // guarded by mu_
};

}  // namespace gpufleet::lifecycle
