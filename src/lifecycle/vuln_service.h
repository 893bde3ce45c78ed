#pragma once
// Vulnerability status: the security bulletins in effect (the built-in
// data/security-bulletins.yaml and the CSAF documents an admin imported, kept in the store's
// settings), each node's CVEs judged from the versions its agent reports, and the driver that
// fixes a pool. Thread-safe: every method may be called from any thread; its lock is taken
// before the fleet registry's (it reads the nodes while holding it), never after.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "fleet/fleet.h"
#include "lifecycle/compat_service.h"
#include "model/bulletins.h"
#include "store/store.h"

namespace gpufleet::lifecycle {

struct VulnFilter {
  std::string node, pool, cluster;
  std::vector<std::string> clusters;  // a scoped token's clusters; empty: all
  // Only nodes with a CVE of at least this score, and of their CVEs only those; 0: every node.
  double min_cvss = 0;
  std::string status;  // "ok", "exposed", "unsupported_branch"; empty: any
};

struct NodeVulns {
  std::string node, cluster, pool;
  NodeSoftware software;
  bool simulated = false;
  // Shared by the nodes that run the same versions (a copy when a filter cut its CVEs).
  std::shared_ptr<const VulnVerdict> verdict;
};

// What fixes a pool: the driver to roll out and the nodes that need it.
struct FixProposal {
  std::string pool;
  FixTarget target;
  std::vector<std::string> nodes;  // the pool's nodes not yet on the target and exposed or EOL
};

class VulnService {
 public:
  VulnService(FleetService& fleet, CompatService& compat, store::SettingStore& settings,
              std::shared_ptr<Clock> clock);
  // Reads the imported bulletins. One that no longer parses is an error: the controller does
  // not start on bulletins it cannot read (as CompatService::Load).
  Status Load();
  std::shared_ptr<const BulletinSet> bulletins() const;
  // Reads one of NVIDIA's CSAF 2.0 documents (ParseCsafAdvisory), keeps its text in the store
  // and puts it in effect, replacing a bulletin of the same id. A malformed document changes
  // nothing: the error names its JSON path.
  Result<Bulletin> Import(std::string_view csaf_json);

  // Each node the filter selects, ordered by name, with its verdict.
  std::vector<NodeVulns> Nodes(const VulnFilter& filter);
  // The highest CVSS each node is exposed to, for nodes with at least one CVE (the alert rules'
  // node_cve_max_cvss).
  std::unordered_map<std::string, double> MaxCvss();
  // The driver that fixes `pool` and the nodes that need it. kNotFound: no such pool;
  // kConflict: no bulletin names a fix on the branch chosen, or no node needs one.
  Result<FixProposal> ProposeFix(const std::string& pool);

  struct Stats {
    int64_t judged = 0;  // verdicts computed (the rest came from the cache)
    int64_t cached = 0;
  };
  Stats stats() const;

 private:
  // Empties the cache when the matrix in effect or the day changed; once per pass over the
  // nodes (reading the matrix copies its text). Called with mu_ held.
  void RefreshCacheLocked();
  // The verdict for `software` against cache_matrix_ on cache_day_, computed once per distinct
  // versions while the bulletins, the matrix and the day stay the same. Called with mu_ held,
  // after RefreshCacheLocked.
  std::shared_ptr<const VulnVerdict> JudgeLocked(const NodeSoftware& software);

  FleetService& fleet_;
  CompatService& compat_;
  store::SettingStore& settings_;
  std::shared_ptr<Clock> clock_;
  mutable std::mutex mu_;
  std::shared_ptr<const BulletinSet> bulletins_;  // guarded by mu_
  std::vector<std::string> imported_;             // guarded by mu_; ids
  std::unordered_map<std::string, std::shared_ptr<const VulnVerdict>> cache_;  // guarded by mu_
  std::shared_ptr<const CompatMatrix> cache_matrix_;                           // guarded by mu_
  std::string cache_day_;                                                      // guarded by mu_
  Stats stats_;                                                                // guarded by mu_
};

}  // namespace gpufleet::lifecycle
