#pragma once
// The compatibility matrix in effect (the built-in data/compat.yaml, or the copy an admin
// applied, kept in the store's settings as "compat") and the check of a driver against a pool:
// the pool's needs with its cluster's, and the architectures of the GPUs it has.

#include <memory>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/result.h"
#include "fleet/fleet.h"
#include "model/catalog.h"
#include "model/compat.h"
#include "store/store.h"

namespace gpufleet::lifecycle {

struct MatrixInEffect {
  std::shared_ptr<const CompatMatrix> matrix;
  bool applied = false;  // false: the built-in one
  std::string yaml;      // its text
};

class CompatService {
 public:
  CompatService(FleetService& fleet, store::SettingStore& settings,
                std::shared_ptr<const GpuCatalog> catalog, std::shared_ptr<Clock> clock);
  // Reads the applied matrix, if any. One that no longer parses (edited in the database) is an
  // error: the controller does not start on a matrix it cannot read.
  Status Load();
  MatrixInEffect current() const;
  std::string today() const;  // "YYYY-MM-DD" in UTC, the day end of life is judged on
  // Replaces the matrix with `yaml` (checked whole first: a bad file changes nothing).
  Status Apply(const std::string& yaml, const std::string& filename);
  Status Reset();  // back to the built-in matrix

  // `driver` on pool `pool`, with `cuda` (when not empty) in place of the pool's requires.cuda.
  // kNotFound when there is no such pool.
  Result<CompatResult> Check(const std::string& pool, const std::string& driver,
                             const std::string& cuda);
  // The same for a pool already read (rollouts check each pool they touch).
  CompatResult Check(const Cluster& cluster, const Pool& pool, const std::string& driver,
                     const std::string& cuda);

 private:
  FleetService& fleet_;
  store::SettingStore& settings_;
  std::shared_ptr<const GpuCatalog> catalog_;
  std::shared_ptr<Clock> clock_;
  mutable std::mutex mu_;
  MatrixInEffect current_;  // guarded by mu_
};

}  // namespace gpufleet::lifecycle
