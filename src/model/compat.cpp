#include "model/compat.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "model/yaml_input.h"

namespace gpufleet {
namespace embedded {
std::string_view compat_matrix();
}

namespace {

bool AllDigits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// Reads one table of the file: {source, rows}.
class Reader : public YamlFields {
 public:
  using YamlFields::YamlFields;

  Result<std::string> Version(const YAML::Node& map, const std::string& path, const char* key,
                              bool required) const {
    std::string v;
    GF_TRY_ASSIGN(v, String(map, path, key, required));
    if (!v.empty() && !DottedNumber(v)) {
      return Bad(map[key], path + "." + key, "'" + v + "' must be a version such as 580.95.05");
    }
    return v;
  }

  // Each row of table `name` as a mapping with only `keys`, handed to `each` with its path.
  template <class F>
  Status Rows(const YAML::Node& root, const char* name, std::string& source,
              std::initializer_list<std::string_view> keys, F each) const {
    YAML::Node rows;
    GF_TRY_ASSIGN(rows, Table(root, name, source));
    for (size_t i = 0; i < rows.size(); ++i) {
      const YAML::Node e = rows[i];
      std::string at = std::string(name) + ".rows[" + std::to_string(i) + "]";
      if (!e.IsMap()) return Bad(e, at, "must be a mapping");
      GF_TRY(Only(e, at, keys));
      GF_TRY(each(e, at));
    }
    return {};
  }

  // The table's rows, after checking it is {source, rows: [...]}.
  Result<YAML::Node> Table(const YAML::Node& root, const char* name, std::string& source) const {
    auto t = root[name];
    if (!t) return Bad(root, name, "is required");
    if (!t.IsMap()) return Bad(t, name, "must be a mapping with source and rows");
    GF_TRY(Only(t, name, {"source", "rows"}));
    GF_TRY_ASSIGN(source, String(t, name, "source", true));
    auto rows = t["rows"];
    if (!rows || !rows.IsSequence())
      return Bad(rows ? rows : t, std::string(name) + ".rows", "must be a list");
    return rows;
  }
};

}  // namespace

bool DottedNumber(std::string_view s) {
  if (s.empty() || s.front() == '.' || s.back() == '.') return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '.') {
      if (s[i - 1] == '.') return false;
    } else if (!std::isdigit(static_cast<unsigned char>(s[i]))) {
      return false;
    }
  }
  return true;
}

int CompareVersions(std::string_view a, std::string_view b) {
  while (!a.empty() || !b.empty()) {
    size_t ea = a.find('.'), eb = b.find('.');
    std::string_view fa = a.substr(0, ea), fb = b.substr(0, eb);
    a = ea == std::string_view::npos ? std::string_view() : a.substr(ea + 1);
    b = eb == std::string_view::npos ? std::string_view() : b.substr(eb + 1);
    if (fa.empty()) fa = "0";
    if (fb.empty()) fb = "0";
    if (AllDigits(fa) && AllDigits(fb)) {
      fa.remove_prefix(std::min(fa.find_first_not_of('0'), fa.size() - 1));
      fb.remove_prefix(std::min(fb.find_first_not_of('0'), fb.size() - 1));
      if (fa.size() != fb.size()) return fa.size() < fb.size() ? -1 : 1;
    }
    if (int c = fa.compare(fb); c != 0) return c < 0 ? -1 : 1;
  }
  return 0;
}

std::string DriverBranch(std::string_view version) {
  std::string_view major = version.substr(0, version.find('.'));
  if (!AllDigits(major)) return "";
  return "R" + std::string(major);
}

std::string NormalizeBranch(std::string_view text) {
  if (!text.empty() && (text.front() == 'R' || text.front() == 'r')) text.remove_prefix(1);
  if (!AllDigits(text)) return "";
  return "R" + std::string(text);
}

