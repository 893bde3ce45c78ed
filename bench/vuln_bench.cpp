// Vulnerability evaluation at 10,000 nodes (issue 27: under 100 ms per cycle). The nodes are
// registered through the fleet registry as agents report them, with a realistic spread of
// versions (8 drivers on 4 branches, 3 Container Toolkits), and judged against the built-in
// bulletins on SQLite's fleet:
//   BM_VulnCycle10k:      what each health cycle does (VulnService::MaxCvss, the alert input)
//                         with the verdicts cached per distinct versions;
//   BM_VulnList10k:       GET /api/v1/vulnerabilities' work (VulnService::Nodes, every node);
//   BM_VulnCycle10kCold:  the same cycle just after the bulletins or the day changed (every
//                         distinct version judged again);
//   BM_JudgeNode10kDistinct: the worst case with no cache at all: 10,000 different versions,
//                         each judged (model::JudgeNode).

#include <benchmark/benchmark.h>

#include <iterator>
#include <memory>
#include <vector>

#include "bench_fleet.h"
#include "lifecycle/vuln_service.h"

namespace gpufleet {
namespace {

constexpr const char* kDrivers[] = {"580.159.03", "580.159.03", "580.95.05", "580.82.07",
                                    "570.133.20", "535.309.01", "595.71.05", "550.54.15"};
constexpr const char* kToolkits[] = {"1.19.1", "1.17.8", "1.17.3"};

class Fleet10k : public BenchFleet10k {
 public:
  Fleet10k() : BenchFleet10k("gf-vuln-bench") {
    for (int p = 0; p < kPools; ++p) {
      std::string pool = "p" + std::to_string(p);
      std::string token = fleet_->CreateJoinToken(pool, 0, "bench").value().secret;
      for (int i = 0; i < kPerPool; ++i) {
        proto::Hello h;
        h.join_token = token;
        h.facts.hostname = pool + "-" + std::to_string(i);
        h.facts.driver_version = kDrivers[(p * kPerPool + i) % std::size(kDrivers)];
        h.facts.container_toolkit = kToolkits[i % std::size(kToolkits)];
        Gpu g;
        g.uuid = "GPU-" + h.facts.hostname;
        g.name = "NVIDIA L4";
        h.gpus.push_back(g);
        (void)fleet_->OnHello(h, "127.0.0.1");
      }
    }
    compat_ = std::make_unique<lifecycle::CompatService>(*fleet_, *store_.settings,
                                                         GpuCatalog::Builtin(), clock_);
    (void)compat_->Load();
    vulns_ = std::make_unique<lifecycle::VulnService>(*fleet_, *compat_, *store_.settings, clock_);
    (void)vulns_->Load();
  }
  ~Fleet10k() {
    vulns_.reset();
    compat_.reset();
  }

  std::unique_ptr<lifecycle::CompatService> compat_;
  std::unique_ptr<lifecycle::VulnService> vulns_;
};

Fleet10k& Shared() {
  static Fleet10k fleet;
  return fleet;
}

void BM_VulnCycle10k(benchmark::State& state) {
  Fleet10k& f = Shared();
  size_t exposed = 0;
  for (auto _ : state) exposed = f.vulns_->MaxCvss().size();
  state.counters["nodes_with_cves"] = static_cast<double>(exposed);
}
BENCHMARK(BM_VulnCycle10k)->Unit(benchmark::kMillisecond);

void BM_VulnList10k(benchmark::State& state) {
  Fleet10k& f = Shared();
  size_t n = 0;
  for (auto _ : state) n = f.vulns_->Nodes({}).size();
  state.counters["nodes"] = static_cast<double>(n);
}
BENCHMARK(BM_VulnList10k)->Unit(benchmark::kMillisecond);

void BM_VulnCycle10kCold(benchmark::State& state) {
  Fleet10k& f = Shared();
  for (auto _ : state) {
    f.clock_->Advance(86'400'000);  // a new day: every verdict is judged again
    benchmark::DoNotOptimize(f.vulns_->MaxCvss());
  }
}
BENCHMARK(BM_VulnCycle10kCold)->Unit(benchmark::kMillisecond);

void BM_JudgeNode10kDistinct(benchmark::State& state) {
  const BulletinSet& bulletins = *BulletinSet::Builtin();
  const CompatMatrix& matrix = *CompatMatrix::Builtin();
  std::vector<NodeSoftware> software;
  for (int i = 0; i < kPools * kPerPool; ++i) {
    // 10,000 different versions on five branches, some fixed and some not.
    const int branch[] = {535, 550, 570, 580, 595};
    software.push_back({std::to_string(branch[i % 5]) + "." + std::to_string(i / 5 % 300) + "." +
                            std::to_string(i / 1500),
                        "1.17." + std::to_string(i % 9)});
  }
  for (auto _ : state) {
    for (const auto& s : software) {
      benchmark::DoNotOptimize(JudgeNode(bulletins, matrix, s, "2026-12-02"));
    }
  }
  state.counters["nodes"] = static_cast<double>(software.size());
}
BENCHMARK(BM_JudgeNode10kDistinct)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpufleet
