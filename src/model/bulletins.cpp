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
#include "model/yaml_input.h"

namespace gpufleet {
namespace embedded {
std::string_view security_bulletins();
}

namespace {

namespace json = boost::json;

// Fixed shapes are checked by hand: no regular expression runs over a document's text.
bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool IsDate(std::string_view s) {  // YYYY-MM-DD
  return s.size() == 10 && s[4] == '-' && s[7] == '-' && AllDigits(s.substr(0, 4)) &&
         AllDigits(s.substr(5, 2)) && AllDigits(s.substr(8, 2));
}

// CVE-YYYY-NNNN..., the sequence number of 4 to 19 digits (MITRE's are at most 7 today).
bool IsCveId(std::string_view s) {
  if (s.size() < 13 || s.size() > 28 || s.substr(0, 4) != "CVE-" || s[8] != '-') return false;
  return AllDigits(s.substr(4, 4)) && AllDigits(s.substr(9));
}

// A bulletin's id (a CSAF tracking.id, NVIDIA's "5614"-style numbers): it becomes a key and a
// part of URLs, so letters, digits, '.', '_' and '-' only, at most 64 of them.
bool IsBulletinId(std::string_view s) {
  return !s.empty() && s.size() <= 64 &&
         std::all_of(s.begin(), s.end(),
                     [](char c) {
                       return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
                     }) &&
         s != "." && s != "..";
}

bool KnownComponent(std::string_view c) {
  return c == kComponentDriver || c == kComponentContainerToolkit || c == kComponentGpuOperator;
}

// ---- the YAML file ----------------------------------------------------------------------

class YamlReader {
 public:
  explicit YamlReader(std::string_view source) : source_(source) {}

  Error Bad(const YAML::Node& node, const std::string& path, const std::string& what) const {
    std::string where(source_);
    if (node.IsDefined() && node.Mark().line >= 0) {
      where += ":" + std::to_string(node.Mark().line + 1);
    }
    return MakeError(ErrorCode::kInvalidArgument, where + ": " + path + ": " + what);
  }

  Status Keys(const YAML::Node& map, const std::string& path,
              std::initializer_list<std::string_view> allowed) const {
    if (!map.IsMap()) return Bad(map, path, "expected a mapping");
    for (const auto& kv : map) {
      const std::string key = kv.first.as<std::string>("");
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        return Bad(kv.first, path + "." + key, "unknown field");
      }
    }
    return {};
  }

  Result<std::string> Str(const YAML::Node& map, const std::string& path, const char* key,
                          bool required) const {
    const YAML::Node v = map[key];
    if (!v.IsDefined() || v.IsNull()) {
      if (required) return Bad(map, path + "." + key, "missing");
      return std::string();
    }
    if (!v.IsScalar()) return Bad(v, path + "." + key, "expected a string");
    return v.as<std::string>();
  }

