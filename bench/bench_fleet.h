#pragma once
// The benchmarks' 10,000-node fleet: 10 pools of 1,000 one-GPU L4 nodes in 5 training clusters
// of 2 pools, applied to a fleet registry over SQLite in a temporary directory, with a manual
// clock on 2026-12-02. The nodes themselves are registered by each benchmark.

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "common/clock.h"
#include "config/fleet_spec.h"
#include "fleet/fleet.h"

namespace gpufleet {

inline constexpr int kPools = 10, kPerPool = 1000;

class BenchFleet10k {
 public:
  explicit BenchFleet10k(const std::string& name) {
    dir_ = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    clock_->Set(1'796'169'600'000);
    store_ = store::Open("sqlite:" + (dir_ / "db").string()).value();
    fleet_ = std::make_unique<FleetService>(*store_.fleet, *store_.tokens, GpuCatalog::Builtin(),
                                            clock_, FleetOptions{5000, 86'400'000});
    std::string yaml = "apiVersion: gpufleet/v1\nkind: Fleet\nclusters:\n";
    for (int c = 0; c < kPools / 2; ++c) {
      yaml += "  - name: c" + std::to_string(c) + "\n    type: training\n    site: s\n    pools:\n";
      for (int p = 2 * c; p < 2 * c + 2; ++p) {
        yaml += "      - {name: p" + std::to_string(p) + ", gpu_model: L4, gpus_per_node: 1}\n";
      }
    }
    (void)fleet_->Apply(ParseFleetSpec(yaml, "bench.yaml", *GpuCatalog::Builtin()).value());
  }
  ~BenchFleet10k() {
    fleet_.reset();
    store_ = {};
    std::filesystem::remove_all(dir_);
  }
  BenchFleet10k(const BenchFleet10k&) = delete;
  BenchFleet10k& operator=(const BenchFleet10k&) = delete;

  std::filesystem::path dir_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  store::Stores store_;
  std::unique_ptr<FleetService> fleet_;
};

}  // namespace gpufleet
