#include "model/profile.h"

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>
#include <cstdio>

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
    {"image_id", "medium", "manual", false},
    {"container_toolkit", "medium", "manual", false},
    {"vbios", "medium", "rollout", true},
    {"inforom", "low", "manual", true},
    {"gsp_firmware", "medium", "rollout", true},
    // GPU settings the agent can set through NVML ("auto"). ECC and MIG modes change only with a
    // GPU reset: manual unless the profile says auto (then inside a maintenance window).
    {"mig_mode", "high", "manual", true, true},
    // The GPU instances of a MIG-enabled GPU: re-partitioning ends the work on them (manual).
    {"mig_layout", "medium", "manual", true},
    {"ecc_mode", "high", "manual", true, true},
    {"persistence_mode", "low", "auto", true, true},
    {"compute_mode", "medium", "auto", true, true},
    {"power_limit_w", "medium", "auto", true, true},
    {"application_clocks", "low", "auto", true, true},
    // Per port ("ib_pkeys:mlx5_0/1"): a wrong partition key puts a node in another tenant's
    // network, or out of its own.
    {"ib_pkeys", "high", "manual", false},
    // Device files others may open: GPU access control.
    {"device_files", "high", "manual", false},
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

constexpr std::string_view kStringFields[] = {
    "driver_version", "cuda_driver",       "kernel",       "os",
    "image_id",       "container_toolkit", "gsp_firmware", "compute_mode"};

std::string* StringField(Profile& p, std::string_view key) {
  if (key == "driver_version") return &p.driver_version;
  if (key == "cuda_driver") return &p.cuda_driver;
  if (key == "kernel") return &p.kernel;
  if (key == "os") return &p.os;
  if (key == "image_id") return &p.image_id;
  if (key == "container_toolkit") return &p.container_toolkit;
  if (key == "gsp_firmware") return &p.gsp_firmware;
  if (key == "compute_mode") return &p.compute_mode;
  return nullptr;
}

constexpr std::string_view kComputeModes[] = {"default", "exclusive_process", "prohibited"};

bool IsComputeMode(std::string_view v) {
  return std::find(std::begin(kComputeModes), std::end(kComputeModes), v) !=
         std::end(kComputeModes);
}

bool IsOctalMode(std::string_view v) {
  if (v.size() < 3 || v.size() > 4) return false;
  return std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '7'; });
}

// "0x8001" -> "0x8001", "0X8001" / "0x08001" -> "0x8001": partition keys compare by value.
std::string NormalizePkey(std::string_view key) {
  unsigned value = 0;
  std::string_view digits = key;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    digits.remove_prefix(2);
  }
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, 16);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() ||
      value > 0xffff) {
    return "";
  }
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%04x", value);
  return buf;
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

// A GPU instance profile's name as nvidia-smi and mig-parted write it: "1g.10gb", "3g.71gb",
// "1g.10gb+me".
bool IsMigProfileName(std::string_view name) {
  auto digits = [&](size_t& i) {
    size_t start = i;
    while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
    return i > start && i - start <= 3;
  };
  size_t i = 0;
  if (!digits(i) || name.substr(i, 2) != "g.") return false;
  i += 2;
  if (!digits(i) || name.substr(i, 2) != "gb") return false;
  i += 2;
  if (i == name.size()) return true;
  if (name[i] != '+' || i + 1 == name.size()) return false;
  return std::all_of(name.begin() + static_cast<long>(i) + 1, name.end(),
                     [](char c) { return c >= 'a' && c <= 'z'; });
}

Result<Profile> ParseProfileObject(const json::object& o, const std::string& prefix,
                                   bool overrides_allowed);

}  // namespace

// ProfileOverride's defaulted == used once before Profile's is defaulted: clang 14 crashes
// resolving it from inside Profile's (each type holds the other), as the fuzz build found.
[[maybe_unused]] static bool SameOverride(const ProfileOverride& a, const ProfileOverride& b) {
  return a == b;
}
bool Profile::operator==(const Profile&) const = default;
bool Profile::empty() const { return *this == Profile{}; }