 private:
  std::string_view source_;
};

Result<BulletinCve> ReadCve(const YamlReader& r, const YAML::Node& e, const std::string& at) {
  if (auto s = r.Keys(e, at, {"id", "cvss", "cwe", "summary", "platform", "fixes"}); !s) {
    return s.error();
  }
  BulletinCve cve;
  auto id = r.Str(e, at, "id", true);
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
  auto summary = r.Str(e, at, "summary", false);
  if (!summary) return summary.error();
  cve.summary = *summary;
  auto platform = r.Str(e, at, "platform", false);
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
    if (auto s = r.Keys(f, fat, {"component", "branch", "fixed"}); !s) return s.error();
    BulletinFix fix;
    auto component = r.Str(f, fat, "component", true);
    if (!component) return component.error();
    if (!KnownComponent(*component)) {
      return r.Bad(f["component"], fat + ".component",
                   "expected driver, container-toolkit or gpu-operator");
    }
    fix.component = *component;
    auto branch = r.Str(f, fat, "branch", fix.component == kComponentDriver);
    if (!branch) return branch.error();
    if (!branch->empty()) {
      fix.branch = NormalizeBranch(*branch);
      if (fix.branch.empty())
        return r.Bad(f["branch"], fat + ".branch", "not a branch: " + *branch);
    }
    auto fixed = r.Str(f, fat, "fixed", true);
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

// ---- CSAF -------------------------------------------------------------------------------

// A JSON document read with the path of each value, so that an error says where it is.
class CsafReader {
 public:
  Error Bad(const std::string& path, const std::string& what) const {
    return MakeError(ErrorCode::kInvalidArgument, "CSAF " + path + ": " + what);
  }
  Result<const json::object*> Obj(const json::value& v, const std::string& path) const {
    if (!v.is_object()) return Bad(path, "expected an object");
    return &v.get_object();
  }
  Result<const json::array*> Arr(const json::object& o, const std::string& path, const char* key,
                                 bool required) const {
    const json::value* v = o.if_contains(key);
    if (v == nullptr || v->is_null()) {
      if (required) return Bad(path + "." + key, "missing");
      return static_cast<const json::array*>(nullptr);
    }
    if (!v->is_array()) return Bad(path + "." + key, "expected an array");
    return &v->get_array();
  }
  Result<std::string> Str(const json::object& o, const std::string& path, const char* key,
                          bool required) const {
    const json::value* v = o.if_contains(key);
    if (v == nullptr || v->is_null()) {
      if (required) return Bad(path + "." + key, "missing");
      return std::string();
    }
    if (!v->is_string()) return Bad(path + "." + key, "expected a string");
    return std::string(v->get_string());
  }
};

// One product of the tree with what its ancestors say about it.
struct CsafProduct {
  std::string product_name;  // the product_version branch's name: "Tesla", "NVIDIA GPU Operator"
  std::string architecture;  // the enclosing architecture branch: "Linux(R580)", "All"
  std::string version;       // the product's own name: "580.95.05", "All driver versions ..."
};

Status WalkTree(const CsafReader& r, const json::array& branches, const std::string& path,
                const std::string& architecture, std::map<std::string, CsafProduct>& out,
                int depth) {
  if (depth > 16) return r.Bad(path, "product tree nested too deep");
  for (size_t i = 0; i < branches.size(); ++i) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    auto b = r.Obj(branches[i], at);
    if (!b) return b.error();
    auto category = r.Str(**b, at, "category", true);
    if (!category) return category.error();
    auto name = r.Str(**b, at, "name", true);
    if (!name) return name.error();
    const std::string arch = *category == "architecture" ? *name : architecture;
    if (const json::value* p = (*b)->if_contains("product")) {
      auto product = r.Obj(*p, at + ".product");
      if (!product) return product.error();
      auto id = r.Str(**product, at + ".product", "product_id", true);
      if (!id) return id.error();
      auto pname = r.Str(**product, at + ".product", "name", true);
      if (!pname) return pname.error();
      out[*id] = CsafProduct{*name, arch, *pname};
    }
    auto children = r.Arr(**b, at, "branches", false);
    if (!children) return children.error();
    if (*children != nullptr) {
      if (auto s = WalkTree(r, **children, at + ".branches", arch, out, depth + 1); !s) return s;
    }
  }
  return {};
}

// The Linux data-center driver row, a container-stack row, a vGPU row, or nothing.
enum class RowKind { kSkip, kBareMetal, kVgpu };

RowKind Classify(const CsafProduct& p, BulletinFix& fix) {
  // "Linux(R580)": the branch of a data-center driver row.
  const std::string_view arch = p.architecture;
  const bool linux_arch = arch.rfind("Linux", 0) == 0;
  if (p.product_name == "Tesla" && arch.size() > 8 && arch.substr(0, 7) == "Linux(R" &&
      arch.back() == ')' && AllDigits(arch.substr(7, arch.size() - 8))) {
    fix = {std::string(kComponentDriver), "R" + std::string(arch.substr(7, arch.size() - 8)),
           p.version};
    return RowKind::kBareMetal;
  }
  if ((p.product_name == "Guest driver" || p.product_name == "Virtual GPU Manager") &&
      (linux_arch || p.architecture.find("vGPU") != std::string::npos ||
       p.architecture.find("Linux") != std::string::npos)) {
    return RowKind::kVgpu;
  }
  if (p.architecture == "All" || linux_arch) {
    if (p.product_name == "NVIDIA Container Toolkit") {
      fix = {std::string(kComponentContainerToolkit), "", p.version};
      return RowKind::kBareMetal;
    }
    if (p.product_name == "NVIDIA GPU Operator") {
      fix = {std::string(kComponentGpuOperator), "", p.version};
      return RowKind::kBareMetal;
    }
  }
  return RowKind::kSkip;
}

// The CVSS of one entry of `scores`: v3's base score, else v4's; -1 when it has neither.
Result<double> ScoreOf(const CsafReader& r, const json::object& s, const std::string& at) {
  double best = -1;
  for (const char* key : {"cvss_v4", "cvss_v3"}) {  // v3 read last: it wins where both exist
    const json::value* v = s.if_contains(key);
    if (v == nullptr) continue;
    const std::string path = at + "." + key;
    auto o = r.Obj(*v, path);
    if (!o) return o.error();
    const json::value* base = (*o)->if_contains("baseScore");
    if (base == nullptr) return r.Bad(path + ".baseScore", "missing");
    if (!base->is_number()) return r.Bad(path + ".baseScore", "not a number");
    const double score = base->to_number<double>();
    if (score < 0 || score > 10) return r.Bad(path + ".baseScore", "not from 0 to 10");
    best = score;
  }
  return best;
}

}  // namespace

