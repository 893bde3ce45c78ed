#include "model/types.h"

#include <array>
#include <utility>

namespace gpufleet {
namespace {
constexpr std::array<std::pair<ClusterType, std::string_view>, 4> kClusterTypes{{
    {ClusterType::kTraining, "training"},
    {ClusterType::kInference, "inference"},
    {ClusterType::kDevelopment, "development"},
    {ClusterType::kEdge, "edge"},
}};
constexpr std::array<std::pair<NodeState, std::string_view>, 12> kNodeStates{{
    {NodeState::kProvisioning, "provisioning"},
    {NodeState::kJoining, "joining"},
    {NodeState::kReady, "ready"},
    {NodeState::kDegraded, "degraded"},
    {NodeState::kUnhealthy, "unhealthy"},
    {NodeState::kCordoned, "cordoned"},
    {NodeState::kDraining, "draining"},
    {NodeState::kDrained, "drained"},
    {NodeState::kMaintenance, "maintenance"},
    {NodeState::kUnreachable, "unreachable"},
    {NodeState::kDecommissioning, "decommissioning"},
    {NodeState::kRetired, "retired"},
}};

template <class E, size_t N>
std::string_view NameOf(const std::array<std::pair<E, std::string_view>, N>& table, E value) {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  return "unknown";
}
template <class E, size_t N>
std::optional<E> ValueOf(const std::array<std::pair<E, std::string_view>, N>& table,
                         std::string_view text) {
  for (const auto& [v, name] : table) {
    if (name == text) return v;
  }
  return std::nullopt;
}
}  // namespace

std::string_view ToString(ClusterType type) { return NameOf(kClusterTypes, type); }
std::optional<ClusterType> ParseClusterType(std::string_view t) {
  return ValueOf(kClusterTypes, t);
}
std::string_view ToString(NodeState state) { return NameOf(kNodeStates, state); }
std::optional<NodeState> ParseNodeState(std::string_view t) { return ValueOf(kNodeStates, t); }

std::string SchedulerNodeName(const std::string& tmpl, const std::string& node) {
  const std::string host = node.substr(0, node.find('.'));
  std::string out;
  for (size_t i = 0; i < tmpl.size();) {
    if (tmpl.compare(i, 6, "{name}") == 0) {
      out += node;
      i += 6;
    } else if (tmpl.compare(i, 10, "{hostname}") == 0) {
      out += host;
      i += 10;
    } else {
      out += tmpl[i++];
    }
  }
  return out;
}

}  // namespace gpufleet