std::string MigLayoutText(const std::map<std::string, int>& layout) {
  std::string out;
  for (const auto& [name, count] : layout) {
    out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(count);
  }
  return out.empty() ? "none" : out;
}

Result<Labels> ParseLabelArgs(const std::vector<std::string>& args) {
  auto valid = [](std::string_view text, bool key) {
    if (text.size() > 63 || (key && text.empty())) return false;
    return std::all_of(text.begin(), text.end(), [&](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_' || c == '-' || (key && c == '/');
    });
  };
  Labels out;
  for (const auto& arg : args) {
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (eq == std::string::npos || !valid(key, true) || !valid(value, false)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "label '" + arg +
                           "' must be KEY=VALUE (letters, digits, . _ - and / in the key; up to "
                           "63 each)");
    }
    if (!out.emplace(key, value).second) {
      return MakeError(ErrorCode::kInvalidArgument, "label '" + key + "' is given twice");
    }
  }
  return out;
}

bool LabelsMatch(const Labels& selector, const Labels& labels) {
  for (const auto& [key, pattern] : selector) {
    auto it = labels.find(key);
    if (it == labels.end() || !GlobMatch(pattern, it->second)) return false;
  }
  return true;
}

Profile ForNode(const Profile& profile, const Labels& labels) {
  Profile out = profile;
  out.overrides.clear();
  for (const auto& o : profile.overrides) {
    if (LabelsMatch(o.labels, labels)) out = Merge(out, o.profile);
  }
  return out;
}