CompatNeeds ToNeeds(const Lifecycle& l) {
  CompatNeeds n;
  if (!l.tier.empty()) n.tier = l.tier;
  n.cuda = l.cuda;
  n.gpu_operator = l.gpu_operator;
  n.kubernetes = l.kubernetes;
  n.driver_branch = l.driver_branch;
  return n;
}

CompatNeeds EffectiveNeeds(const Cluster& cluster, const Pool& pool) {
  Lifecycle l = pool.lifecycle;
  const Lifecycle& c = cluster.lifecycle;
  for (auto [mine, theirs] : {std::pair{&l.tier, &c.tier},
                              {&l.cuda, &c.cuda},
                              {&l.gpu_operator, &c.gpu_operator},
                              {&l.kubernetes, &c.kubernetes},
                              {&l.driver_branch, &c.driver_branch}}) {
    if (mine->empty()) *mine = *theirs;
  }
  return ToNeeds(l);
}

std::string ValidateNeeds(const CompatNeeds& needs) {
  if (needs.tier != "production" && needs.tier != "staging" && needs.tier != "development") {
    return "tier: '" + needs.tier + "' is not one of production, staging, development";
  }
  if (!needs.cuda.empty() && !DottedNumber(needs.cuda)) {
    return "requires.cuda: '" + needs.cuda + "' must be a CUDA version such as 12.8";
  }
  if (!needs.kubernetes.empty() && !DottedNumber(needs.kubernetes)) {
    return "requires.kubernetes: '" + needs.kubernetes + "' must be a version such as 1.33";
  }
  if (!needs.gpu_operator.empty()) {
    std::string_view v = needs.gpu_operator;
    if (v.front() == 'v') v.remove_prefix(1);
    if (!DottedNumber(v)) {
      return "requires.gpu_operator: '" + needs.gpu_operator +
             "' must be a GPU Operator release such as v25.10.1";
    }
  }
  if (!needs.driver_branch.empty() && NormalizeBranch(needs.driver_branch).empty()) {
    return "driver_branch: '" + needs.driver_branch + "' must be a branch such as R580";
  }
  return "";
}

