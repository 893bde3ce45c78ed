#include "lifecycle/target_warnings.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace gpufleet::lifecycle {

std::vector<TargetWarning> TargetWarnings(
    std::string_view kind, const std::string& target,
    const std::vector<std::pair<std::string, std::string>>& nodes, const BulletinSet* bulletins,
    const CompatMatrix& matrix, std::string_view today) {
  std::vector<TargetWarning> out;
  // Older than what nodes run: named by the versions they run, newest first.
  TargetWarning down{"downgrade", "", {}};
  struct NewerFirst {
    bool operator()(const std::string& a, const std::string& b) const {
      return CompareVersions(a, b) > 0;
    }
  };
  std::map<std::string, int, NewerFirst> newer;  // version -> nodes
  for (const auto& [node, from] : nodes) {
    if (from.empty() || CompareVersions(target, from) >= 0) continue;
    down.nodes.push_back(node);
    ++newer[from];
  }
  if (!down.nodes.empty()) {
    std::string runs;
    for (const auto& [version, count] : newer) {
      runs += (runs.empty() ? "" : ", ") + version + " (" + std::to_string(count) + " node" +
              (count > 1 ? "s" : "") + ")";
    }
    down.message = std::string(kind) + " " + target +
                   " is a downgrade: " + std::to_string(down.nodes.size()) +
                   " of the nodes run a newer one: " + runs;
    out.push_back(std::move(down));
  }
  // A driver with published CVEs, judged as a node running it would be.
  if (kind == "driver" && bulletins) {
    VulnVerdict v = JudgeNode(*bulletins, matrix, {target, ""}, today);
    if (!v.cves.empty()) {
      TargetWarning cve{"cve", "", {}};
      for (const auto& [node, from] : nodes) cve.nodes.push_back(node);
      std::string ids;
      const size_t named = std::min<size_t>(v.cves.size(), 5);
      for (size_t i = 0; i < named; ++i) {
        char cvss[16];
        std::snprintf(cvss, sizeof cvss, "%.1f", v.cves[i].cvss);
        ids += (i ? ", " : "") + v.cves[i].cve + " (CVSS " + cvss + ")";
      }
      if (v.cves.size() > named) ids += " and " + std::to_string(v.cves.size() - named) + " more";
      cve.message = "driver " + target + " has " + std::to_string(v.cves.size()) + " known CVE" +
                    (v.cves.size() > 1 ? "s" : "") + ": " + ids;
      if (!v.fixed_driver.empty()) cve.message += "; " + v.fixed_driver + " fixes them";
      out.push_back(std::move(cve));
    }
  }
  return out;
}

}  // namespace gpufleet::lifecycle
