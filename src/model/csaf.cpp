// Importing one of NVIDIA's CSAF 2.0 security advisories as a bulletin.

#include <boost/json.hpp>
#include <map>
#include <set>

#include "common/strings.h"
#include "model/bulletin_ids.h"
#include "model/bulletins.h"

namespace gpufleet {
namespace {

namespace json = boost::json;
using namespace bulletin_ids;

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

}  // namespace gpufleet
