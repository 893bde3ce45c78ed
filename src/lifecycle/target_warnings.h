#pragma once
// What to know before moving nodes to a driver or firmware version that passes the
// compatibility matrix: it is older than what some of them run (a downgrade), or it carries
// published CVEs (the security bulletins). The rollout plan, the compatibility check and the
// dashboard's rollout form show them; nothing is refused for them.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/bulletins.h"
#include "model/compat.h"

namespace gpufleet::lifecycle {

struct TargetWarning {
  std::string kind;  // "downgrade" or "cve"
  std::string message;
  std::vector<std::string> nodes;  // the nodes it concerns
};

// `kind`: "driver" or "firmware"; `nodes`: each node the target would go to, with the version
// it runs ("" when unknown). `bulletins` may be null (no CVE warning then).
std::vector<TargetWarning> TargetWarnings(
    std::string_view kind, const std::string& target,
    const std::vector<std::pair<std::string, std::string>>& nodes, const BulletinSet* bulletins,
    const CompatMatrix& matrix, std::string_view today);

}  // namespace gpufleet::lifecycle