Result<std::shared_ptr<const CompatMatrix>> CompatMatrix::Parse(std::string_view yaml,
                                                                std::string_view source) {
  auto m = std::make_shared<CompatMatrix>();
  Reader r(source);
  auto loaded = LoadYamlInput(yaml, source);
  if (!loaded.ok()) return loaded.error();
  try {
    YAML::Node root = std::move(loaded).value();
    if (!root.IsMap()) return r.Bad(root, "(document)", "must be a mapping");
    GF_TRY(r.Only(root, "(document)",
                  {"version", "branches", "cuda", "architectures", "models", "gpu_operator"}));
    if (root["version"].as<std::string>("") != "1") {
      return r.Bad(root["version"], "version", "must be 1");
    }
    std::set<std::string> seen;
    GF_TRY(r.Rows(
        root, "branches", m->branches_source_, {"branch", "type", "eol", "cuda_major"},
        [&](const YAML::Node& e, const std::string& at) -> Status {
          CompatBranch b;
          std::string name;
          GF_TRY_ASSIGN(name, r.String(e, at, "branch", true));
          b.branch = NormalizeBranch(name);
          if (b.branch.empty())
            return r.Bad(e["branch"], at + ".branch", "'" + name + "' must be R and digits");
          if (!seen.insert(b.branch).second)
            return r.Bad(e["branch"], at + ".branch", b.branch + " is listed twice");
          GF_TRY_ASSIGN(b.type, r.String(e, at, "type", true));
          if (b.type != "pb" && b.type != "ltsb" && b.type != "nfb") {
            return r.Bad(e["type"], at + ".type", "'" + b.type + "' is not one of pb, ltsb, nfb");
          }
          if (auto eol = e["eol"]) {
            std::string v = eol.as<std::string>("");
            if (v == "true") {
              b.eol_undated = true;
            } else if (v.size() != 7 || v[4] != '-' || !AllDigits(v.substr(0, 4)) ||
                       !AllDigits(v.substr(5))) {
              return r.Bad(eol, at + ".eol", "'" + v + "' must be YYYY-MM or true");
            } else {
              b.eol = v;
            }
          }
          if (auto c = e["cuda_major"]) b.cuda_major = c.as<int>(0);
          m->branches_.push_back(std::move(b));
          return {};
        }));
    seen.clear();
    GF_TRY(r.Rows(root, "cuda", m->cuda_source_, {"cuda", "min_driver"},
                  [&](const YAML::Node& e, const std::string& at) -> Status {
                    CompatCuda c;
                    GF_TRY_ASSIGN(c.cuda, r.Version(e, at, "cuda", true));
                    GF_TRY_ASSIGN(c.min_driver, r.Version(e, at, "min_driver", true));
                    if (!seen.insert(c.cuda).second)
                      return r.Bad(e["cuda"], at + ".cuda", c.cuda + " is listed twice");
                    m->cuda_.push_back(std::move(c));
                    return {};
                  }));
    GF_TRY(r.Rows(root, "architectures", m->architectures_source_,
                  {"architecture", "min_driver", "last_branch"},
                  [&](const YAML::Node& e, const std::string& at) -> Status {
                    CompatArchitecture a;
                    GF_TRY_ASSIGN(a.architecture, r.String(e, at, "architecture", true));
                    GF_TRY_ASSIGN(a.min_driver, r.Version(e, at, "min_driver", false));
                    std::string last;
                    GF_TRY_ASSIGN(last, r.String(e, at, "last_branch", false));
                    if (!last.empty()) {
                      a.last_branch = NormalizeBranch(last);
                      if (a.last_branch.empty()) {
                        return r.Bad(e["last_branch"], at + ".last_branch",
                                     "'" + last + "' must be R and digits");
                      }
                    }
                    m->architectures_.push_back(std::move(a));
                    return {};
                  }));
    GF_TRY(r.Rows(root, "models", m->models_source_,
                  {"model", "min_driver", "min_vbios", "min_inforom"},
                  [&](const YAML::Node& e, const std::string& at) -> Status {
                    CompatModel mo;
                    GF_TRY_ASSIGN(mo.model, r.String(e, at, "model", true));
                    GF_TRY_ASSIGN(mo.min_driver, r.Version(e, at, "min_driver", false));
                    GF_TRY_ASSIGN(mo.min_vbios, r.String(e, at, "min_vbios", false));
                    GF_TRY_ASSIGN(mo.min_inforom, r.String(e, at, "min_inforom", false));
                    m->models_.push_back(std::move(mo));
                    return {};
                  }));
    GF_TRY(
        r.Rows(root, "gpu_operator", m->operators_source_,
               {"version", "drivers", "container_toolkit", "kubernetes"},
               [&](const YAML::Node& e, const std::string& at) -> Status {
                 CompatOperator o;
                 GF_TRY_ASSIGN(o.version, r.String(e, at, "version", true));
                 auto drivers = e["drivers"];
                 if (!drivers || !drivers.IsSequence() || drivers.size() == 0) {
                   return r.Bad(drivers ? drivers : e, at + ".drivers", "must be a non-empty list");
                 }
                 for (const auto& d : drivers) {
                   std::string v = d.as<std::string>("");
                   if (!DottedNumber(v))
                     return r.Bad(d, at + ".drivers", "'" + v + "' is not a driver version");
                   o.drivers.push_back(v);
                 }
                 GF_TRY_ASSIGN(o.container_toolkit, r.Version(e, at, "container_toolkit", false));
                 if (auto k = e["kubernetes"]) {
                   if (!k.IsMap()) return r.Bad(k, at + ".kubernetes", "must be {min, max}");
                   GF_TRY(r.Only(k, at + ".kubernetes", {"min", "max"}));
                   GF_TRY_ASSIGN(o.kubernetes_min, r.Version(k, at + ".kubernetes", "min", true));
                   GF_TRY_ASSIGN(o.kubernetes_max, r.Version(k, at + ".kubernetes", "max", true));
                 }
                 m->operators_.push_back(std::move(o));
                 return {};
               }));
  } catch (const YAML::Exception& e) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(source) + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return std::shared_ptr<const CompatMatrix>(std::move(m));
}