// ---- BulletinSet ------------------------------------------------------------------------

Result<BulletinSet> BulletinSet::Parse(std::string_view yaml, std::string_view source) {
  YamlReader r(source);
  auto loaded = LoadYamlInput(yaml, source);
  if (!loaded.ok()) return loaded.error();
  try {
    const YAML::Node root = std::move(loaded).value();
    if (auto s = r.Keys(root, "$", {"version", "bulletins"}); !s) return s.error();
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
      if (auto s = r.Keys(e, at, {"id", "product", "published", "cves"}); !s) return s.error();
      Bulletin b;
      auto id = r.Str(e, at, "id", true);
      if (!id) return id.error();
      if (!IsBulletinId(*id)) {
        return r.Bad(e["id"], at + ".id",
                     "'" + Printable(*id, 80) +
                         "' is not a bulletin id (letters, digits, '.', '_' and '-', at most 64)");
      }
      if (!ids.insert(*id).second) return r.Bad(e["id"], at + ".id", "listed twice: " + *id);
      b.id = *id;
      auto product = r.Str(e, at, "product", true);
      if (!product) return product.error();
      b.product = *product;
      auto published = r.Str(e, at, "published", true);
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

// ---- CSAF import ------------------------------------------------------------------------

Result<Bulletin> ParseCsafAdvisory(std::string_view json_text) {
  CsafReader r;
  json::value doc;
  try {
    doc = json::parse(json_text);
  } catch (const std::exception& e) {
    return r.Bad("$", std::string("not JSON: ") + e.what());
  }
  auto root = r.Obj(doc, "$");
  if (!root) return root.error();
  const json::value* dv = (*root)->if_contains("document");
  if (dv == nullptr) return r.Bad("$.document", "missing");
  auto document = r.Obj(*dv, "$.document");
  if (!document) return document.error();
  auto version = r.Str(**document, "$.document", "csaf_version", true);
  if (!version) return version.error();
  if (*version != "2.0") return r.Bad("$.document.csaf_version", "expected 2.0, not " + *version);
  const json::value* tv = (*document)->if_contains("tracking");
  if (tv == nullptr) return r.Bad("$.document.tracking", "missing");
  auto tracking = r.Obj(*tv, "$.document.tracking");
  if (!tracking) return tracking.error();
  Bulletin b;
  b.origin = "imported";
  auto id = r.Str(**tracking, "$.document.tracking", "id", true);
  if (!id) return id.error();
  if (!IsBulletinId(*id)) {
    return r.Bad("$.document.tracking.id",
                 "'" + Printable(*id, 80) +
                     "' is not a bulletin id (letters, digits, '.', '_' and '-', at most 64)");
  }
  b.id = *id;
  auto released = r.Str(**tracking, "$.document.tracking", "initial_release_date", true);
  if (!released) return released.error();
  if (released->size() < 10 || !IsDate(std::string_view(*released).substr(0, 10))) {
    return r.Bad("$.document.tracking.initial_release_date", "not a date: " + *released);
  }
  b.published = released->substr(0, 10);
  auto title = r.Str(**document, "$.document", "title", false);
  if (!title) return title.error();
  // "Security Bulletin: NVIDIA GPU Display Driver - October 2025" -> "NVIDIA GPU Display Driver"
  std::string product = *title;
  if (auto colon = product.find(": "); colon != std::string::npos)
    product = product.substr(colon + 2);
  if (auto dash = product.rfind(" - "); dash != std::string::npos) product.resize(dash);
  b.product = product;

  const json::value* pt = (*root)->if_contains("product_tree");
  if (pt == nullptr) return r.Bad("$.product_tree", "missing");
  auto tree = r.Obj(*pt, "$.product_tree");
  if (!tree) return tree.error();
  auto branches = r.Arr(**tree, "$.product_tree", "branches", true);
  if (!branches) return branches.error();
  std::map<std::string, CsafProduct> products;
  if (auto s = WalkTree(r, **branches, "$.product_tree.branches", "", products, 0); !s) {
    return s.error();
  }

  auto vulns = r.Arr(**root, "$", "vulnerabilities", true);
  if (!vulns) return vulns.error();
  for (size_t i = 0; i < (*vulns)->size(); ++i) {
    const std::string at = "$.vulnerabilities[" + std::to_string(i) + "]";
    auto v = r.Obj((**vulns)[i], at);
    if (!v) return v.error();
    BulletinCve cve;
    auto cve_id = r.Str(**v, at, "cve", true);
    if (!cve_id) return cve_id.error();
    if (!IsCveId(*cve_id)) return r.Bad(at + ".cve", "not a CVE id: " + Printable(*cve_id, 80));
    cve.id = *cve_id;
    if (const json::value* cwe = (*v)->if_contains("cwe")) {
      auto co = r.Obj(*cwe, at + ".cwe");
      if (!co) return co.error();
      auto cid = r.Str(**co, at + ".cwe", "id", false);
      if (!cid) return cid.error();
      if (cid->rfind("CWE-", 0) == 0) cve.cwe = std::atoi(cid->c_str() + 4);
    }
    if (auto notes = r.Arr(**v, at, "notes", false); !notes) {
      return notes.error();
    } else if (*notes != nullptr) {
      for (const auto& n : **notes) {
        if (!n.is_object()) continue;
        const json::value* cat = n.get_object().if_contains("category");
        const json::value* text = n.get_object().if_contains("text");
        if (cat != nullptr && cat->is_string() && cat->get_string() == "summary" &&
            text != nullptr && text->is_string()) {
          cve.summary = std::string(text->get_string());
          break;
        }
      }
    }
    auto scores = r.Arr(**v, at, "scores", true);
    if (!scores) return scores.error();
    double cvss = -1;
    for (size_t j = 0; j < (*scores)->size(); ++j) {
      const std::string sat = at + ".scores[" + std::to_string(j) + "]";
      auto s = r.Obj((**scores)[j], sat);
      if (!s) return s.error();
      auto score = ScoreOf(r, **s, sat);
      if (!score) return score.error();
      cvss = std::max(cvss, *score);
    }
    if (cvss < 0) return r.Bad(at + ".scores", "no cvss_v3 or cvss_v4 score");
    cve.cvss = cvss;

    const json::value* ps = (*v)->if_contains("product_status");
    if (ps == nullptr) return r.Bad(at + ".product_status", "missing");
    auto status = r.Obj(*ps, at + ".product_status");
    if (!status) return status.error();
    bool vgpu = false;
    for (const char* key : {"fixed", "known_affected"}) {
      auto ids = r.Arr(**status, at + ".product_status", key, false);
      if (!ids) return ids.error();
      if (*ids == nullptr) continue;
      for (size_t k = 0; k < (*ids)->size(); ++k) {
        const std::string kat = at + ".product_status." + key + "[" + std::to_string(k) + "]";
        const json::value& pid = (**ids)[k];
        if (!pid.is_string()) return r.Bad(kat, "expected a product id");
        auto found = products.find(std::string(pid.get_string()));
        if (found == products.end()) {
          return r.Bad(kat,
                       "product " + std::string(pid.get_string()) + " is not in the product tree");
        }
        BulletinFix fix;
        const RowKind kind = Classify(found->second, fix);
        if (kind == RowKind::kVgpu) vgpu = true;
        if (kind != RowKind::kBareMetal || std::string_view(key) != "fixed") continue;
        if (!DottedNumber(fix.fixed)) {
          return r.Bad(kat, "the fixed version of " + std::string(pid.get_string()) +
                                " is not a version: " + fix.fixed);
        }
        if (fix.component == kComponentDriver && DriverBranch(fix.fixed) != fix.branch) {
          return r.Bad(kat, fix.fixed + " is not on branch " + fix.branch);
        }
        if (std::find(cve.fixes.begin(), cve.fixes.end(), fix) == cve.fixes.end()) {
          cve.fixes.push_back(std::move(fix));
        }
      }
    }
    if (cve.fixes.empty()) {
      if (!vgpu) continue;  // Windows, GeForce, RTX only: nothing a data-center node runs
      cve.platform = "vgpu";
    }
    b.cves.push_back(std::move(cve));
  }
  if (b.cves.empty()) {
    return r.Bad("$.vulnerabilities",
                 "no CVE with a Linux data-center driver, Container Toolkit, GPU Operator or "
                 "vGPU row");
  }
  return b;
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