namespace {

json::object ProfileObject(const Profile& p) {
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
  if (!p.mig_layout.empty()) {
    json::object layout;
    for (const auto& [name, count] : p.mig_layout) layout[name] = count;
    o["mig_layout"] = std::move(layout);
  }
  if (p.persistence_mode) o["persistence_mode"] = *p.persistence_mode;
  if (p.ecc_mode) o["ecc_mode"] = *p.ecc_mode;
  if (p.power_limit_w > 0) o["power_limit_w"] = p.power_limit_w;
  if (p.app_clock_graphics_mhz > 0) {
    o["application_clocks"] = json::object{{"graphics_mhz", p.app_clock_graphics_mhz},
                                           {"memory_mhz", p.app_clock_mem_mhz}};
  }
  if (!p.ib_pkeys.empty()) {
    json::object pk;
    for (const auto& [port, keys] : p.ib_pkeys) {
      json::array a;
      for (const auto& k : keys) a.emplace_back(k);
      pk[port] = std::move(a);
    }
    o["ib_pkeys"] = std::move(pk);
  }
  if (!p.device_mode.empty() || !p.device_group.empty()) {
    json::object d;
    if (!p.device_mode.empty()) d["mode"] = p.device_mode;
    if (!p.device_group.empty()) d["group"] = p.device_group;
    o["device_files"] = std::move(d);
  }
  json::object packages;
  auto list = [&](const char* key, const std::vector<std::string>& v) {
    if (!v.empty()) packages[key] = json::value_from(v);
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
  if (!p.overrides.empty()) {
    json::array list;
    for (const auto& over : p.overrides) {
      json::object item{{"labels", json::object()}};
      for (const auto& [key, value] : over.labels) item["labels"].as_object()[key] = value;
      for (auto& [key, value] : ProfileObject(over.profile)) item[key] = std::move(value);
      list.emplace_back(std::move(item));
    }
    o["overrides"] = std::move(list);
  }
  return o;
}

}  // namespace

std::string ProfileJson(const Profile& p) { return json::serialize(ProfileObject(p)); }

Result<Profile> ParseProfile(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return Bad("profile", "must be a mapping");
  return ParseProfileObject(v.as_object(), "", true);
}

namespace {

Result<Profile> ParseProfileObject(const json::object& object, const std::string& prefix,
                                   bool overrides_allowed) {
  auto Bad = [&](const std::string& path, const std::string& what) {
    return gpufleet::Bad(prefix + path, what);
  };
  auto NonEmpty = [&](const json::value& v, const std::string& path) {
    return gpufleet::NonEmpty(v, prefix + path);
  };
  Profile p;
  for (const auto& [key, value] : object) {
    const std::string k(key);
    if (std::string* s = StringField(p, k)) {
      GF_TRY_ASSIGN(*s, NonEmpty(value, k));
      if (k == "compute_mode" && !IsComputeMode(*s)) {
        return Bad(k, "must be default, exclusive_process or prohibited");
      }
    } else if (k == "mig_mode" || k == "persistence_mode" || k == "ecc_mode") {
      if (!value.is_bool()) return Bad(k, "must be true or false");
      (k == "mig_mode"   ? p.mig_mode
       : k == "ecc_mode" ? p.ecc_mode
                         : p.persistence_mode) = value.as_bool();
    } else if (k == "mig_layout") {
      if (!value.is_object() || value.as_object().empty()) {
        return Bad(k, "must be a mapping of GPU instance profile to count ({\"1g.10gb\": 7})");
      }
      for (const auto& [name, count] : value.as_object()) {
        const std::string path = k + "." + std::string(name);
        if (!IsMigProfileName(name)) {
          return Bad(path, "not a GPU instance profile such as 1g.10gb or 3g.40gb");
        }
        if (!count.is_int64() || count.as_int64() < 1 || count.as_int64() > 8) {
          return Bad(path, "must be a count of instances, 1 to 8");
        }
        p.mig_layout[std::string(name)] = static_cast<int>(count.as_int64());
      }
    } else if (k == "overrides" && overrides_allowed) {
      if (!value.is_array()) return Bad(k, "must be a list of {labels, ...profile fields}");
      for (size_t i = 0; i < value.as_array().size(); ++i) {
        const std::string path = k + "[" + std::to_string(i) + "]";
        const json::value& item = value.as_array()[i];
        if (!item.is_object()) return Bad(path, "must be a mapping with labels and fields");
        const json::value* labels = item.as_object().if_contains("labels");
        if (!labels || !labels->is_object() || labels->as_object().empty()) {
          return Bad(path + ".labels", "must be a mapping of node label to value (or pattern)");
        }
        ProfileOverride over;
        json::object fields;
        for (const auto& [field, fv] : item.as_object()) {
          if (field != "labels") fields[field] = fv;
        }
        for (const auto& [label, lv] : labels->as_object()) {
          std::string v;
          GF_TRY_ASSIGN(v, NonEmpty(lv, path + ".labels." + std::string(label)));
          over.labels[std::string(label)] = std::move(v);
        }
        if (fields.empty()) return Bad(path, "sets no field");
        GF_TRY_ASSIGN(over.profile, ParseProfileObject(fields, prefix + path + ".", false));
        p.overrides.push_back(std::move(over));
      }
    } else if (k == "power_limit_w") {
      if (!value.is_int64() || value.as_int64() < 1 || value.as_int64() > 10'000) {
        return Bad(k, "must be a whole number of watts, 1 to 10000");
      }
      p.power_limit_w = static_cast<int>(value.as_int64());
    } else if (k == "application_clocks") {
      if (!value.is_object()) return Bad(k, "must be a mapping with graphics_mhz and memory_mhz");
      for (const auto& [field, fv] : value.as_object()) {
        const std::string fpath = k + "." + std::string(field);
        int* out = field == "graphics_mhz" ? &p.app_clock_graphics_mhz
                   : field == "memory_mhz" ? &p.app_clock_mem_mhz
                                           : nullptr;
        if (!out) return Bad(fpath, "unknown field (known: graphics_mhz, memory_mhz)");
        if (!fv.is_int64() || fv.as_int64() < 1 || fv.as_int64() > 100'000) {
          return Bad(fpath, "must be a whole number of MHz");
        }
        *out = static_cast<int>(fv.as_int64());
      }
      if (p.app_clock_graphics_mhz == 0 || p.app_clock_mem_mhz == 0) {
        return Bad(k, "needs both graphics_mhz and memory_mhz");
      }
    } else if (k == "ib_pkeys") {
      if (!value.is_object() || value.as_object().empty()) {
        return Bad(k, "must be a mapping of ADAPTER/PORT (or a pattern) to partition keys");
      }
      for (const auto& [port, keys] : value.as_object()) {
        const std::string path = k + "." + std::string(port);
        if (!keys.is_array() || keys.as_array().empty()) {
          return Bad(path, "must be a list of partition keys (\"0xffff\")");
        }
        auto& out = p.ib_pkeys[std::string(port)];
        for (size_t i = 0; i < keys.as_array().size(); ++i) {
          const auto& key = keys.as_array()[i];
          std::string normal = key.is_string() ? NormalizePkey(key.as_string()) : "";
          if (normal.empty()) {
            return Bad(path + "[" + std::to_string(i) + "]",
                       "must be a partition key, 0x0000 to 0xffff");
          }
          out.push_back(std::string(key.as_string()));
        }
      }
    } else if (k == "device_files") {
      if (!value.is_object() || value.as_object().empty()) {
        return Bad(k, "must be a mapping with mode, group or both");
      }
      for (const auto& [field, fv] : value.as_object()) {
        const std::string fpath = k + "." + std::string(field);
        if (field == "mode") {
          GF_TRY_ASSIGN(p.device_mode, NonEmpty(fv, fpath));
          if (!IsOctalMode(p.device_mode)) return Bad(fpath, "must be octal bits, \"0660\"");
          if (p.device_mode.size() == 3) p.device_mode = "0" + p.device_mode;
        } else if (field == "group") {
          GF_TRY_ASSIGN(p.device_group, NonEmpty(fv, fpath));
        } else {
          return Bad(fpath, "unknown field (known: mode, group)");
        }
      }
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
      if (!value.is_object()) return Bad(k, "must be a mapping of fact to auto, rollout or manual");
      for (const auto& [fact, how] : value.as_object()) {
        const std::string path = k + "." + std::string(fact);
        const DriftFact* f = FindDriftFact(fact);
        if (!f) return Bad(path, "not a fact a profile checks");
        if (!how.is_string() || (how.as_string() != "rollout" && how.as_string() != "manual" &&
                                 how.as_string() != "auto")) {
          return Bad(path, "must be auto, rollout or manual");
        }
        if (how.as_string() == "rollout" && f->remediation != "rollout") {
          return Bad(path, std::string("a rollout cannot change it: ") +
                               (f->settable ? "auto or manual" : "manual only"));
        }
        if (how.as_string() == "auto" && !f->settable) {
          return Bad(path, std::string("the agent cannot set it: ") +
                               (f->remediation == "rollout" ? "rollout or manual" : "manual only"));
        }
        p.remediation[std::string(fact)] = std::string(how.as_string());
      }
    } else {
      return Bad(k,
                 "unknown field (known: driver_version, cuda_driver, kernel, os, image_id, "
                 "container_toolkit, firmware, gsp_firmware, mig_mode, mig_layout, ecc_mode, "
                 "persistence_mode, compute_mode, power_limit_w, application_clocks, ib_pkeys, "
                 "device_files, packages, remediation" +
                     std::string(overrides_allowed ? ", overrides)" : "; an override has none)"));
    }
  }
  return p;
}

}  // namespace

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
  if (!over.mig_layout.empty()) out.mig_layout = over.mig_layout;
  if (over.persistence_mode) out.persistence_mode = over.persistence_mode;
  if (over.ecc_mode) out.ecc_mode = over.ecc_mode;
  if (over.power_limit_w > 0) out.power_limit_w = over.power_limit_w;
  if (over.app_clock_graphics_mhz > 0) {
    out.app_clock_graphics_mhz = over.app_clock_graphics_mhz;
    out.app_clock_mem_mhz = over.app_clock_mem_mhz;
  }
  if (!over.ib_pkeys.empty()) out.ib_pkeys = over.ib_pkeys;  // the pool's map replaces
  if (!over.device_mode.empty()) out.device_mode = over.device_mode;
  if (!over.device_group.empty()) out.device_group = over.device_group;
  // A pool's list replaces its cluster's.
  if (!over.packages_required.empty()) out.packages_required = over.packages_required;
  if (!over.packages_forbidden.empty()) out.packages_forbidden = over.packages_forbidden;
  if (!over.packages_allowed.empty()) out.packages_allowed = over.packages_allowed;
  for (const auto& [fact, how] : over.remediation) out.remediation[fact] = how;
  out.overrides.insert(out.overrides.end(), over.overrides.begin(), over.overrides.end());
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

namespace {

// What a profile asks of a settable fact, written as GpuSettingText writes it ("" nothing).
std::string SettingWant(const Profile& p, std::string_view fact) {
  auto mode = [](const std::optional<bool>& on) {
    return !on ? std::string() : *on ? std::string("enabled") : std::string("disabled");
  };
  if (fact == "persistence_mode") return mode(p.persistence_mode);
  if (fact == "ecc_mode") return mode(p.ecc_mode);
  if (fact == "mig_mode") return mode(p.mig_mode);
  if (fact == "compute_mode") return p.compute_mode;
  if (fact == "power_limit_w") return p.power_limit_w > 0 ? std::to_string(p.power_limit_w) : "";
  if (fact == "application_clocks" && p.app_clock_graphics_mhz > 0) {
    return std::to_string(p.app_clock_graphics_mhz) + "/" + std::to_string(p.app_clock_mem_mhz);
  }
  return "";
}

std::string DeviceWant(const Profile& p) {
  std::string out;
  if (!p.device_mode.empty()) out = "mode " + p.device_mode;
  if (!p.device_group.empty())
    out += (out.empty() ? "" : ", ") + std::string("group ") + p.device_group;
  return out;
}

std::string JoinKeys(std::vector<std::string> keys) {
  for (auto& k : keys) k = NormalizePkey(k);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : " ") + k;
  return out.empty() ? "none" : out;
}

// Each InfiniBand port a pattern of the profile matches (the most specific: the longest pattern
// that matches) against its keys; a node with no readable port is one finding, "unknown".
template <class Add>
void EvaluatePkeys(const Profile& p, const Node& node, Add add) {
  if (p.ib_pkeys.empty()) return;
  bool any = false;
  for (const auto& nic : node.facts.nics) {
    for (const auto& [port, keys] : nic.pkeys) {
      const std::string name = nic.name + "/" + std::to_string(port);
      const std::vector<std::string>* want = nullptr;
      size_t best = 0;
      for (const auto& [pattern, list] : p.ib_pkeys) {
        if (GlobMatch(pattern, name) && (!want || pattern.size() > best)) {
          want = &list;
          best = pattern.size();
        }
      }
      if (!want) continue;
      any = true;
      std::string w = JoinKeys(*want), h = JoinKeys(keys);
      if (w != h) add(name, w, h);
    }
  }
  if (!any) add("", "partition keys on the InfiniBand ports", "");
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
    } else if (f.name == "image_id") {
      const std::string& have = node.facts.image_id;
      if (!profile.image_id.empty() && (have.empty() || !GlobMatch(profile.image_id, have))) {
        add(f, -1, profile.image_id, have);
      }
    } else if (f.name == "container_toolkit") {
      exact(f, profile.container_toolkit, node.facts.container_toolkit);
    } else if (f.name == "ib_pkeys") {
      EvaluatePkeys(profile, node,
                    [&](const std::string& port, const std::string& want, const std::string& have) {
                      add(f, -1, want, have);
                      if (!port.empty()) out.back().fact = "ib_pkeys:" + port;
                    });
    } else if (f.name == "device_files") {
      if (profile.device_mode.empty() && profile.device_group.empty()) continue;
      std::string want = DeviceWant(profile);
      if (!node.facts.device_files) {
        add(f, -1, want, "");
        continue;
      }
      std::string wrong;
      for (const auto& d : *node.facts.device_files) {
        if ((!profile.device_mode.empty() && d.mode != profile.device_mode) ||
            (!profile.device_group.empty() && d.group != profile.device_group)) {
          wrong += (wrong.empty() ? "" : ", ") + d.path + " " + d.mode + " " + d.group;
        }
      }
      if (node.facts.device_files->empty()) wrong = "no /dev/nvidia* files";
      if (!wrong.empty()) add(f, -1, want, wrong);
    } else if (f.settable && f.name != "mig_mode") {
      std::string want = SettingWant(profile, f.name);
      if (want.empty()) continue;
      for (const auto& g : node.gpus) {
        std::string have = GpuSettingText(g, f.name);
        if (have != want) add(f, g.index, want, have);
      }
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
        } else if (f.name == "mig_layout" && !profile.mig_layout.empty()) {
          // A GPU with MIG off has no instances; when the profile asks for MIG on, the
          // mig_mode finding already says so.
          const std::string want = MigLayoutText(profile.mig_layout);
          if (g.mig_mode != 1) {
            if (!profile.mig_mode) {
              add(f, g.index, want, g.mig_mode < 0 ? "MIG not supported" : "MIG disabled");
            }
          } else if (!g.mig_layout) {
            add(f, g.index, want, "");
          } else if (*g.mig_layout != profile.mig_layout) {
            add(f, g.index, want, MigLayoutText(*g.mig_layout));
          }
        }
      }
    }
  }
  return out;
}

