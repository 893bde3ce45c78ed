#pragma once
// The compliance posture. Each node passes or fails four checks: on a supported driver branch
// (the compatibility matrix knows it, it is not end of life, and it is not a new-feature branch
// in a production pool), free of drift (no unresolved finding), free of critical and high CVEs
// (none of CVSS 7.0 or more), and with its firmware at the profile (no unresolved vbios,
// inforom or gsp_firmware finding). The fleet passes or fails a fifth: the audit chain verifies.
// A node is compliant when it passes its four and the chain verifies. Counted per cluster and
// for the fleet now, and kept one document a day (Record) for the trend. Thread-safe; it takes
// no lock of its own while it asks the other services.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "fleet/fleet.h"
#include "lifecycle/compat_service.h"
#include "lifecycle/drift_service.h"
#include "lifecycle/vuln_service.h"
#include "store/store.h"

namespace gpufleet::lifecycle {

// The checks, in the order the API, the CLI and the dashboard show them.
inline constexpr const char* kComplianceChecks[] = {"supported_branch", "drift_free", "cve_free",
                                                    "firmware_at_profile"};
inline constexpr double kHighCvss = 7.0;  // CVSS v3: 7.0-8.9 high, 9.0 and over critical
inline constexpr int kComplianceRetentionDays = 400;
inline constexpr int64_t kAuditRecheckMs = 5 * 60'000;  // a verification is reused this long

struct NodeCompliance {
  std::string node, cluster, pool;
  bool supported_branch = false;
  bool drift_free = false;
  bool cve_free = false;
  bool firmware_at_profile = false;
  std::vector<std::string> reasons;  // why each failing check fails, in the checks' order
  bool Passes(std::string_view check) const;
  bool NodeChecksPass() const {
    return supported_branch && drift_free && cve_free && firmware_at_profile;
  }
};

// How many nodes pass each check (and all of them, with the audit chain verified).
struct ComplianceCounts {
  int64_t nodes = 0;
  int64_t supported_branch = 0;
  int64_t drift_free = 0;
  int64_t cve_free = 0;
  int64_t firmware_at_profile = 0;
  int64_t compliant = 0;
  void Add(const NodeCompliance& n, bool audit_verified);
  ComplianceCounts& operator+=(const ComplianceCounts& o);
  bool operator==(const ComplianceCounts&) const = default;
};

struct AuditStatus {
  bool verified = false;
  int64_t records = 0;  // records whose hashes checked out
  std::string problem;  // why it does not verify
  int64_t checked_ms = 0;
};

// One day's (or now's) posture: each cluster's counts, every cluster the filter allows (one
// without nodes too).
struct ComplianceDayCounts {
  std::string day;  // "YYYY-MM-DD", UTC
  int64_t measured_ms = 0;
  bool audit_verified = false;
  std::map<std::string, ComplianceCounts> clusters;
  ComplianceCounts Fleet() const;  // the clusters' sum
};

struct ComplianceFilter {
  std::string cluster, pool;
  std::vector<std::string> clusters;  // a scoped token's clusters; empty: all
  std::string check;                  // only nodes failing this check; empty: any
  bool failing = false;               // only nodes failing a check
};

struct ComplianceReport {
  ComplianceDayCounts now;
  AuditStatus audit;
  std::vector<ComplianceDayCounts> series;  // oldest first, today's (now's) last
};

class ComplianceService {
 public:
  ComplianceService(FleetService& fleet, CompatService& compat, VulnService& vulns,
                    DriftService& drift, store::ComplianceStore& store, store::AuditLog& audit,
                    std::string secret_key, std::shared_ptr<Clock> clock);
  // Each node the filter selects, by name, with its checks.
  std::vector<NodeCompliance> Nodes(const ComplianceFilter& filter);
  // Now and the last `days` days (today's from now). Only the filter's cluster and clusters
  // count; its pool, check and failing are not used.
  Result<ComplianceReport> Report(const ComplianceFilter& filter, int days);
  // Measures the whole fleet and writes today's document, replacing an earlier one of today;
  // drops days older than kComplianceRetentionDays.
  Status Record();
  // The audit chain's verification, done again when the last one is older than kAuditRecheckMs.
  AuditStatus Audit();

 private:
  ComplianceDayCounts Measure(const ComplianceFilter& filter, bool audit_verified);

  FleetService& fleet_;
  CompatService& compat_;
  VulnService& vulns_;
  DriftService& drift_;
  store::ComplianceStore& store_;
  store::AuditLog& audit_log_;
  std::string secret_key_;
  std::shared_ptr<Clock> clock_;
  std::mutex audit_mu_;  // one verification at a time
  AuditStatus audit_;    // guarded by audit_mu_
};

// The stored form of a day, and back. A document that does not parse is an error naming it.
std::string ComplianceDayJson(const ComplianceDayCounts& day);
Result<ComplianceDayCounts> ParseComplianceDay(const std::string& day, const std::string& doc);

}  // namespace gpufleet::lifecycle
