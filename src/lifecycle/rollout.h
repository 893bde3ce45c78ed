#pragma once
// A rollout of a driver or firmware version over a selection of nodes, as the API takes it and
// the store keeps it: the request (kind, target, selector, strategy), its progress (state,
// stage, reason) and each node's step. Plain data with its JSON form; RolloutService
// (rollout_service.h) moves it along.

#include <boost/json/fwd.hpp>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/types.h"

namespace gpufleet::lifecycle {

enum class RolloutKind { kDriver, kGpuFirmware, kNicFirmware };
inline constexpr int kRolloutKinds = 3;

// All that differs between the kinds of rollout, one row each (rollout_kinds.cpp). A new kind
// is an enum value, a row, the agent's program for its action, the web form and the docs.
struct RolloutKindSpec {
  RolloutKind kind;
  std::string_view name;    // in the API: "driver", "gpu-firmware", "nic-firmware"
  std::string_view action;  // the agent action that installs a version: "install-driver"
  // The version's field in GET /api/v1/nodes/{name}/versions: "driver", "vbios", ...
  std::string_view fact;
  // The version a node runs now, from what its agent reports: "mixed" when its parts differ,
  // empty when unknown (no GPUs, no NICs).
  std::string (*running)(const Node& node);
  // Why a node without the part is left out of a rollout of this kind ("no GPU reported");
  // empty: such a node is kept (and fails, as one whose version cannot be told).
  std::string_view none;
  bool windows;  // kept to the maintenance windows unless the strategy says otherwise
};
const RolloutKindSpec& Spec(RolloutKind kind);
std::span<const RolloutKindSpec> RolloutKinds();
std::string RolloutKindNames();               // "driver, gpu-firmware or nic-firmware"
std::string_view ToString(RolloutKind kind);  // Spec(kind).name
std::optional<RolloutKind> ParseRolloutKind(std::string_view text);
std::string_view InstallAction(RolloutKind kind);                // Spec(kind).action
std::string RunningVersion(const Node& node, RolloutKind kind);  // Spec(kind).running

// A rollout's state: planned, waiting_window, running, awaiting_approval, paused, halted,
// rolling_back, rolled_back, completed, aborted (the names in the API and the store).
enum class RolloutState {
  kPlanned,
  kWaitingWindow,
  kRunning,
  kAwaitingApproval,
  kPaused,
  kHalted,
  kRollingBack,
  kRolledBack,
  kCompleted,
  kAborted,
};
std::string_view ToString(RolloutState state);
std::optional<RolloutState> ParseRolloutState(std::string_view text);

// A node's part in a rollout: pending, draining, installing, rebooting, validating, updated,
// failed, skipped, rolling_back, rolled_back.
enum class NodeProgress {
  kPending,
  kDraining,
  kInstalling,
  kRebooting,
  kValidating,
  kUpdated,
  kFailed,
  kSkipped,
  kRollingBack,
  kRolledBack,
};
std::string_view ToString(NodeProgress progress);
std::optional<NodeProgress> ParseNodeProgress(std::string_view text);

// The step a node is in: none, or waiting for its drain or for the answer to a command.
enum class RolloutStep { kNone, kDrain, kInstall, kReboot, kValidate };
std::string_view ToString(RolloutStep step);  // "", "drain", "install", "reboot", "validate"
std::optional<RolloutStep> ParseRolloutStep(std::string_view text);

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
    return respect_windows.value_or(Spec(kind).windows);
  }
};

struct RolloutSelector {
  std::vector<std::string> clusters, pools, nodes;
  Labels labels;  // every one must match the node's pool's (or cluster's) labels
  bool Empty() const {
    return clusters.empty() && pools.empty() && nodes.empty() && labels.empty();
  }
};

// A node's part in a rollout.
struct RolloutNode {
  std::string node, pool, cluster;
  NodeProgress state = NodeProgress::kPending;
  std::string from, to;
  int64_t started_ms = 0, ended_ms = 0;
  std::string message;
  int stage = 0;  // -1 test, 0 canary, 1.. the rolling batches
  // Where its step is: the command in flight (0: none) and since when.
  int64_t command = 0;
  RolloutStep step = RolloutStep::kNone;
  int64_t step_ms = 0;
  bool rollback = false;         // the steps put `from` back
  std::string resume = "ready";  // the node's state before the rollout took it
  std::string result;            // the last command's outcome: "", "ok", or why it failed
  bool Done() const {
    return state == NodeProgress::kUpdated || state == NodeProgress::kFailed ||
           state == NodeProgress::kSkipped || state == NodeProgress::kRolledBack;
  }
  bool Busy() const { return step != RolloutStep::kNone; }
};

struct Rollout {
  int64_t id = 0;
  RolloutKind kind = RolloutKind::kDriver;
  std::string target, package;
  RolloutSelector selector;
  RolloutStrategy strategy;
  RolloutState state = RolloutState::kPlanned;
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
    return state == RolloutState::kCompleted || state == RolloutState::kAborted ||
           state == RolloutState::kRolledBack;
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