std::string_view CompatMatrix::BuiltinText() { return embedded::compat_matrix(); }

std::shared_ptr<const CompatMatrix> CompatMatrix::Builtin() {
  static const std::shared_ptr<const CompatMatrix> builtin = [] {
    auto parsed = Parse(embedded::compat_matrix(), "data/compat.yaml");
    if (!parsed.ok()) std::abort();  // the shipped file is tested
    return parsed.value();
  }();
  return builtin;
}

const CompatBranch* CompatMatrix::FindBranch(std::string_view branch) const {
  for (const auto& b : branches_) {
    if (b.branch == branch) return &b;
  }
  return nullptr;
}

const CompatCuda* CompatMatrix::FindCuda(std::string_view cuda) const {
  for (const auto& c : cuda_) {
    if (c.cuda == cuda) return &c;
  }
  // "12.8.2" with no row of its own: the GA's ("12.8"), whose driver every update runs on.
  size_t first = cuda.find('.');
  size_t second = first == std::string_view::npos ? first : cuda.find('.', first + 1);
  if (second != std::string_view::npos) return FindCuda(cuda.substr(0, second));
  return nullptr;
}

const CompatOperator* CompatMatrix::FindOperator(std::string_view version) const {
  std::string_view want = version.substr(!version.empty() && version.front() == 'v' ? 1 : 0);
  for (const auto& o : operators_) {
    std::string_view have = o.version;
    if (!have.empty() && have.front() == 'v') have.remove_prefix(1);
    if (have == want) return &o;
  }
  return nullptr;
}

const std::string& CompatMatrix::source(std::string_view table) const {
  if (table == "cuda") return cuda_source_;
  if (table == "architectures") return architectures_source_;
  if (table == "models") return models_source_;
  if (table == "gpu_operator") return operators_source_;
  return branches_source_;
}

