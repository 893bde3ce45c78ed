// The fleet-wide telemetry reads a dashboard and Prometheus make, measured at the handler (no
// network): GET /api/v1/query (one field's latest value for every GPU) and GET /metrics (every
// field of every GPU in dcgm-exporter's format), over 10,000 GPUs with every field reported.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

#include "alerting/notifier.h"
#include "api/context.h"
#include "fleet/fleet.h"
#include "health/service.h"
#include "telemetry/telemetry.h"

namespace gpufleet {
namespace {

class Fleet10k {
 public:
  static constexpr int kNodes = 1250, kGpus = 8;

  Fleet10k() {
    dir_ = "/tmp/gpufleet-read-bench-" + std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    store_ = store::Open("sqlite:" + dir_ + "/db").value();
    catalog_ = GpuCatalog::Builtin();
    (void)store_.fleet->ApplyFleet({Cluster{"bench", ClusterType::kTraining, "lab", {}, 1, 1}},
                                   {Pool{"h100", "bench", "H100-SXM5-80GB", kGpus, 0, {}, 1, 1}});
    telemetry_ = std::move(TelemetryStore::Open({dir_ + "/tsdb", {}}).value());
    int64_t now = clock_->NowMs();
    for (int n = 0; n < kNodes; ++n) {
      Node node;
      node.name = "n-" + std::to_string(10000 + n);
      node.cluster = "bench";
      node.pool = "h100";
      node.state = NodeState::kReady;
      node.facts.hostname = node.name;
      std::vector<std::string> uuids;
      proto::Samples batch;
      for (int g = 0; g < kGpus; ++g) {
        Gpu gpu;
        gpu.index = g;
        gpu.uuid = "GPU-" + std::to_string(n) + "-" + std::to_string(g) + "-5f1c2a7e-93b4-4c8d";
        gpu.name = "NVIDIA H100 80GB HBM3";
        gpu.model = "H100-SXM5-80GB";
        gpu.pci_bus_id = "00000000:" + std::to_string(10 + g) + ":00.0";
        node.gpus.push_back(gpu);
        uuids.push_back(gpu.uuid);
        SampleRow row;
        row.time_ms = now;
        row.gpu = g;
        // A healthy fleet but for one GPU in a hundred with a double-bit ECC error.
        for (size_t f = 0; f < kFieldCount; ++f) row.set(static_cast<Field>(f), 0);
        row.set(Field::kGpuUtil, (n * 31 + g * 7) % 100);
        row.set(Field::kGpuTemp, 45 + (n + g) % 25);
        row.set(Field::kPowerUsage, 300'000 + (n * 7 + g) % 300'000);
        row.set(Field::kPowerLimit, 700'000);
        row.set(Field::kSmClock, 1980);
        row.set(Field::kEccDbeVolatile, (n * kGpus + g) % 100 == 0 ? 1 : 0);
        batch.rows.push_back(row);
      }
      (void)store_.fleet->SaveNode(node, {});
      (void)telemetry_->Ingest(uuids, batch);
    }
    fleet_ = std::make_unique<FleetService>(*store_.fleet, *store_.tokens, catalog_, clock_,
                                            FleetOptions{});
    (void)fleet_->Load();
    runtime::Services services{*fleet_,
                               store_,
                               catalog_,
                               clock_,
                               *telemetry_,
                               *fleet_,
                               [] { return std::vector<scrape::TargetStatus>(); },
                               ""};
    ctx_ = std::make_unique<api::ApiContext>(services, http_metrics_, buffers_);
    api::AddMetricsRoutes(router_, *ctx_);
    health_ =
        std::make_unique<health::HealthService>(*fleet_, *telemetry_, *store_.fleet, *store_.audit,
                                                catalog_, XidCatalog::Builtin(), clock_);
    notifier_ = std::make_unique<alerting::Notifier>(*store_.alerting, clock_, "http://bench");
    reader_ = alerting::MakeTelemetryReader(*telemetry_);
  }
  ~Fleet10k() { std::filesystem::remove_all(dir_); }

  size_t Get(const std::string& path, const std::string& query_metric) {
    api::Request req;
    req.method = "GET";
    req.path = path;
    if (!query_metric.empty()) req.query["metric"] = query_metric;
    auto match = router_.Find("GET", path);
    api::Response r = (*match.handler)(req, api::Principal{"bench", Role::kAdmin, {}});
    size_t n = r.body.size();
    buffers_.Give(std::move(r.body));  // as the server does after writing
    return n;
  }

 private:
  std::string dir_;
  std::shared_ptr<Clock> clock_ = RealClock();
  store::Stores store_;
  std::shared_ptr<const GpuCatalog> catalog_;
  std::unique_ptr<TelemetryStore> telemetry_;
  std::unique_ptr<FleetService> fleet_;
  api::HttpMetrics http_metrics_;
  api::BufferPool buffers_;
  std::unique_ptr<api::ApiContext> ctx_;
  api::Router router_;

 public:
  std::unique_ptr<health::HealthService> health_;
  std::unique_ptr<alerting::Notifier> notifier_;
  std::unique_ptr<alerting::SeriesReader> reader_;
};

Fleet10k& Shared() {
  static Fleet10k fleet;
  return fleet;
}

void BM_QueryLatest10kGpus(benchmark::State& state) {
  auto& fleet = Shared();
  size_t bytes = 0;
  for (auto _ : state) bytes = fleet.Get("/api/v1/query", "gpu_util");
  state.counters["reply_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_QueryLatest10kGpus)->Unit(benchmark::kMillisecond)->MinTime(2);

void BM_MetricsPage10kGpus(benchmark::State& state) {
  auto& fleet = Shared();
  size_t bytes = 0;
  for (auto _ : state) bytes = fleet.Get("/metrics", "");
  state.counters["reply_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_MetricsPage10kGpus)->Unit(benchmark::kMillisecond)->MinTime(2);

// One health cycle over the fleet: every GPU's inputs gathered and judged, every node's verdict
// given to the fleet, then the alert engine's evaluation (what the controller does every
// --health-interval).
void BM_HealthAndAlertCycle10kGpus(benchmark::State& state) {
  auto& fleet = Shared();
  for (auto _ : state) {
    std::vector<health::NodeHealth> reports;
    fleet.health_->Apply(&reports);
    auto snapshot = std::make_shared<const alerting::Snapshot>(
        alerting::MakeSnapshot(reports, fleet.health_->RecentXids(), fleet.health_->xid_catalog(),
                               RealClock()->NowMs(), NAN));
    (void)fleet.notifier_->Cycle(reports, snapshot, *fleet.reader_);
  }
}
BENCHMARK(BM_HealthAndAlertCycle10kGpus)->Unit(benchmark::kMillisecond)->Iterations(6);

}  // namespace
}  // namespace gpufleet
