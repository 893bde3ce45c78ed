#pragma once
// The world of a lifecycle service test: a SQLite store in a temporary directory, the fleet
// registry over it with a fleet file applied, the compatibility matrix in effect, and a manual
// clock on 2026-12-02. Start() builds them again over the same store, as a restart would;
// subclasses add their service in StartService() and drop it in StopService().

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "config/fleet_spec.h"
#include "fleet/fleet.h"
#include "lifecycle/compat_service.h"
#include "tests/support/temp_dir.h"

namespace gpufleet::lifecycle {

class LifecycleFixture : public ::testing::Test {
 protected:
  explicit LifecycleFixture(std::string fleet_yaml) : fleet_yaml_(std::move(fleet_yaml)) {}

  void SetUp() override {
    clock_->Set(1'796'169'600'000);  // 2026-12-02
    Start();
    auto spec = ParseFleetSpec(fleet_yaml_, "fleet.yaml", *GpuCatalog::Builtin());
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(fleet_->Apply(spec.value()).ok());
  }
  void TearDown() override { Stop(); }
  void Start() {
    Stop();
    store_ = store::Open("sqlite:" + (dir_ / "db").string()).value();
    fleet_ = std::make_unique<FleetService>(*store_.fleet, *store_.tokens, GpuCatalog::Builtin(),
                                            clock_, FleetOptions{});
    ASSERT_TRUE(fleet_->Load().ok());
    compat_ =
        std::make_unique<CompatService>(*fleet_, *store_.settings, GpuCatalog::Builtin(), clock_);
    ASSERT_TRUE(compat_->Load().ok());
    StartService();
  }
  virtual void StartService() {}
  virtual void StopService() {}
  // A node of `pool` says hello (again: its facts change) with these versions and one L4.
  void Join(const std::string& pool, const std::string& name, const std::string& driver,
            const std::string& toolkit, const std::string& vbios = "") {
    proto::Hello h;
    h.join_token = fleet_->CreateJoinToken(pool, 3'600'000, "test")->secret;
    h.facts.hostname = name;
    h.facts.driver_version = driver;
    h.facts.container_toolkit = toolkit;
    Gpu g;
    g.uuid = "GPU-" + name;
    g.name = "NVIDIA L4";
    g.vbios_version = vbios;
    h.gpus.push_back(g);
    if (auto t = node_tokens_.find(name); t != node_tokens_.end()) {
      h.join_token.clear();  // a registered node comes back with its own credential
      h.node_token = t->second;
    }
    auto w = fleet_->OnHello(h, "127.0.0.1");
    ASSERT_TRUE(w.ok()) << w.error().message;
    if (!w->node_token.empty()) node_tokens_[name] = w->node_token;
  }
  std::map<std::string, std::string> node_tokens_;

  testing::TempDir tmp_{"gf-lifecycle"};  // removed with everything in it after the test
  std::filesystem::path dir_ = tmp_.path();
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  store::Stores store_;
  std::unique_ptr<FleetService> fleet_;
  std::unique_ptr<CompatService> compat_;

 private:
  void Stop() {
    StopService();
    compat_.reset();
    fleet_.reset();
    store_ = {};
  }
  std::string fleet_yaml_;
};

}  // namespace gpufleet::lifecycle
