// The kinds of rollout, one row each, and the names of the rollout's states and steps.

#include <algorithm>
#include <array>
#include <set>

#include "lifecycle/rollout.h"

namespace gpufleet::lifecycle {
namespace {

std::string Driver(const Node& node) { return node.facts.driver_version; }

std::string Shared(const std::set<std::string>& seen) {
  if (seen.empty()) return "";
  return seen.size() == 1 ? *seen.begin() : "mixed";
}
std::string Vbios(const Node& node) {
  std::set<std::string> seen;
  for (const auto& g : node.gpus) seen.insert(g.vbios_version);
  return Shared(seen);
}
std::string NicFirmware(const Node& node) {
  std::set<std::string> seen;
  for (const auto& n : node.facts.nics) seen.insert(n.fw_version);
  return Shared(seen);
}

constexpr std::array<RolloutKindSpec, kRolloutKinds> kKinds = {{
    {RolloutKind::kDriver, "driver", "install-driver", "driver", Driver, "", false},
    {RolloutKind::kGpuFirmware, "gpu-firmware", "flash-gpu-firmware", "vbios", Vbios,
     "no GPU (or no VBIOS version) reported", true},
    {RolloutKind::kNicFirmware, "nic-firmware", "flash-nic-firmware", "nic_firmware", NicFirmware,
     "no InfiniBand or RoCE adapter reported", true},
}};
static_assert(
    [] {
      for (size_t i = 0; i < kKinds.size(); ++i) {
        if (static_cast<size_t>(kKinds[i].kind) != i) return false;
      }
      return true;
    }(),
    "kKinds has one row per RolloutKind, in its order");

// Enum values are the indices of their names.
template <typename E, size_t N>
std::optional<E> Parse(const std::array<std::string_view, N>& names, std::string_view text) {
  auto it = std::find(names.begin(), names.end(), text);
  if (it == names.end()) return std::nullopt;
  return static_cast<E>(it - names.begin());
}
template <typename E, size_t N>
std::string_view Name(const std::array<std::string_view, N>& names, E value) {
  auto i = static_cast<size_t>(value);
  return i < N ? names[i] : "";
}

constexpr std::array<std::string_view, 10> kStates = {
    "planned", "waiting_window", "running",     "awaiting_approval", "paused",
    "halted",  "rolling_back",   "rolled_back", "completed",         "aborted"};
constexpr std::array<std::string_view, 10> kProgress = {
    "pending", "draining", "installing", "rebooting",    "validating",
    "updated", "failed",   "skipped",    "rolling_back", "rolled_back"};
constexpr std::array<std::string_view, 5> kSteps = {"", "drain", "install", "reboot", "validate"};

}  // namespace

std::span<const RolloutKindSpec> RolloutKinds() { return kKinds; }

const RolloutKindSpec& Spec(RolloutKind kind) {
  auto i = static_cast<size_t>(kind);
  return kKinds[i < kKinds.size() ? i : 0];
}

std::string RolloutKindNames() {
  std::string out;
  for (size_t i = 0; i < kKinds.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == kKinds.size() ? " or " : ", ") + std::string(kKinds[i].name);
  }
  return out;
}

std::string_view ToString(RolloutKind kind) { return Spec(kind).name; }
std::optional<RolloutKind> ParseRolloutKind(std::string_view text) {
  for (const auto& k : kKinds) {
    if (k.name == text) return k.kind;
  }
  return std::nullopt;
}
std::string_view InstallAction(RolloutKind kind) { return Spec(kind).action; }
std::string RunningVersion(const Node& node, RolloutKind kind) { return Spec(kind).running(node); }

std::string_view ToString(RolloutState state) { return Name(kStates, state); }
std::optional<RolloutState> ParseRolloutState(std::string_view text) {
  return Parse<RolloutState>(kStates, text);
}
std::string_view ToString(NodeProgress progress) { return Name(kProgress, progress); }
std::optional<NodeProgress> ParseNodeProgress(std::string_view text) {
  return Parse<NodeProgress>(kProgress, text);
}
std::string_view ToString(RolloutStep step) { return Name(kSteps, step); }
std::optional<RolloutStep> ParseRolloutStep(std::string_view text) {
  return Parse<RolloutStep>(kSteps, text);
}

}  // namespace gpufleet::lifecycle