CompatResult CompatMatrix::Check(const CompatQuery& q) const {
  CompatResult out;
  auto rule = [&](bool ok, const char* name, std::string reason, std::string_view table) {
    (ok ? out.passed : out.failed).push_back({name, std::move(reason), source(table)});
  };
  if (!DottedNumber(q.driver)) {
    rule(false, "driver", "'" + q.driver + "' is not a driver version such as 580.95.05",
         "branches");
    out.ok = false;
    return out;
  }
  const std::string branch = DriverBranch(q.driver);
  const CompatBranch* b = FindBranch(branch);
  if (!b) {
    rule(false, "branch-known", branch + " is not in the compatibility matrix", "branches");
  } else {
    rule(true, "branch-known", branch + " is a known branch (" + b->type + ")", "branches");
    if (b->EndOfLife(q.today)) {
      rule(false, "branch-eol",
           branch + " is end of life" + (b->eol.empty() ? "" : " (" + b->eol + ")"), "branches");
    } else {
      rule(true, "branch-eol",
           branch +
               (b->eol.empty() ? " has no end of life published" : " is supported until " + b->eol),
           "branches");
    }
    const bool production = q.needs.tier == "production";
    if (b->type == "nfb" && production) {
      rule(false, "branch-type", branch + " is a new-feature branch: not for tier production",
           "branches");
    } else {
      rule(true, "branch-type",
           branch + " is a " +
               (b->type == "nfb"  ? "new-feature"
                : b->type == "pb" ? "production"
                                  : "long-term support") +
               " branch: fine for tier " + q.needs.tier,
           "branches");
    }
  }
  if (!q.needs.driver_branch.empty()) {
    std::string pin = NormalizeBranch(q.needs.driver_branch);
    rule(pin == branch, "pin",
         pin == branch ? "the pool is pinned to " + pin
                       : "the pool is pinned to " + pin + ", " + q.driver + " is " + branch,
         "branches");
  }
  if (!q.needs.cuda.empty()) {
    const CompatCuda* c = FindCuda(q.needs.cuda);
    if (!c) {
      rule(false, "cuda", "CUDA " + q.needs.cuda + " is not in the compatibility matrix", "cuda");
    } else if (CompareVersions(q.driver, c->min_driver) < 0) {
      rule(false, "cuda",
           "CUDA " + q.needs.cuda + " needs >= " + c->min_driver + ", " + q.driver + " is older",
           "cuda");
    } else {
      rule(true, "cuda", "CUDA " + q.needs.cuda + " needs >= " + c->min_driver, "cuda");
    }
  }
  for (const auto& arch : q.architectures) {
    for (const auto& a : architectures_) {
      if (a.architecture != arch) continue;
      if (!a.last_branch.empty() &&
          CompareVersions(branch.substr(1), a.last_branch.substr(1)) > 0) {
        rule(false, "architecture",
             branch + " does not support " + arch + " GPUs (" + a.last_branch + " is the last)",
             "architectures");
      } else if (!a.min_driver.empty() && CompareVersions(q.driver, a.min_driver) < 0) {
        rule(false, "architecture",
             arch + " GPUs need >= " + a.min_driver + ", " + q.driver + " is older",
             "architectures");
      } else {
        rule(true, "architecture", branch + " supports " + arch + " GPUs", "architectures");
      }
    }
  }
  for (const auto& model : q.models) {
    for (const auto& mo : models_) {
      if (mo.model != model || mo.min_driver.empty()) continue;
      bool ok = CompareVersions(q.driver, mo.min_driver) >= 0;
      rule(ok, "model",
           model + " needs >= " + mo.min_driver + (ok ? "" : ", " + q.driver + " is older"),
           "models");
    }
  }
  if (!q.needs.gpu_operator.empty()) {
    const CompatOperator* o = FindOperator(q.needs.gpu_operator);
    if (!o) {
      rule(false, "gpu-operator",
           "GPU Operator " + q.needs.gpu_operator + " is not in the compatibility matrix",
           "gpu_operator");
    } else {
      std::vector<std::string> branches;
      bool exact = false;
      for (const auto& d : o->drivers) {
        exact = exact || d == q.driver;
        std::string db = DriverBranch(d);
        if (std::find(branches.begin(), branches.end(), db) == branches.end()) {
          branches.push_back(db);
        }
      }
      bool listed = std::find(branches.begin(), branches.end(), branch) != branches.end();
      std::string list;
      for (const auto& x : branches) list += (list.empty() ? "" : ", ") + x;
      rule(listed, "gpu-operator",
           listed ? "GPU Operator " + o->version +
                        (exact ? " lists " + q.driver : " lists " + branch + " drivers")
                  : "GPU Operator " + o->version + " lists no " + branch + " driver (it lists " +
                        list + ")",
           "gpu_operator");
      if (!q.needs.kubernetes.empty() && !o->kubernetes_min.empty()) {
        bool in = CompareVersions(q.needs.kubernetes, o->kubernetes_min) >= 0 &&
                  CompareVersions(q.needs.kubernetes, o->kubernetes_max) <= 0;
        rule(in, "kubernetes",
             "GPU Operator " + o->version + " supports Kubernetes " + o->kubernetes_min + " to " +
                 o->kubernetes_max + (in ? "" : ", not " + q.needs.kubernetes),
             "gpu_operator");
      }
    }
  }
  out.ok = out.failed.empty();
  return out;
}

}  // namespace gpufleet
