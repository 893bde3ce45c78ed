#include "lifecycle/sim_faults.h"

namespace gpufleet::lifecycle {

void FaultyVersions::Mark(RolloutKind kind, const std::string& version, bool faulty) {
  std::lock_guard lock(mu_);
  if (faulty) {
    versions_.insert({kind, version});
  } else {
    versions_.erase({kind, version});
  }
}

std::vector<std::pair<RolloutKind, std::string>> FaultyVersions::List() const {
  std::lock_guard lock(mu_);
  return {versions_.begin(), versions_.end()};
}

bool FaultyVersions::Has(RolloutKind kind, const std::string& version) const {
  std::lock_guard lock(mu_);
  return versions_.count({kind, version}) > 0;
}

}  // namespace gpufleet::lifecycle
