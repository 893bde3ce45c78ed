#include "apps/gpufleet/sim_actuator.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

namespace gpufleet::app {
namespace {

class SimActuator : public scaling::Actuator {
 public:
  SimActuator(SimFleet& fleet, net::TlsContext tls, std::string driver, std::string token_dir)
      : fleet_(fleet),
        tls_(std::move(tls)),
        driver_(std::move(driver)),
        token_dir_(std::move(token_dir)),
        timer_([this] { Loop(); }) {}
  ~SimActuator() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    timer_.join();
  }

  Status Provision(const scaling::ActuatorRequest& r) override {
    SimPoolOptions o;
    o.controller = r.controller;
    o.join_token = r.join_token;
    o.token_dir = token_dir_;
    o.tls = tls_;
    o.gpus_per_node = r.gpus_per_node;
    o.model = r.gpu_model;
    if (!driver_.empty()) o.drivers = {driver_};
    auto due = std::chrono::steady_clock::now() +
               std::chrono::milliseconds(static_cast<int64_t>(r.lead_time_s * 1000));
    {
      std::lock_guard lock(mu_);
      for (const auto& n : r.nodes) pending_[n] = {due, o};
    }
    cv_.notify_all();
    return {};
  }

  Status Deprovision(const scaling::ActuatorRequest& r) override {
    for (const auto& n : r.nodes) {
      {
        std::lock_guard lock(mu_);
        if (pending_.erase(n)) continue;  // never started
      }
      fleet_.RemoveNode(n);  // false: not run here (e.g. before a restart); nothing to stop
    }
    return {};
  }

 private:
  // Starts each pending node when its lead time has passed.
  void Loop() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      auto now = std::chrono::steady_clock::now();
      auto next = now + std::chrono::hours(1);
      for (auto it = pending_.begin(); it != pending_.end();) {
        if (it->second.first <= now) {
          auto [name, entry] = *it;
          it = pending_.erase(it);
          if (auto s = fleet_.AddNode(entry.second, name); !s.ok()) {
            spdlog::error("sim actuator: cannot start {}: {}", name, s.error().message);
          }
        } else {
          next = std::min(next, it->second.first);
          ++it;
        }
      }
      cv_.wait_until(lock, next);
    }
  }

  SimFleet& fleet_;
  net::TlsContext tls_;
  std::string driver_;
  std::string token_dir_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, SimPoolOptions>> pending_;
  std::thread timer_;  // last: started once the rest is built
};

}  // namespace

std::shared_ptr<scaling::Actuator> MakeSimActuator(SimFleet& fleet, net::TlsContext tls,
                                                   std::string driver, std::string token_dir) {
  return std::make_shared<SimActuator>(fleet, std::move(tls), std::move(driver),
                                       std::move(token_dir));
}

}  // namespace gpufleet::app
