#pragma once
// A rollout of a driver or firmware version over a selection of nodes, as the API takes it and
// the store keeps it: the request (kind, target, selector, strategy), its progress (state,
// stage, reason) and each node's step. Plain data with its JSON form; RolloutService
// (rollout_service.h) moves it along.

#include <boost/json/fwd.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/types.h"

namespace gpufleet::lifecycle {

enum class RolloutKind { kDriver, kGpuFirmware, kNicFirmware };
std::string_view ToString(RolloutKind kind);  // "driver", "gpu-firmware", "nic-firmware"
std::optional<RolloutKind> ParseRolloutKind(std::string_view text);
// The agent action that installs a version of this kind: install-driver, flash-gpu-firmware,
// flash-nic-firmware.
std::string_view InstallAction(RolloutKind kind);
// The version of `kind` a node runs now, from what its agent reports: the driver; the VBIOS
// all its GPUs share; the firmware all its NICs share. "mixed" when they differ, empty when
// unknown (no GPUs, no NICs).
std::string RunningVersion(const Node& node, RolloutKind kind);

// A count ("2") or a share of a total ("25%").
struct Amount {
  double value = 0;
  bool share = false;
  // Of `total` nodes: a share is rounded down but at least 1 when the value is not 0.
  int Of(int total) const;
  std::string Text() const;  // "2", "25%"
  bool operator==(const Amount&) const = default;
};

struct RolloutStrategy {
  std::vector<std::string> test_nodes;  // updated (and validated) first
  std::string test_pool;                // or a whole non-production pool
  bool validate = true;                 // the `validate` action on the test nodes
  Amount canary{1, false};              // per selected pool
  int64_t confidence_ms = 5 * 60'000;   // watched after the canaries, before the batches
  int batch_size = 1;
  std::string batch_growth = "fixed";  // fixed, linear (s, 2s, 3s...), exponential (s, 2s, 4s...)
  Amount max_unavailable{1, false};    // per pool and per cluster, down for any reason
  Amount max_failed_nodes{1, false};   // at it the rollout halts
  std::string rollback = "automatic";  // or "manual"
  int64_t drain_timeout_ms = 10 * 60'000;  // then the node's jobs are requeued
  std::string busy = "drain";              // drain: wait then requeue; skip: come back later
  bool approve_between_stages = false;
  std::optional<bool> respect_windows;      // default: firmware yes, drivers no
  int64_t action_timeout_ms = 30 * 60'000;  // an install, flash or validation
  int64_t boot_timeout_ms = 15 * 60'000;    // back, reporting the target, after the reboot
  bool RespectsWindows(RolloutKind kind) const {
    return respect_windows.value_or(kind != RolloutKind::kDriver);
  }
};

struct RolloutSelector {
  std::vector<std::string> clusters, pools, nodes;
  Labels labels;  // every one must match the node's pool's (or cluster's) labels
  bool Empty() const {
    return clusters.empty() && pools.empty() && nodes.empty() && labels.empty();
  }
};

// A node's part in a rollout. `state`: pending, draining, installing, rebooting, validating,
// updated, failed, skipped, rolling_back, rolled_back.
struct RolloutNode {
  std::string node, pool, cluster;
  std::string state = "pending";
  std::string from, to;
  int64_t started_ms = 0, ended_ms = 0;
  std::string message;
  int stage = 0;  // -1 test, 0 canary, 1.. the rolling batches
  // Where its step is: the command in flight (0: none) and since when.
  int64_t command = 0;
  std::string step;  // "", "drain", "install", "reboot", "validate", "restore"
  int64_t step_ms = 0;
  bool rollback = false;         // the steps put `from` back
  std::string resume = "ready";  // the node's state before the rollout took it
  std::string result;            // the last command's outcome: "", "ok", or why it failed
  bool Done() const {
    return state == "updated" || state == "failed" || state == "skipped" || state == "rolled_back";
  }
  bool Busy() const { return !step.empty(); }
};

struct Rollout {
  int64_t id = 0;
  RolloutKind kind = RolloutKind::kDriver;
  std::string target, package;
  RolloutSelector selector;
  RolloutStrategy strategy;
  // planned, waiting_window, running, awaiting_approval, paused, halted, rolling_back,
  // rolled_back, completed, aborted
  std::string state = "planned";
  std::string stage;   // "test", "canary", "confidence", "batch 2/7", "rollback", ""
  std::string reason;  // why it is in its state
  int current = -1;    // the stage being worked: -1 test .. batches
  int batches = 0;     // rolling batches after the canaries
  int64_t confidence_until_ms = 0;
  int approved = -2;               // the last stage an operator approved the end of
  std::string created_by, forced;  // forced: the admin's reason for overriding compat
  int64_t created_ms = 0, updated_ms = 0, started_ms = 0, ended_ms = 0;
  std::vector<RolloutNode> nodes;
  bool Ended() const {
    return state == "completed" || state == "aborted" || state == "rolled_back";
  }
};

// The request of POST /api/v1/rollouts (and /plan): strict, an unknown field is an error that
// names it.
struct RolloutRequest {
  RolloutKind kind = RolloutKind::kDriver;
  std::string target, package;
  RolloutSelector selector;
  RolloutStrategy strategy;
  bool force = false;
  std::string reason;  // required with force
  // /plan only: how long each action is expected to take.
  int64_t expect_drain_ms = 60'000, expect_install_ms = 5 * 60'000, expect_reboot_ms = 5 * 60'000,
          expect_validate_ms = 10 * 60'000;
};
Result<RolloutRequest> ParseRolloutRequest(std::string_view body);

// The document kept in the store (the nodes apart) and the API's form.
std::string RolloutDoc(const Rollout& r);
Result<Rollout> RolloutFromDoc(int64_t id, const std::string& doc);
std::string NodeDoc(const RolloutNode& n);
Result<RolloutNode> NodeFromDoc(const std::string& node, const std::string& doc);
boost::json::object ToJson(const Rollout& r, bool with_nodes);
boost::json::object ToJson(const RolloutNode& n);
boost::json::object ToJson(const RolloutStrategy& s);

}  // namespace gpufleet::lifecycle
