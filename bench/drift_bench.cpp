// Drift detection at 10,000 nodes (issue 27: under 100 ms per evaluation). The nodes are
// registered through the fleet registry as agents report them, with 8 drivers (a quarter on
// the profile's) and one GPU each; every cluster's profile asks for a driver, a kernel pattern,
// a Container Toolkit, a VBIOS, persistence mode and a power limit (one GPU in 25 differs), and
// has an override for the nodes labelled rack=r1 (each node has a rack label: every node's
// profile is merged for it). On SQLite's fleet:
//   BM_DriftTick10kSteady:  what the controller does every 5 s once the findings are known
//                           (every node compared, nothing changed, nothing written);
//   BM_DriftTick10kChanged: a profile changed: the driver asked for alternates between two
//                           versions, so each tick opens and resolves thousands of findings and
//                           writes them;
//   BM_DriftList10k:        GET /api/v1/drift's work (every finding, sorted), run before the
//                           Changed benchmark piles up resolved findings;
//   BM_Compliance10k:       GET /api/v1/reports/compliance's work: every node's four checks
//                           (vulnerability verdicts, findings, branch support), counted per
//                           cluster, with the audit chain's cached verification.

#include <benchmark/benchmark.h>

#include <iterator>
#include <memory>

#include "bench_fleet.h"
#include "lifecycle/compat_service.h"
#include "lifecycle/compliance_service.h"
#include "lifecycle/drift_service.h"
#include "lifecycle/vuln_service.h"

namespace gpufleet {
namespace {

constexpr const char* kDrivers[] = {"580.159.03", "580.159.03", "580.95.05",  "580.82.07",
                                    "570.133.20", "535.309.01", "580.159.03", "580.159.03"};

class Fleet10k : public BenchFleet10k {
 public:
  Fleet10k() : BenchFleet10k("gf-drift-bench") {
    for (int p = 0; p < kPools; ++p) {
      std::string pool = "p" + std::to_string(p);
      std::string token = fleet_->CreateJoinToken(pool, 0, "bench").value().secret;
      for (int i = 0; i < kPerPool; ++i) {
        proto::Hello h;
        h.join_token = token;
        h.facts.hostname = pool + "-" + std::to_string(i);
        h.facts.driver_version = kDrivers[(p * kPerPool + i) % std::size(kDrivers)];
        h.facts.kernel = i % 50 == 0 ? "6.12.9-amd64" : "6.1.0-28-amd64";
        h.facts.container_toolkit = i % 10 == 0 ? "1.17.3" : "1.19.1";
        h.facts.labels = {{"rack", "r" + std::to_string(i % 8)}, {"zone", "a"}};
        Gpu g;
        g.uuid = "GPU-" + h.facts.hostname;
        g.name = "NVIDIA L4";
        g.vbios_version = i % 20 == 0 ? "95.04.00.00.01" : "95.04.5A.00.01";
        g.settings.persistence_mode = 1;
        g.settings.power_limit_w = i % 25 == 0 ? 60 : 72;
        h.gpus.push_back(g);
        (void)fleet_->OnHello(h, "127.0.0.1");
      }
    }
    SetDriver("580.159.03");
    drift_ = std::make_unique<lifecycle::DriftService>(*fleet_, *store_.drift, clock_);
    (void)drift_->Load();
    (void)drift_->Tick();
    compat_ = std::make_unique<lifecycle::CompatService>(*fleet_, *store_.settings,
                                                         GpuCatalog::Builtin(), clock_);
    (void)compat_->Load();
    vulns_ = std::make_unique<lifecycle::VulnService>(*fleet_, *compat_, *store_.settings, clock_);
    (void)vulns_->Load();
    compliance_ = std::make_unique<lifecycle::ComplianceService>(
        *fleet_, *compat_, *vulns_, *drift_, *store_.compliance, *store_.audit,
        std::string(64, 'k'), clock_);
  }
  ~Fleet10k() {
    compliance_.reset();
    vulns_.reset();
    compat_.reset();
    drift_.reset();
  }

  // Every cluster's profile, asking for `driver`.
  void SetDriver(const std::string& driver) {
    FleetSpec spec;
    spec.clusters = fleet_->Clusters().value();
    spec.pools = fleet_->Pools().value();
    for (auto& c : spec.clusters) {
      Profile& p = c.lifecycle.profile;
      p.driver_version = driver;
      p.kernel = "6.1.0-*-amd64";
      p.container_toolkit = "1.19.1";
      p.firmware["L4"].vbios = "95.04.5A.00.01";
      p.persistence_mode = true;
      p.power_limit_w = 72;
      ProfileOverride rack;  // the same values: the findings stay those above
      rack.labels = {{"rack", "r1"}};
      rack.profile.power_limit_w = 72;
      rack.profile.kernel = "6.1.0-*";
      p.overrides = {rack};
    }
    (void)fleet_->Apply(spec);
  }

  std::unique_ptr<lifecycle::DriftService> drift_;
  std::unique_ptr<lifecycle::CompatService> compat_;
  std::unique_ptr<lifecycle::VulnService> vulns_;
  std::unique_ptr<lifecycle::ComplianceService> compliance_;
};

Fleet10k& Shared() {
  static Fleet10k fleet;
  return fleet;
}

void BM_DriftTick10kSteady(benchmark::State& state) {
  Fleet10k& f = Shared();
  int changed = 0;
  for (auto _ : state) {
    f.clock_->Advance(5000);
    auto t = f.drift_->Tick();
    changed = t.ok() ? t.value() : -1;
  }
  state.counters["changed"] = changed;
  state.counters["open"] = static_cast<double>(f.drift_->List({.state = "open"}).size());
}
BENCHMARK(BM_DriftTick10kSteady)->Unit(benchmark::kMillisecond);

void BM_DriftList10k(benchmark::State& state) {
  Fleet10k& f = Shared();
  size_t n = 0;
  for (auto _ : state) n = f.drift_->List({}).size();
  state.counters["findings"] = static_cast<double>(n);
}
BENCHMARK(BM_DriftList10k)->Unit(benchmark::kMillisecond);

void BM_Compliance10k(benchmark::State& state) {
  Fleet10k& f = Shared();
  lifecycle::ComplianceCounts fleet;
  for (auto _ : state) {
    auto r = f.compliance_->Report({}, 30);
    if (r.ok()) fleet = r->now.Fleet();
  }
  state.counters["nodes"] = static_cast<double>(fleet.nodes);
  state.counters["compliant"] = static_cast<double>(fleet.compliant);
}
BENCHMARK(BM_Compliance10k)->Unit(benchmark::kMillisecond);

void BM_DriftTick10kChanged(benchmark::State& state) {
  Fleet10k& f = Shared();
  bool flip = false;
  int changed = 0;
  for (auto _ : state) {
    state.PauseTiming();
    f.SetDriver((flip = !flip) ? "580.95.05" : "580.159.03");
    f.clock_->Advance(5000);
    state.ResumeTiming();
    auto t = f.drift_->Tick();
    changed = t.ok() ? t.value() : -1;
  }
  state.counters["changed"] = changed;
}
BENCHMARK(BM_DriftTick10kChanged)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpufleet
