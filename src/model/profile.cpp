#include "model/profile.h"

#include <boost/json.hpp>

namespace json = boost::json;

namespace gpufleet {

// Driver and firmware differences are fixed by a rollout (src/lifecycle) to the profile's
// version; the rest by hand. A driver that differs is high: the workloads were validated on
// the profile's.
const std::vector<DriftFact> kDriftFacts = {
    {"driver_version", "high", "rollout", false},
    {"cuda_driver", "high", "rollout", false},
    {"kernel", "medium", "manual", false},
    {"os", "medium", "manual", false},
    {"container_toolkit", "medium", "manual", false},
    {"vbios", "medium", "rollout", true},
    {"inforom", "low", "manual", true},
    {"gsp_firmware", "medium", "rollout", true},
    {"mig_mode", "high", "manual", true},
    // A forbidden package is high; one missing or outside the allowlist medium (EvaluateDrift).
    {"packages", "medium", "manual", false},
};

const DriftFact* FindDriftFact(std::string_view name) {
  for (const auto& f : kDriftFacts) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

namespace {

constexpr std::string_view kStringFields[] = {"driver_version",    "cuda_driver", "kernel", "os",
                                              "container_toolkit", "gsp_firmware"};

std::string* StringField(Profile& p, std::string_view key) {
  if (key == "driver_version") return &p.driver_version;
  if (key == "cuda_driver") return &p.cuda_driver;
  if (key == "kernel") return &p.kernel;
  if (key == "os") return &p.os;
  if (key == "container_toolkit") return &p.container_toolkit;
  if (key == "gsp_firmware") return &p.gsp_firmware;
  return nullptr;
}

const std::string& StringField(const Profile& p, std::string_view key) {
  return *StringField(const_cast<Profile&>(p), key);
}

Error Bad(const std::string& path, const std::string& what) {
  return MakeError(ErrorCode::kInvalidArgument, path + ": " + what);
}

Result<std::string> NonEmpty(const json::value& v, const std::string& path) {
  if (!v.is_string() || v.as_string().empty()) return Bad(path, "must be a non-empty string");
  return std::string(v.as_string());
}

}  // namespace

std::string ProfileJson(const Profile& p) {
  json::object o;
  for (auto key : kStringFields) {
    if (const auto& v = StringField(p, key); !v.empty()) o[key] = v;
  }
  if (!p.firmware.empty()) {
    json::object fw;
    for (const auto& [model, want] : p.firmware) {
      json::object w;
      if (!want.vbios.empty()) w["vbios"] = want.vbios;
      if (!want.inforom.empty()) w["inforom"] = want.inforom;
      fw[model] = std::move(w);
    }
    o["firmware"] = std::move(fw);
  }
  if (p.mig_mode) o["mig_mode"] = *p.mig_mode;
  json::object packages;
  auto list = [&](const char* key, const std::vector<std::string>& v) {
    if (v.empty()) return;
    json::array a;
    for (const auto& s : v) a.emplace_back(s);
    packages[key] = std::move(a);
  };
  list("required", p.packages_required);
  list("forbidden", p.packages_forbidden);
  list("allowed", p.packages_allowed);
  if (!packages.empty()) o["packages"] = std::move(packages);
  if (!p.remediation.empty()) {
    json::object r;
    for (const auto& [fact, how] : p.remediation) r[fact] = how;
    o["remediation"] = std::move(r);
  }
  return json::serialize(o);
}

Result<Profile> ParseProfile(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return Bad("profile", "must be a mapping");
  Profile p;
  for (const auto& [key, value] : v.as_object()) {
    const std::string k(key);
    if (std::string* s = StringField(p, k)) {
      GF_TRY_ASSIGN(*s, NonEmpty(value, k));
    } else if (k == "mig_mode") {
      if (!value.is_bool()) return Bad(k, "must be true or false");
      p.mig_mode = value.as_bool();
    } else if (k == "firmware") {
      if (!value.is_object()) return Bad(k, "must be a mapping of GPU model to {vbios, inforom}");
      for (const auto& [model, want] : value.as_object()) {
        const std::string path = k + "." + std::string(model);
        if (!want.is_object() || want.as_object().empty()) {
          return Bad(path, "must be a mapping with vbios, inforom or both");
        }
        FirmwareWant& w = p.firmware[std::string(model)];
        for (const auto& [field, fv] : want.as_object()) {
          const std::string fpath = path + "." + std::string(field);
          if (field == "vbios") {
            GF_TRY_ASSIGN(w.vbios, NonEmpty(fv, fpath));
          } else if (field == "inforom") {
            GF_TRY_ASSIGN(w.inforom, NonEmpty(fv, fpath));
          } else {
            return Bad(fpath, "unknown field (known: vbios, inforom)");
          }
        }
      }
    } else if (k == "packages") {
      if (!value.is_object()) {
        return Bad(k, "must be a mapping with required, forbidden or allowed");
      }
      for (const auto& [field, list] : value.as_object()) {
        const std::string path = k + "." + std::string(field);
        std::vector<std::string>* out = field == "required"    ? &p.packages_required
                                        : field == "forbidden" ? &p.packages_forbidden
                                        : field == "allowed"   ? &p.packages_allowed
                                                               : nullptr;
        if (!out) return Bad(path, "unknown field (known: required, forbidden, allowed)");
        if (!list.is_array()) return Bad(path, "must be a list of package names");
        for (size_t i = 0; i < list.as_array().size(); ++i) {
          std::string entry;
          GF_TRY_ASSIGN(entry, NonEmpty(list.as_array()[i], path + "[" + std::to_string(i) + "]"));
          if (field == "allowed" && entry.find('=') != std::string::npos) {
            return Bad(path + "[" + std::to_string(i) + "]",
                       "the allowlist names packages, not versions");
          }
          out->push_back(std::move(entry));
        }
      }
    } else if (k == "remediation") {
      if (!value.is_object()) return Bad(k, "must be a mapping of fact to rollout or manual");
      for (const auto& [fact, how] : value.as_object()) {
        const std::string path = k + "." + std::string(fact);
        const DriftFact* f = FindDriftFact(fact);
        if (!f) return Bad(path, "not a fact a profile checks");
        if (!how.is_string() || (how.as_string() != "rollout" && how.as_string() != "manual")) {
          return Bad(path, "must be rollout or manual");
        }
        if (how.as_string() == "rollout" && f->remediation != "rollout") {
          return Bad(path, "a rollout cannot change it: manual only");
        }
        p.remediation[std::string(fact)] = std::string(how.as_string());
      }
    } else {
      return Bad(k,
                 "unknown field (known: driver_version, cuda_driver, kernel, os, "
                 "container_toolkit, firmware, gsp_firmware, mig_mode, packages, remediation)");
    }
  }
  return p;
}

Profile Merge(const Profile& base, const Profile& over) {
  Profile out = base;
  for (auto key : kStringFields) {
    if (const auto& v = StringField(over, key); !v.empty()) *StringField(out, key) = v;
  }
  for (const auto& [model, want] : over.firmware) {
    FirmwareWant& w = out.firmware[model];
    if (!want.vbios.empty()) w.vbios = want.vbios;
    if (!want.inforom.empty()) w.inforom = want.inforom;
  }
  if (over.mig_mode) out.mig_mode = over.mig_mode;
  // A pool's list replaces its cluster's.
  if (!over.packages_required.empty()) out.packages_required = over.packages_required;
  if (!over.packages_forbidden.empty()) out.packages_forbidden = over.packages_forbidden;
  if (!over.packages_allowed.empty()) out.packages_allowed = over.packages_allowed;
  for (const auto& [fact, how] : over.remediation) out.remediation[fact] = how;
  return out;
}

bool GlobMatch(std::string_view pattern, std::string_view text) {
  // Iterative, with one backtrack point: linear in practice, no recursion.
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

namespace {

// "name=version" -> {name, version}; "name" -> {name, ""}.
std::pair<std::string, std::string> SplitPackage(const std::string& entry) {
  const size_t eq = entry.find('=');
  if (eq == std::string::npos) return {entry, ""};
  return {entry.substr(0, eq), entry.substr(eq + 1)};
}

// Does an installed version ("1.17.3-1", "1:2.36-9") match the one asked for ("1.17.3"): the
// same, or the same upstream version with a Debian revision or an epoch.
bool VersionMatches(const std::string& want, std::string have) {
  if (want.empty() || have == want) return true;
  if (size_t colon = have.find(':'); colon != std::string::npos) have = have.substr(colon + 1);
  if (have == want) return true;
  return have.size() > want.size() && have.compare(0, want.size(), want) == 0 &&
         have[want.size()] == '-';
}

}  // namespace

std::vector<DriftFinding> EvaluateDrift(const Profile& profile, const Node& node) {
  std::vector<DriftFinding> out;
  auto add = [&](const DriftFact& f, int gpu, const std::string& expected, std::string actual) {
    DriftFinding d;
    d.node = node.name;
    d.pool = node.pool;
    d.cluster = node.cluster;
    d.gpu = gpu;
    d.fact = std::string(f.name);
    d.expected = expected;
    d.severity = std::string(f.severity);
    auto how = profile.remediation.find(d.fact);
    d.remediation = how != profile.remediation.end() ? how->second : std::string(f.remediation);
    if (actual.empty()) {
      actual = "unknown";
      d.remediation = "manual";  // nothing to roll out to until the node says what it runs
    }
    d.actual = std::move(actual);
    out.push_back(std::move(d));
  };
  auto exact = [&](const DriftFact& f, const std::string& want, const std::string& have) {
    if (!want.empty() && have != want) add(f, -1, want, have);
  };
  for (const auto& f : kDriftFacts) {
    if (f.name == "packages") {
      const bool any = !profile.packages_required.empty() || !profile.packages_forbidden.empty() ||
                       !profile.packages_allowed.empty();
      if (!any) continue;
      if (!node.facts.packages) {  // cannot tell: one finding, never a match
        add(f, -1, "packages as the profile says", "");
        continue;
      }
      const auto& have = *node.facts.packages;
      auto package_finding = [&](const std::string& name, const std::string& expected,
                                 const std::string& actual, const char* severity) {
        add(f, -1, expected, actual);
        out.back().fact = "package:" + name;
        out.back().severity = severity;
      };
      for (const auto& entry : profile.packages_required) {
        auto [name, version] = SplitPackage(entry);
        auto it = have.find(name);
        if (it == have.end()) {
          package_finding(name, version.empty() ? "installed" : version, "not installed", "medium");
        } else if (!VersionMatches(version, it->second)) {
          package_finding(name, version, it->second, "medium");
        }
      }
      for (const auto& entry : profile.packages_forbidden) {
        auto [name, version] = SplitPackage(entry);
        auto it = have.find(name);
        if (it != have.end() && (version.empty() || VersionMatches(version, it->second))) {
          package_finding(name, version.empty() ? "not installed" : "not " + version, it->second,
                          "high");
        }
      }
      if (!profile.packages_allowed.empty()) {
        for (const auto& [name, version] : have) {
          bool allowed = false;
          for (const auto& pattern : profile.packages_allowed) {
            if (GlobMatch(pattern, name)) {
              allowed = true;
              break;
            }
          }
          for (const auto& entry : profile.packages_required) {
            allowed |= SplitPackage(entry).first == name;
          }
          for (const auto& entry : profile.packages_forbidden) {
            allowed |= SplitPackage(entry).first == name;  // found above: one finding a package
          }
          if (!allowed)
            package_finding(name, "not installed (not in the allowlist)", version, "medium");
        }
      }
      continue;
    }
    if (f.name == "driver_version") {
      exact(f, profile.driver_version, node.facts.driver_version);
    } else if (f.name == "cuda_driver") {
      exact(f, profile.cuda_driver, node.facts.cuda_driver_version);
    } else if (f.name == "kernel") {
      const std::string& have = node.facts.kernel;
      if (!profile.kernel.empty() && (have.empty() || !GlobMatch(profile.kernel, have))) {
        add(f, -1, profile.kernel, have);
      }
    } else if (f.name == "os") {
      exact(f, profile.os, node.facts.os);
    } else if (f.name == "container_toolkit") {
      exact(f, profile.container_toolkit, node.facts.container_toolkit);
    } else {
      for (const auto& g : node.gpus) {
        auto fw = profile.firmware.find(g.model);
        if (f.name == "vbios" && fw != profile.firmware.end() && !fw->second.vbios.empty() &&
            g.vbios_version != fw->second.vbios) {
          add(f, g.index, fw->second.vbios, g.vbios_version);
        } else if (f.name == "inforom" && fw != profile.firmware.end() &&
                   !fw->second.inforom.empty() && g.inforom_version != fw->second.inforom) {
          add(f, g.index, fw->second.inforom, g.inforom_version);
        } else if (f.name == "gsp_firmware" && !profile.gsp_firmware.empty() &&
                   g.gsp_firmware_version != profile.gsp_firmware) {
          add(f, g.index, profile.gsp_firmware, g.gsp_firmware_version);
        } else if (f.name == "mig_mode" && profile.mig_mode) {
          std::string want = *profile.mig_mode ? "enabled" : "disabled";
          std::string have = g.mig_mode < 0 ? "" : g.mig_mode == 1 ? "enabled" : "disabled";
          if (have != want) add(f, g.index, want, g.mig_mode < 0 ? "not supported" : have);
        }
      }
    }
  }
  return out;
}

std::string DriftFindingJson(const DriftFinding& f) {
  return json::serialize(json::object{{"id", f.id},
                                      {"node", f.node},
                                      {"pool", f.pool},
                                      {"cluster", f.cluster},
                                      {"gpu", f.gpu},
                                      {"fact", f.fact},
                                      {"expected", f.expected},
                                      {"actual", f.actual},
                                      {"severity", f.severity},
                                      {"remediation", f.remediation},
                                      {"state", f.state},
                                      {"first_seen_ms", f.first_seen_ms},
                                      {"last_seen_ms", f.last_seen_ms},
                                      {"resolved_ms", f.resolved_ms}});
}

Result<DriftFinding> ParseDriftFinding(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) {
    return MakeError(ErrorCode::kInternal, "a stored drift finding is not a JSON object");
  }
  const auto& o = v.as_object();
  auto str = [&](const char* k) {
    const auto* s = o.if_contains(k);
    return s && s->is_string() ? std::string(s->as_string()) : std::string();
  };
  auto num = [&](const char* k) -> int64_t {
    const auto* n = o.if_contains(k);
    return n && n->is_int64() ? n->as_int64() : 0;
  };
  DriftFinding f;
  f.id = num("id");
  f.node = str("node");
  f.pool = str("pool");
  f.cluster = str("cluster");
  f.gpu = static_cast<int>(o.contains("gpu") ? num("gpu") : -1);
  f.fact = str("fact");
  f.expected = str("expected");
  f.actual = str("actual");
  f.severity = str("severity");
  f.remediation = str("remediation");
  f.state = str("state");
  f.first_seen_ms = num("first_seen_ms");
  f.last_seen_ms = num("last_seen_ms");
  f.resolved_ms = num("resolved_ms");
  return f;
}

}  // namespace gpufleet
