#include "lifecycle/compliance_service.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <set>
#include <unordered_map>

#include "common/json_text.h"
#include "model/compat.h"

namespace gpufleet::lifecycle {

namespace json = boost::json;

namespace {

constexpr int64_t kDayMs = 86'400'000;

std::string DayOf(int64_t ms) { return FormatTime(ms).substr(0, 10); }

bool Allowed(const std::vector<std::string>& clusters, const std::string& cluster) {
  return clusters.empty() || std::find(clusters.begin(), clusters.end(), cluster) != clusters.end();
}

bool FirmwareFact(const std::string& fact) {
  return fact == "vbios" || fact == "inforom" || fact == "gsp_firmware";
}

// Why `branch` is not a supported one for a pool of `tier` on `today`; "" when it is.
std::string BranchProblem(const CompatMatrix& matrix, const std::string& driver,
                          const std::string& branch, const std::string& tier,
                          const std::string& today) {
  if (driver.empty()) return "supported_branch: the driver is unknown";
  const CompatBranch* b = matrix.FindBranch(branch);
  if (b == nullptr) return "supported_branch: " + branch + " is not in the compatibility matrix";
  if (b->EndOfLife(today)) {
    return "supported_branch: " + branch + " is end of life" +
           (b->eol.empty() ? std::string() : " (" + b->eol + ")");
  }
  if (b->type == "nfb" && tier == "production") {
    return "supported_branch: " + branch + " is a new feature branch, in a production pool";
  }
  return "";
}

json::object CountsJson(const ComplianceCounts& c) {
  return {{"nodes", c.nodes},
          {"supported_branch", c.supported_branch},
          {"drift_free", c.drift_free},
          {"cve_free", c.cve_free},
          {"firmware_at_profile", c.firmware_at_profile},
          {"compliant", c.compliant}};
}

}  // namespace

bool NodeCompliance::Passes(std::string_view check) const {
  if (check == "supported_branch") return supported_branch;
  if (check == "drift_free") return drift_free;
  if (check == "cve_free") return cve_free;
  if (check == "firmware_at_profile") return firmware_at_profile;
  return true;
}

void ComplianceCounts::Add(const NodeCompliance& n, bool audit_verified) {
  ++nodes;
  supported_branch += n.supported_branch;
  drift_free += n.drift_free;
  cve_free += n.cve_free;
  firmware_at_profile += n.firmware_at_profile;
  compliant += n.NodeChecksPass() && audit_verified;
}

ComplianceCounts& ComplianceCounts::operator+=(const ComplianceCounts& o) {
  nodes += o.nodes;
  supported_branch += o.supported_branch;
  drift_free += o.drift_free;
  cve_free += o.cve_free;
  firmware_at_profile += o.firmware_at_profile;
  compliant += o.compliant;
  return *this;
}

ComplianceCounts ComplianceDayCounts::Fleet() const {
  ComplianceCounts sum;
  for (const auto& [name, c] : clusters) sum += c;
  return sum;
}

std::string ComplianceDayJson(const ComplianceDayCounts& day) {
  json::object clusters;
  for (const auto& [name, c] : day.clusters) clusters[name] = CountsJson(c);
  return JsonText(json::object{{"measured_ms", day.measured_ms},
                               {"audit_verified", day.audit_verified},
                               {"clusters", std::move(clusters)}});
}

Result<ComplianceDayCounts> ParseComplianceDay(const std::string& day, const std::string& doc) {
  auto bad = [&](const std::string& why) {
    return MakeError(ErrorCode::kInternal, "compliance day " + day + ": " + why);
  };
  boost::system::error_code ec;
  json::value v = json::parse(doc, ec);
  if (ec || !v.is_object()) return bad("not a JSON object");
  const auto& o = v.as_object();
  ComplianceDayCounts out;
  out.day = day;
  const auto* ms = o.if_contains("measured_ms");
  const auto* audit = o.if_contains("audit_verified");
  const auto* clusters = o.if_contains("clusters");
  if (!ms || !ms->is_int64() || !audit || !audit->is_bool() || !clusters ||
      !clusters->is_object()) {
    return bad("measured_ms, audit_verified or clusters missing");
  }
  out.measured_ms = ms->as_int64();
  out.audit_verified = audit->as_bool();
  for (const auto& [name, cv] : clusters->as_object()) {
    if (!cv.is_object()) return bad("clusters." + std::string(name) + " is not an object");
    ComplianceCounts c;
    const std::pair<const char*, int64_t*> fields[] = {
        {"nodes", &c.nodes},
        {"supported_branch", &c.supported_branch},
        {"drift_free", &c.drift_free},
        {"cve_free", &c.cve_free},
        {"firmware_at_profile", &c.firmware_at_profile},
        {"compliant", &c.compliant}};
    for (const auto& [key, field] : fields) {
      const auto* n = cv.as_object().if_contains(key);
      if (!n || !n->is_int64()) {
        return bad("clusters." + std::string(name) + "." + key + " is not a whole number");
      }
      *field = n->as_int64();
    }
    out.clusters.emplace(std::string(name), c);
  }
  return out;
}

ComplianceService::ComplianceService(FleetService& fleet, CompatService& compat, VulnService& vulns,
                                     DriftService& drift, store::ComplianceStore& store,
                                     store::AuditLog& audit, std::string secret_key,
                                     std::shared_ptr<Clock> clock)
    : fleet_(fleet),
      compat_(compat),
      vulns_(vulns),
      drift_(drift),
      store_(store),
      audit_log_(audit),
      secret_key_(std::move(secret_key)),
      clock_(std::move(clock)) {}

std::vector<NodeCompliance> ComplianceService::Nodes(const ComplianceFilter& filter) {
  std::map<std::string, Cluster> clusters;
  if (auto cs = fleet_.Clusters(); cs.ok()) {
    for (auto& c : cs.value()) clusters.emplace(c.name, std::move(c));
  }
  std::map<std::string, Pool> pools;
  if (auto ps = fleet_.Pools(); ps.ok()) {
    for (auto& p : ps.value()) pools.emplace(p.name, std::move(p));
  }
  // Each node's unresolved findings: the facts, and the firmware ones described.
  struct NodeDrift {
    std::set<std::string> facts, firmware;
  };
  std::unordered_map<std::string, NodeDrift> open;
  drift_.ForEachUnresolved(
      DriftFilter{.pool = filter.pool, .cluster = filter.cluster, .clusters = filter.clusters},
      [&](const DriftFinding& f) {
        NodeDrift& d = open[f.node];
        d.facts.insert(f.fact);
        if (FirmwareFact(f.fact)) {
          d.firmware.insert(f.fact + (f.gpu >= 0 ? " GPU " + std::to_string(f.gpu) : "") + " " +
                            f.actual + ", profile " + f.expected);
        }
      });
  const auto matrix = compat_.current().matrix;
  const std::string today = compat_.today();
  std::vector<NodeCompliance> out;
  for (const auto& v : vulns_.Nodes(VulnFilter{
           .pool = filter.pool, .cluster = filter.cluster, .clusters = filter.clusters})) {
    NodeCompliance n{v.node, v.cluster, v.pool};
    // Supported branch, for the pool's tier.
    std::string tier = "production";
    auto pool = pools.find(v.pool);
    auto cluster = clusters.find(v.cluster);
    if (pool != pools.end() && cluster != clusters.end()) {
      tier = EffectiveNeeds(cluster->second, pool->second).tier;
    }
    std::string branch = BranchProblem(*matrix, v.software.driver, v.verdict->branch, tier, today);
    n.supported_branch = branch.empty();
    if (!branch.empty()) n.reasons.push_back(std::move(branch));
    // Drift, and the firmware part of it.
    static const NodeDrift kNone;
    auto it = open.find(v.node);
    const NodeDrift& d = it != open.end() ? it->second : kNone;
    const std::set<std::string>& facts = d.facts;
    const std::set<std::string>& firmware = d.firmware;
    n.drift_free = facts.empty();
    if (!facts.empty()) {
      std::string why = "drift_free:";
      for (const auto& f : facts) why += " " + f;
      n.reasons.push_back(std::move(why));
    }
    // Critical and high CVEs (the verdict lists the highest first).
    std::vector<std::string> cves;
    for (const auto& e : v.verdict->cves) {
      if (e.cvss < kHighCvss) continue;
      char score[16];
      std::snprintf(score, sizeof score, "%.1f", e.cvss);
      cves.push_back(e.cve + " (" + score + ")");
    }
    n.cve_free = cves.empty();
    if (!cves.empty()) {
      std::string why = "cve_free: " + std::to_string(cves.size()) + " critical or high:";
      for (size_t i = 0; i < cves.size() && i < 3; ++i) why += " " + cves[i];
      if (cves.size() > 3) why += " ...";
      n.reasons.push_back(std::move(why));
    }
    n.firmware_at_profile = firmware.empty();
    if (!firmware.empty()) {
      std::string why = "firmware_at_profile:";
      for (const auto& f : firmware) why += " " + f + ";";
      why.pop_back();
      n.reasons.push_back(std::move(why));
    }
    if (!filter.check.empty() && n.Passes(filter.check)) continue;
    if (filter.failing && n.NodeChecksPass()) continue;
    out.push_back(std::move(n));
  }
  return out;
}

ComplianceDayCounts ComplianceService::Measure(const ComplianceFilter& filter,
                                               bool audit_verified) {
  ComplianceDayCounts day;
  day.measured_ms = clock_->NowMs();
  day.day = DayOf(day.measured_ms);
  day.audit_verified = audit_verified;
  if (auto cs = fleet_.Clusters(); cs.ok()) {
    for (const auto& c : cs.value()) {
      if (Allowed(filter.clusters, c.name) &&
          (filter.cluster.empty() || filter.cluster == c.name)) {
        day.clusters[c.name];
      }
    }
  }
  ComplianceFilter all{.cluster = filter.cluster, .clusters = filter.clusters};
  for (const auto& n : Nodes(all)) day.clusters[n.cluster].Add(n, audit_verified);
  return day;
}

AuditStatus ComplianceService::Audit() {
  std::lock_guard lock(audit_mu_);
  const int64_t now = clock_->NowMs();
  if (audit_.checked_ms != 0 && now - audit_.checked_ms < kAuditRecheckMs) return audit_;
  AuditStatus s;
  s.checked_ms = now;
  if (auto v = store::VerifyAudit(audit_log_, secret_key_); !v.ok()) {
    s.problem = "the audit log cannot be read: " + v.error().message;
  } else {
    s.verified = v->ok;
    s.records = v->verified;
    if (!v->ok) s.problem = "record " + std::to_string(v->first_bad_id) + ": " + v->problem;
  }
  audit_ = s;
  return s;
}

Result<ComplianceReport> ComplianceService::Report(const ComplianceFilter& filter, int days) {
  ComplianceReport out;
  out.audit = Audit();
  out.now = Measure(filter, out.audit.verified);
  days = std::clamp(days, 1, kComplianceRetentionDays);
  const std::string from = DayOf(out.now.measured_ms - (days - 1) * kDayMs);
  std::vector<store::ComplianceDay> stored;
  GF_TRY_ASSIGN(stored, store_.ListComplianceDays(from, out.now.day));
  for (const auto& s : stored) {
    if (s.day >= out.now.day) continue;  // today's is now's
    ComplianceDayCounts day;
    GF_TRY_ASSIGN(day, ParseComplianceDay(s.day, s.doc));
    // Only the clusters the filter allows, as they were that day.
    std::erase_if(day.clusters, [&](const auto& c) {
      return !Allowed(filter.clusters, c.first) ||
             (!filter.cluster.empty() && filter.cluster != c.first);
    });
    out.series.push_back(std::move(day));
  }
  out.series.push_back(out.now);
  return out;
}

Status ComplianceService::Record() {
  ComplianceDayCounts day = Measure({}, Audit().verified);
  GF_TRY(store_.PutComplianceDay({day.day, ComplianceDayJson(day), day.measured_ms}));
  auto pruned = store_.DeleteComplianceDaysBefore(
      DayOf(day.measured_ms - int64_t{kComplianceRetentionDays} * kDayMs));
  if (!pruned.ok()) return pruned.error();
  return {};
}

}  // namespace gpufleet::lifecycle