Result<GpuSettingValue> ParseGpuSetting(std::string_view setting, std::string_view value) {
  auto bad = [&](const std::string& what) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(setting) + " '" + std::string(value) + "': " + what);
  };
  auto number = [](std::string_view text, int& out) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && end == text.data() + text.size() && out > 0;
  };
  GpuSettingValue v;
  if (setting == "persistence_mode" || setting == "ecc_mode" || setting == "mig_mode") {
    if (value != "enabled" && value != "disabled") return bad("must be enabled or disabled");
    v.number = value == "enabled" ? 1 : 0;
  } else if (setting == "compute_mode") {
    if (value == "default") {
      v.number = 0;
    } else if (value == "prohibited") {
      v.number = 2;
    } else if (value == "exclusive_process") {
      v.number = 3;
    } else {
      return bad("must be default, exclusive_process or prohibited");
    }
  } else if (setting == "power_limit_w") {
    if (!number(value, v.number) || v.number > 10'000) return bad("must be watts, 1 to 10000");
  } else if (setting == "application_clocks") {
    size_t slash = value.find('/');
    if (slash == std::string_view::npos || !number(value.substr(0, slash), v.number) ||
        !number(value.substr(slash + 1), v.second)) {
      return bad("must be GRAPHICS/MEMORY in MHz, \"1980/2619\"");
    }
  } else {
    return MakeError(ErrorCode::kInvalidArgument,
                     "unknown GPU setting '" + std::string(setting) +
                         "' (persistence_mode, ecc_mode, mig_mode, compute_mode, power_limit_w, "
                         "application_clocks)");
  }
  return v;
}

std::string GpuSettingText(const Gpu& g, std::string_view setting) {
  const GpuSettings& s = g.settings;
  auto mode = [](int v) { return v < 0 ? "" : v == 1 ? "enabled" : "disabled"; };
  if (setting == "persistence_mode") return mode(s.persistence_mode);
  if (setting == "ecc_mode") return mode(s.ecc_mode);
  if (setting == "mig_mode") return mode(g.mig_mode);
  if (setting == "compute_mode") return s.compute_mode;
  if (setting == "power_limit_w") return s.power_limit_w < 0 ? "" : std::to_string(s.power_limit_w);
  if (setting == "application_clocks") {
    if (s.app_clock_graphics_mhz < 0 || s.app_clock_mem_mhz < 0) return "";
    return std::to_string(s.app_clock_graphics_mhz) + "/" + std::to_string(s.app_clock_mem_mhz);
  }
  return "";
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
                                      {"note", f.note},
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
  f.note = str("note");
  f.first_seen_ms = num("first_seen_ms");
  f.last_seen_ms = num("last_seen_ms");
  f.resolved_ms = num("resolved_ms");
  return f;
}

}  // namespace gpufleet
