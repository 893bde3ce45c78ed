#include "model/bulletins.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdlib>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "common/strings.h"
#include "model/bulletin_ids.h"
#include "model/yaml_input.h"

namespace gpufleet {
namespace embedded {
std::string_view security_bulletins();
}

namespace {

namespace json = boost::json;
using namespace bulletin_ids;

bool KnownComponent(std::string_view c) {
  return c == kComponentDriver || c == kComponentContainerToolkit || c == kComponentGpuOperator;
}

// ---- the YAML file ----------------------------------------------------------------------

Result<BulletinCve> ReadCve(const YamlFields& r, const YAML::Node& e, const std::string& at) {
  if (auto s = r.Only(e, at, {"id", "cvss", "cwe", "summary", "platform", "fixes"}); !s) {
    return s.error();
  }
  BulletinCve cve;
  auto id = r.String(e, at, "id", true);
  if (!id) return id.error();
  if (!IsCveId(*id)) return r.Bad(e["id"], at + ".id", "not a CVE id: " + Printable(*id, 80));
  cve.id = *id;
  const YAML::Node score = e["cvss"];
  double cvss = -1;
  if (!score.IsScalar() || !YAML::convert<double>::decode(score, cvss) || cvss < 0 || cvss > 10) {
    return r.Bad(score.IsDefined() ? score : e, at + ".cvss", "expected a score from 0 to 10");
  }
  cve.cvss = cvss;
  if (const YAML::Node cwe = e["cwe"]; cwe.IsDefined()) {
    if (!cwe.IsScalar() || !YAML::convert<int>::decode(cwe, cve.cwe) || cve.cwe <= 0) {
      return r.Bad(cwe, at + ".cwe", "expected a CWE number");
    }
  }
  auto summary = r.String(e, at, "summary", false);
  if (!summary) return summary.error();
  cve.summary = *summary;
  auto platform = r.String(e, at, "platform", false);
  if (!platform) return platform.error();
  if (!platform->empty()) {
    if (*platform != "bare-metal" && *platform != "vgpu") {
      return r.Bad(e["platform"], at + ".platform", "expected bare-metal or vgpu");
    }
    cve.platform = *platform;
  }
  const YAML::Node fixes = e["fixes"];
  if (fixes.IsDefined() && !fixes.IsSequence()) {
    return r.Bad(fixes, at + ".fixes", "expected a list");
  }
  for (size_t i = 0; fixes.IsDefined() && i < fixes.size(); ++i) {
    const YAML::Node f = fixes[i];
    const std::string fat = at + ".fixes[" + std::to_string(i) + "]";
    if (auto s = r.Only(f, fat, {"component", "branch", "fixed"}); !s) return s.error();
    BulletinFix fix;
    auto component = r.String(f, fat, "component", true);
    if (!component) return component.error();
    if (!KnownComponent(*component)) {
      return r.Bad(f["component"], fat + ".component",
                   "expected driver, container-toolkit or gpu-operator");
    }
    fix.component = *component;
    auto branch = r.String(f, fat, "branch", fix.component == kComponentDriver);
    if (!branch) return branch.error();
    if (!branch->empty()) {
      fix.branch = NormalizeBranch(*branch);
      if (fix.branch.empty())
        return r.Bad(f["branch"], fat + ".branch", "not a branch: " + *branch);
    }
    auto fixed = r.String(f, fat, "fixed", true);
    if (!fixed) return fixed.error();
    if (!DottedNumber(*fixed)) return r.Bad(f["fixed"], fat + ".fixed", "not a version: " + *fixed);
    if (fix.component == kComponentDriver && DriverBranch(*fixed) != fix.branch) {
      return r.Bad(f["fixed"], fat + ".fixed", *fixed + " is not on branch " + fix.branch);
    }
    fix.fixed = *fixed;
    cve.fixes.push_back(std::move(fix));
  }
  return cve;
}

}  // namespace

// ---- BulletinSet ------------------------------------------------------------------------

Result<BulletinSet> BulletinSet::Parse(std::string_view yaml, std::string_view source) {
  YamlFields r(source);
  auto loaded = LoadYamlInput(yaml, source);
  if (!loaded.ok()) return loaded.error();
  try {
    const YAML::Node root = std::move(loaded).value();
    if (auto s = r.Only(root, "$", {"version", "bulletins"}); !s) return s.error();
    if (root["version"].as<std::string>("") != "1") {
      return r.Bad(root["version"], "version", "expected 1");
    }
    const YAML::Node list = root["bulletins"];
    if (!list.IsSequence())
      return r.Bad(list.IsDefined() ? list : root, "bulletins", "expected a list");
    BulletinSet set;
    std::set<std::string> ids;
    for (size_t i = 0; i < list.size(); ++i) {
      const YAML::Node e = list[i];
      const std::string at = "bulletins[" + std::to_string(i) + "]";
      if (auto s = r.Only(e, at, {"id", "product", "published", "cves"}); !s) return s.error();
      Bulletin b;
      auto id = r.String(e, at, "id", true);
      if (!id) return id.error();
      if (!IsBulletinId(*id)) {
        return r.Bad(e["id"], at + ".id",
                     "'" + Printable(*id, 80) +
                         "' is not a bulletin id (letters, digits, '.', '_' and '-', at most 64)");
      }
      if (!ids.insert(*id).second) return r.Bad(e["id"], at + ".id", "listed twice: " + *id);
      b.id = *id;
      auto product = r.String(e, at, "product", true);
      if (!product) return product.error();
      b.product = *product;
      auto published = r.String(e, at, "published", true);
      if (!published) return published.error();
      if (!IsDate(*published))
        return r.Bad(e["published"], at + ".published", "expected YYYY-MM-DD");
      b.published = *published;
      const YAML::Node cves = e["cves"];
      if (!cves.IsSequence())
        return r.Bad(cves.IsDefined() ? cves : e, at + ".cves", "expected a list");
      for (size_t j = 0; j < cves.size(); ++j) {
        auto cve = ReadCve(r, cves[j], at + ".cves[" + std::to_string(j) + "]");
        if (!cve) return cve.error();
        b.cves.push_back(std::move(*cve));
      }
      set.Put(std::move(b));
    }
    return set;
  } catch (const YAML::Exception& e) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(source) + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

std::string_view BulletinSet::BuiltinText() { return embedded::security_bulletins(); }

std::shared_ptr<const BulletinSet> BulletinSet::Builtin() {
  static const std::shared_ptr<const BulletinSet> builtin = [] {
    auto parsed = Parse(embedded::security_bulletins(), "data/security-bulletins.yaml");
    if (!parsed) std::abort();  // the build embeds a file its tests parse
    return std::make_shared<const BulletinSet>(std::move(*parsed));
  }();
  return builtin;
}

void BulletinSet::Put(Bulletin b) {
  std::erase_if(bulletins_, [&](const Bulletin& x) { return x.id == b.id; });
  auto at = std::upper_bound(bulletins_.begin(), bulletins_.end(), b,
                             [](const Bulletin& x, const Bulletin& y) {
                               return std::tie(x.published, x.id) < std::tie(y.published, y.id);
                             });
  bulletins_.insert(at, std::move(b));
}

const Bulletin* BulletinSet::Find(std::string_view id) const {
  for (const auto& b : bulletins_) {
    if (b.id == id) return &b;
  }
  return nullptr;
}

// ---- judging a node ---------------------------------------------------------------------

VulnVerdict JudgeNode(const BulletinSet& bulletins, const CompatMatrix& matrix,
                      const NodeSoftware& software, std::string_view today) {
  VulnVerdict out;
  out.branch = DriverBranch(software.driver);
  const CompatBranch* branch = out.branch.empty() ? nullptr : matrix.FindBranch(out.branch);
  const bool unsupported = !out.branch.empty() && (branch == nullptr || branch->EndOfLife(today));
  std::map<std::string, std::string> fix_by_component;  // the highest fixed version needed
  for (const auto& b : bulletins.bulletins()) {
    // No row for the node's branch: it was left out because the branch was already end of
    // life when the bulletin came out (or the matrix does not know it), or it is not affected.
    const bool eol_then =
        !out.branch.empty() && (branch == nullptr || branch->EndOfLife(b.published));
    for (const auto& cve : b.cves) {
      if (cve.platform != "bare-metal") continue;
      bool driver_row = false, driver_named = false;
      for (const auto& f : cve.fixes) {
        const std::string_view have = f.component == kComponentDriver
                                          ? std::string_view(software.driver)
                                      : f.component == kComponentContainerToolkit
                                          ? std::string_view(software.container_toolkit)
                                          : std::string_view();
        if (f.component == kComponentDriver) driver_named = true;
        if (have.empty()) continue;
        if (f.component == kComponentDriver && f.branch != out.branch) continue;
        if (f.component == kComponentDriver) driver_row = true;
        if (CompareVersions(have, f.fixed) >= 0) continue;
        out.cves.push_back({cve.id, cve.cvss, f.component, b.id, f.fixed});
        std::string& need = fix_by_component[f.component];
        if (need.empty() || CompareVersions(f.fixed, need) > 0) need = f.fixed;
      }
      if (driver_named && !driver_row && eol_then && !software.driver.empty()) {
        out.cves.push_back(
            {cve.id, cve.cvss, std::string(kComponentDriver), b.id, std::string(kMoveBranch)});
      }
    }
  }
  // Highest score first, ties in bulletin order: the indices are sorted, and each exposure is
  // moved once (sorting the values themselves moved their four strings at every step).
  std::vector<size_t> order(out.cves.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return out.cves[a].cvss > out.cves[b].cvss; });
  std::vector<Exposure> sorted;
  sorted.reserve(order.size());
  for (size_t i : order) sorted.push_back(std::move(out.cves[i]));
  out.cves = std::move(sorted);
  for (const auto& e : out.cves) out.max_cvss = std::max(out.max_cvss, e.cvss);
  if (unsupported) {
    out.status = "unsupported_branch";
    out.fix = std::string(kMoveBranch);
  } else if (!out.cves.empty()) {
    out.status = "exposed";
  }
  for (const auto& [component, version] : fix_by_component) {
    if (component == kComponentDriver) {
      out.fixed_driver = version;
      if (unsupported) continue;
    }
    if (!out.fix.empty()) out.fix += ", ";
    out.fix += component + " " + version;
  }
  return out;
}

std::string LatestFixedDriver(const BulletinSet& bulletins, std::string_view branch) {
  std::string latest;
  for (const auto& b : bulletins.bulletins()) {
    for (const auto& cve : b.cves) {
      for (const auto& f : cve.fixes) {
        if (f.component != kComponentDriver || f.branch != branch) continue;
        if (latest.empty() || CompareVersions(f.fixed, latest) > 0) latest = f.fixed;
      }
    }
  }
  return latest;
}

FixTarget ChooseFixTarget(const BulletinSet& bulletins, const CompatMatrix& matrix,
                          std::string_view pinned_branch, std::string_view current_branch,
                          std::string_view today) {
  auto supported = [&](std::string_view branch) {
    const CompatBranch* b = branch.empty() ? nullptr : matrix.FindBranch(branch);
    return b != nullptr && !b->EndOfLife(today);
  };
  FixTarget out;
  if (supported(pinned_branch)) {
    out.branch = std::string(pinned_branch);
    out.why = "the pool pins " + out.branch;
  } else if (supported(current_branch)) {
    out.branch = std::string(current_branch);
    out.why = "the branch the pool's nodes run";
  } else {
    // The newest supported long-term branch that a bulletin has fixes for.
    for (const auto& b : matrix.branches()) {
      if (b.type != "ltsb" || b.EndOfLife(today) || LatestFixedDriver(bulletins, b.branch).empty())
        continue;
      if (out.branch.empty() ||
          std::atoi(b.branch.c_str() + 1) > std::atoi(out.branch.c_str() + 1)) {
        out.branch = b.branch;
      }
    }
    std::string from = std::string(!pinned_branch.empty() ? pinned_branch : current_branch);
    out.why = (from.empty() ? std::string("no supported branch") : from + " is end of life") +
              ": the newest supported long-term branch";
  }
  if (!out.branch.empty()) out.target = LatestFixedDriver(bulletins, out.branch);
  return out;
}

}  // namespace gpufleet
