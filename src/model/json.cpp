#include "model/json.h"

#include <charconv>

#include "common/clock.h"
#include "model/profile.h"

namespace json = boost::json;

namespace gpufleet {
namespace {
Error WrongType(std::string_view key, std::string_view want) {
  return MakeError(ErrorCode::kInvalidArgument,
                   "field '" + std::string(key) + "' must be " + std::string(want));
}
Error Missing(std::string_view key) {
  return MakeError(ErrorCode::kInvalidArgument, "field '" + std::string(key) + "' is required");
}
}  // namespace

json::object ToJson(const Labels& labels) {
  json::object o;
  for (const auto& [k, v] : labels) o[k] = v;
  return o;
}

json::array ToJson(const std::vector<ExporterTarget>& targets) {
  json::array a;
  for (const auto& t : targets) a.push_back(json::object{{"node", t.node}, {"url", t.url}});
  return a;
}

json::object ToJson(const Remediation& r) {
  return {{"cordon_unhealthy", r.cordon_unhealthy},
          {"drain_unhealthy", r.drain_unhealthy},
          {"max_share", r.max_share},
          {"reset_gpu", r.reset_gpu},
          {"reboot_node", r.reboot_node}};
}

Labels LabelsFromJson(const json::value& v) {
  Labels labels;
  if (!v.is_object()) return labels;
  for (const auto& kv : v.as_object()) {
    if (kv.value().is_string()) labels[std::string(kv.key())] = kv.value().as_string().c_str();
  }
  return labels;
}

std::vector<ExporterTarget> ExportersFromJson(const json::value& v) {
  std::vector<ExporterTarget> out;
  if (!v.is_array()) return out;
  for (const auto& e : v.as_array()) {
    const auto* o = e.if_object();
    const json::value* node = o ? o->if_contains("node") : nullptr;
    const json::value* url = o ? o->if_contains("url") : nullptr;
    if (!node || !url || !node->is_string() || !url->is_string()) continue;
    out.push_back({std::string(node->as_string()), std::string(url->as_string())});
  }
  return out;
}

json::value ToJson(const Scheduler& s) {
  if (s.type.empty()) return nullptr;
  json::array partitions;
  for (const auto& p : s.partitions) partitions.emplace_back(p);
  return json::object{{"type", s.type},
                      {"bin_dir", s.bin_dir},
                      {"conf", s.conf},
                      {"partitions", std::move(partitions)},
                      {"poll_s", static_cast<double>(s.poll_ms) / 1000},
                      {"node_name", s.node_name}};
}

Scheduler SchedulerFromJson(const json::value& v) {
  Scheduler s;
  const auto* o = v.if_object();
  if (!o) return s;
  auto text = [o](const char* key, std::string& out) {
    if (const auto* f = o->if_contains(key); f && f->is_string()) out = f->as_string().c_str();
  };
  text("type", s.type);
  text("bin_dir", s.bin_dir);
  text("conf", s.conf);
  text("node_name", s.node_name);
  if (const auto* p = o->if_contains("partitions"); p && p->is_array()) {
    for (const auto& e : p->as_array()) {
      if (e.is_string()) s.partitions.emplace_back(e.as_string().c_str());
    }
  }
  if (const auto* p = o->if_contains("poll_s"); p && p->is_number()) {
    s.poll_ms = static_cast<int64_t>(p->to_number<double>() * 1000);
  }
  return s;
}

Remediation RemediationFromJson(const json::value& v) {
  Remediation r;
  if (!v.is_object()) return r;
  const auto& o = v.as_object();
  if (auto* b = o.if_contains("cordon_unhealthy"); b && b->is_bool()) {
    r.cordon_unhealthy = b->as_bool();
  }
  if (auto* b = o.if_contains("drain_unhealthy"); b && b->is_bool()) {
    r.drain_unhealthy = b->as_bool();
  }
  if (auto* b = o.if_contains("reset_gpu"); b && b->is_bool()) r.reset_gpu = b->as_bool();
  if (auto* b = o.if_contains("reboot_node"); b && b->is_bool()) r.reboot_node = b->as_bool();
  if (auto* d = o.if_contains("max_share"); d && d->is_number()) {
    r.max_share = d->to_number<double>();
  }
  return r;
}

json::array ToJson(const std::vector<MaintenanceWindow>& windows) {
  json::array out;
  for (const auto& w : windows) {
    json::array days;
    for (int d : w.days) days.emplace_back(WeekdayName(d));
    out.push_back(json::object{{"days", std::move(days)},
                               {"from", FormatClock(w.from_minute)},
                               {"to", FormatClock(w.to_minute)},
                               {"timezone", w.timezone}});
  }
  return out;
}

json::object ToJson(const Lifecycle& l) {
  return {{"tier", l.tier},
          {"requires",
           {{"cuda", l.cuda}, {"gpu_operator", l.gpu_operator}, {"kubernetes", l.kubernetes}}},
          {"driver_branch", l.driver_branch},
          {"maintenance_windows", ToJson(l.windows)},
          {"profile", json::parse(ProfileJson(l.profile))}};
}

Lifecycle LifecycleFromJson(const json::value& v) {
  Lifecycle l;
  if (!v.is_object()) return l;
  const auto& o = v.as_object();
  auto str = [](const json::object& from, const char* key) {
    const auto* s = from.if_contains(key);
    return s && s->is_string() ? std::string(s->as_string()) : std::string();
  };
  l.tier = str(o, "tier");
  l.driver_branch = str(o, "driver_branch");
  if (const auto* r = o.if_contains("requires"); r && r->is_object()) {
    l.cuda = str(r->as_object(), "cuda");
    l.gpu_operator = str(r->as_object(), "gpu_operator");
    l.kubernetes = str(r->as_object(), "kubernetes");
  }
  // Stored profiles were checked when applied: one that no longer reads is dropped the same way.
  if (const auto* p = o.if_contains("profile"); p && p->is_object()) {
    if (auto profile = ParseProfile(json::serialize(*p)); profile.ok()) {
      l.profile = std::move(profile).value();
    }
  }
  // Stored windows were checked when applied; one that no longer reads (a zone removed from
  // the tz database) is dropped here, and the apply of the same file names the problem.
  if (const auto* ws = o.if_contains("maintenance_windows"); ws && ws->is_array()) {
    for (const auto& v : ws->as_array()) {
      if (!v.is_object()) continue;
      std::vector<std::string> days;
      if (const auto* d = v.as_object().if_contains("days"); d && d->is_array()) {
        for (const auto& day : d->as_array()) {
          if (day.is_string()) days.emplace_back(day.as_string());
        }
      }
      auto w = MakeWindow(days, str(v.as_object(), "from"), str(v.as_object(), "to"),
                          str(v.as_object(), "timezone"));
      if (w.ok()) l.windows.push_back(std::move(w).value());
    }
  }
  return l;
}

namespace {
// A cluster's or pool's lifecycle, its windows shown beside it (`maintenance_windows`).
json::object LifecycleJson(const Lifecycle& l) {
  json::object o = ToJson(l);
  o.erase("maintenance_windows");
  o.erase("profile");
  return o;
}
}  // namespace

json::object ToJson(const Cluster& c) {
  return {{"name", c.name},
          {"type", ToString(c.type)},
          {"site", c.site},
          {"team", c.team},
          {"labels", ToJson(c.labels)},
          {"remediation", ToJson(c.remediation)},
          {"scheduler", ToJson(c.scheduler)},
          {"lifecycle", LifecycleJson(c.lifecycle)},
          {"maintenance_windows", ToJson(c.lifecycle.windows)},
          {"profile", json::parse(ProfileJson(c.lifecycle.profile))},
          {"created_at", FormatTime(c.created_ms)},
          {"updated_at", FormatTime(c.updated_ms)}};
}

json::object ToJson(const Pool& p) {
  return {{"name", p.name},
          {"cluster", p.cluster},
          {"gpu_model", p.gpu_model},
          {"gpus_per_node", p.gpus_per_node},
          {"size", p.size},
          {"team", p.team},
          {"labels", ToJson(p.labels)},
          {"exporters", ToJson(p.exporters)},
          {"scrape_interval_ms", p.scrape_interval_ms},
          {"lifecycle", LifecycleJson(p.lifecycle)},
          {"maintenance_windows", ToJson(p.lifecycle.windows)},
          {"profile", json::parse(ProfileJson(p.lifecycle.profile))},
          {"created_at", FormatTime(p.created_ms)},
          {"updated_at", FormatTime(p.updated_ms)}};
}

json::value MigLayoutJson(const std::optional<std::map<std::string, int>>& layout) {
  if (!layout) return nullptr;
  json::object o;
  for (const auto& [name, count] : *layout) o[name] = count;
  return o;
}

Result<std::optional<std::map<std::string, int>>> MigLayoutFromJson(const json::value* v) {
  if (!v || v->is_null()) return std::optional<std::map<std::string, int>>();
  if (!v->is_object()) {
    return MakeError(ErrorCode::kInvalidArgument, "'mig_layout' must be an object or null");
  }
  std::map<std::string, int> layout;
  for (const auto& [name, count] : v->as_object()) {
    if (!count.is_int64() || count.as_int64() < 0 || count.as_int64() > 64) {
      return MakeError(ErrorCode::kInvalidArgument, "'mig_layout' counts must be 0 to 64");
    }
    if (count.as_int64() > 0) layout[std::string(name)] = static_cast<int>(count.as_int64());
  }
  return std::optional<std::map<std::string, int>>(std::move(layout));
}

json::object ToJson(const Gpu& g) {
  json::object o{
      {"index", g.index},
      {"uuid", g.uuid},
      {"serial", g.serial},
      {"name", g.name},
      {"model", g.model},
      {"pci_bus_id", g.pci_bus_id},
      {"minor_number", g.minor_number < 0 ? json::value(nullptr) : json::value(g.minor_number)},
      {"memory_total_bytes", g.memory_total_bytes},
      {"vbios_version", g.vbios_version},
      {"inforom_version", g.inforom_version},
      {"inforom_oem", g.inforom_oem},
      {"inforom_ecc", g.inforom_ecc},
      {"inforom_power", g.inforom_power},
      {"gsp_firmware_version", g.gsp_firmware_version}};
  o["mig_mode"] =
      g.mig_mode < 0 ? json::value(nullptr) : json::value(g.mig_mode == 1 ? "enabled" : "disabled");
  o["mig_layout"] = MigLayoutJson(g.mig_layout);
  o["settings"] = ToJson(g.settings);
  o["error"] = g.error;
  return o;
}

namespace {
json::value Mode(int v) {
  return v < 0 ? json::value(nullptr) : json::value(v == 1 ? "enabled" : "disabled");
}
json::value Number(int v) { return v < 0 ? json::value(nullptr) : json::value(v); }
Result<int> ModeFrom(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (!v || v->is_null()) return -1;
  if (v->is_string() && v->as_string() == "enabled") return 1;
  if (v->is_string() && v->as_string() == "disabled") return 0;
  return MakeError(ErrorCode::kInvalidArgument,
                   "'" + std::string(key) + "' must be \"enabled\", \"disabled\" or null");
}
Result<int> NumberFrom(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (!v || v->is_null()) return -1;
  int64_t n = 0;
  GF_TRY_ASSIGN(n, GetInt(o, key));
  if (n < 0 || n > 1'000'000) {
    return MakeError(ErrorCode::kInvalidArgument, "'" + std::string(key) + "' is out of range");
  }
  return static_cast<int>(n);
}
}  // namespace

json::object ToJson(const GpuSettings& s) {
  json::object o{{"persistence_mode", Mode(s.persistence_mode)},
                 {"ecc_mode", Mode(s.ecc_mode)},
                 {"ecc_pending", Mode(s.ecc_pending)},
                 {"power_limit_w", Number(s.power_limit_w)},
                 {"app_clock_graphics_mhz", Number(s.app_clock_graphics_mhz)},
                 {"app_clock_mem_mhz", Number(s.app_clock_mem_mhz)}};
  o["compute_mode"] = s.compute_mode.empty() ? json::value(nullptr) : json::value(s.compute_mode);
  return o;
}

Result<GpuSettings> GpuSettingsFromJson(const json::value& v) {
  GpuSettings s;
  if (v.is_null()) return s;
  if (!v.is_object()) return MakeError(ErrorCode::kInvalidArgument, "'settings' must be an object");
  const auto& o = v.as_object();
  GF_TRY_ASSIGN(s.persistence_mode, ModeFrom(o, "persistence_mode"));
  GF_TRY_ASSIGN(s.ecc_mode, ModeFrom(o, "ecc_mode"));
  GF_TRY_ASSIGN(s.ecc_pending, ModeFrom(o, "ecc_pending"));
  GF_TRY_ASSIGN(s.power_limit_w, NumberFrom(o, "power_limit_w"));
  GF_TRY_ASSIGN(s.app_clock_graphics_mhz, NumberFrom(o, "app_clock_graphics_mhz"));
  GF_TRY_ASSIGN(s.app_clock_mem_mhz, NumberFrom(o, "app_clock_mem_mhz"));
  if (const auto* c = o.if_contains("compute_mode"); c && !c->is_null()) {
    GF_TRY_ASSIGN(s.compute_mode, GetString(o, "compute_mode"));
  }
  return s;
}

json::object ToJson(const NodeFacts& f) {
  json::array nics;
  for (const auto& n : f.nics) {
    json::object pkeys;
    for (const auto& [port, keys] : n.pkeys) {
      json::array list;
      for (const auto& k : keys) list.emplace_back(k);
      pkeys[std::to_string(port)] = std::move(list);
    }
    nics.push_back(json::object{{"name", n.name},
                                {"fw_version", n.fw_version},
                                {"board_id", n.board_id},
                                {"hca_type", n.hca_type},
                                {"pkeys", std::move(pkeys)}});
  }
  json::object o{{"hostname", f.hostname},
                 {"labels", ToJson(f.labels)},
                 {"os", f.os},
                 {"kernel", f.kernel},
                 {"driver_version", f.driver_version},
                 {"cuda_driver_version", f.cuda_driver_version},
                 {"container_toolkit", f.container_toolkit},
                 {"agent_version", f.agent_version},
                 {"backend", f.backend},
                 {"image_id", f.image_id},
                 {"nics", std::move(nics)}};
  if (f.device_files) {
    json::array files;
    for (const auto& d : *f.device_files) {
      files.push_back(json::object{{"path", d.path}, {"mode", d.mode}, {"group", d.group}});
    }
    o["device_files"] = std::move(files);
  } else {
    o["device_files"] = nullptr;
  }
  if (f.packages) {
    json::object packages;
    for (const auto& [name, version] : *f.packages) packages[name] = version;
    o["packages"] = std::move(packages);
  }
  return o;
}

// A node's facts for the API: the package list (hundreds of entries on a real node) is left out;
// `package_count` says how many (null: unknown).
json::object FactsWithoutPackages(const NodeFacts& f) {
  json::object o = ToJson(f);
  o.erase("packages");
  o["package_count"] = f.packages ? json::value(f.packages->size()) : json::value();
  return o;
}

json::object ToJson(const Node& n, bool with_gpus) {
  json::object o{{"name", n.name},
                 {"cluster", n.cluster},
                 {"pool", n.pool},
                 {"state", ToString(n.state)},
                 {"reason", n.reason},
                 {"simulated", n.simulated},
                 {"connected", n.connected},
                 {"gpu_count", n.gpus.size()},
                 {"facts", FactsWithoutPackages(n.facts)},
                 {"registered_at", FormatTime(n.registered_ms)},
                 {"last_seen_at", FormatTime(n.last_seen_ms)},
                 {"state_since", FormatTime(n.state_since_ms)}};
  if (n.state == NodeState::kUnreachable) o["resume_state"] = ToString(n.resume_state);
  std::string model;
  for (const auto& g : n.gpus) {
    if (model.empty()) model = g.model.empty() ? g.name : g.model;
  }
  o["gpu_model"] = model;
  if (with_gpus) {
    json::array gpus;
    for (const auto& g : n.gpus) gpus.push_back(ToJson(g));
    o["gpus"] = std::move(gpus);
  }
  return o;
}

json::object ToJson(const NodeEvent& e) {
  return {{"id", e.id},      {"node", e.node}, {"time", FormatTime(e.time_ms)},
          {"from", e.from},  {"to", e.to},     {"reason", e.reason},
          {"actor", e.actor}};
}

json::object ToJson(const GpuModelSpec& m) {
  json::array names, profiles;
  for (const auto& n : m.nvml_names) names.push_back(json::value(n));
  for (const auto& p : m.mig_profiles) profiles.push_back(json::value(p));
  return {{"id", m.id},
          {"name", m.name},
          {"architecture", m.architecture},
          {"nvml_names", names},
          {"memory_gib", m.memory_gib},
          {"memory_type", m.memory_type},
          {"tdp_w", m.tdp_w},
          {"max_operating_temp_c", m.max_operating_temp_c},
          {"form_factor", m.form_factor},
          {"nvlink",
           {{"generation", m.nvlink_generation}, {"bandwidth_gbps", m.nvlink_bandwidth_gbps}}},
          {"mig",
           {{"supported", m.mig_supported},
            {"max_instances", m.mig_max_instances},
            {"profiles", profiles}}}};
}

Result<std::string> GetString(const json::object& o, std::string_view key,
                              std::optional<std::string> fallback) {
  auto it = o.find(key);
  if (it == o.end() || it->value().is_null()) {
    if (fallback) return *fallback;
    return Missing(key);
  }
  if (!it->value().is_string()) return WrongType(key, "a string");
  return std::string(it->value().as_string());
}

Result<int64_t> GetInt(const json::object& o, std::string_view key,
                       std::optional<int64_t> fallback) {
  auto it = o.find(key);
  if (it == o.end() || it->value().is_null()) {
    if (fallback) return *fallback;
    return Missing(key);
  }
  if (it->value().is_int64()) return it->value().as_int64();
  if (it->value().is_uint64() && it->value().as_uint64() <= INT64_MAX) {
    return static_cast<int64_t>(it->value().as_uint64());
  }
  return WrongType(key, "an integer");
}

Result<bool> GetBool(const json::object& o, std::string_view key, std::optional<bool> fallback) {
  auto it = o.find(key);
  if (it == o.end() || it->value().is_null()) {
    if (fallback) return *fallback;
    return Missing(key);
  }
  if (!it->value().is_bool()) return WrongType(key, "true or false");
  return it->value().as_bool();
}

Result<json::object> ParseObject(std::string_view body) {
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec) return MakeError(ErrorCode::kInvalidArgument, "malformed JSON: " + ec.message());
  if (!v.is_object()) return MakeError(ErrorCode::kInvalidArgument, "body must be a JSON object");
  return std::move(v.as_object());
}

Result<Gpu> GpuFromJson(const json::value& v) {
  if (!v.is_object()) return MakeError(ErrorCode::kInvalidArgument, "a GPU must be an object");
  const auto& o = v.as_object();
  Gpu g;
  int64_t index = 0, mem = 0;
  GF_TRY_ASSIGN(index, GetInt(o, "index"));
  g.index = static_cast<int>(index);
  GF_TRY_ASSIGN(g.uuid, GetString(o, "uuid"));
  GF_TRY_ASSIGN(g.serial, GetString(o, "serial", ""));
  GF_TRY_ASSIGN(g.name, GetString(o, "name", ""));
  GF_TRY_ASSIGN(g.pci_bus_id, GetString(o, "pci_bus_id", ""));
  if (const auto* minor = o.if_contains("minor_number"); minor && !minor->is_null()) {
    int64_t number = 0;
    GF_TRY_ASSIGN(number, GetInt(o, "minor_number"));
    if (number < 0 || number > 254) {  // 255 is /dev/nvidiactl
      return MakeError(ErrorCode::kInvalidArgument, "minor_number must be 0..254");
    }
    g.minor_number = static_cast<int>(number);
  }
  GF_TRY_ASSIGN(mem, GetInt(o, "memory_total_bytes", 0));
  g.memory_total_bytes = static_cast<uint64_t>(mem);
  GF_TRY_ASSIGN(g.vbios_version, GetString(o, "vbios_version", ""));
  GF_TRY_ASSIGN(g.inforom_version, GetString(o, "inforom_version", ""));
  GF_TRY_ASSIGN(g.inforom_oem, GetString(o, "inforom_oem", ""));
  GF_TRY_ASSIGN(g.inforom_ecc, GetString(o, "inforom_ecc", ""));
  GF_TRY_ASSIGN(g.inforom_power, GetString(o, "inforom_power", ""));
  GF_TRY_ASSIGN(g.gsp_firmware_version, GetString(o, "gsp_firmware_version", ""));
  std::string mig;
  GF_TRY_ASSIGN(mig, GetString(o, "mig_mode", ""));
  g.mig_mode = mig == "enabled" ? 1 : mig == "disabled" ? 0 : -1;
  GF_TRY_ASSIGN(g.mig_layout, MigLayoutFromJson(o.if_contains("mig_layout")));
  if (const auto* settings = o.if_contains("settings")) {
    GF_TRY_ASSIGN(g.settings, GpuSettingsFromJson(*settings));
  }
  GF_TRY_ASSIGN(g.error, GetString(o, "error", ""));
  return g;
}

namespace {
Result<Labels> LabelsFromJsonStrict(const json::value& v, const std::string& field) {
  const Error bad =
      MakeError(ErrorCode::kInvalidArgument, "'" + field + "' must be an object of strings");
  if (!v.is_object()) return bad;
  Labels labels;
  for (const auto& [key, value] : v.as_object()) {
    if (!value.is_string() || key.empty()) return bad;
    labels[std::string(key)] = std::string(value.as_string());
  }
  return labels;
}
}  // namespace

Result<NodeFacts> FactsFromJson(const json::value& v) {
  if (!v.is_object()) return MakeError(ErrorCode::kInvalidArgument, "facts must be an object");
  const auto& o = v.as_object();
  NodeFacts f;
  GF_TRY_ASSIGN(f.hostname, GetString(o, "hostname"));
  if (const auto* labels = o.if_contains("labels"); labels && !labels->is_null()) {
    GF_TRY_ASSIGN(f.labels, LabelsFromJsonStrict(*labels, "labels"));
  }
  GF_TRY_ASSIGN(f.os, GetString(o, "os", ""));
  GF_TRY_ASSIGN(f.kernel, GetString(o, "kernel", ""));
  GF_TRY_ASSIGN(f.driver_version, GetString(o, "driver_version", ""));
  GF_TRY_ASSIGN(f.cuda_driver_version, GetString(o, "cuda_driver_version", ""));
  GF_TRY_ASSIGN(f.container_toolkit, GetString(o, "container_toolkit", ""));
  GF_TRY_ASSIGN(f.agent_version, GetString(o, "agent_version", ""));
  GF_TRY_ASSIGN(f.backend, GetString(o, "backend", ""));
  GF_TRY_ASSIGN(f.image_id, GetString(o, "image_id", ""));
  if (const auto* list = o.if_contains("nics")) {
    if (!list->is_array()) return MakeError(ErrorCode::kInvalidArgument, "'nics' must be a list");
    for (const auto& e : list->as_array()) {
      if (!e.is_object()) return MakeError(ErrorCode::kInvalidArgument, "a NIC must be an object");
      Nic n;
      GF_TRY_ASSIGN(n.name, GetString(e.as_object(), "name"));
      GF_TRY_ASSIGN(n.fw_version, GetString(e.as_object(), "fw_version", ""));
      GF_TRY_ASSIGN(n.board_id, GetString(e.as_object(), "board_id", ""));
      GF_TRY_ASSIGN(n.hca_type, GetString(e.as_object(), "hca_type", ""));
      if (const auto* pk = e.as_object().if_contains("pkeys"); pk && !pk->is_null()) {
        if (!pk->is_object()) {
          return MakeError(ErrorCode::kInvalidArgument, "a NIC's 'pkeys' must be an object");
        }
        for (const auto& [port, keys] : pk->as_object()) {
          int number = 0;
          auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
          if (ec != std::errc() || end != port.data() + port.size() || !keys.is_array()) {
            return MakeError(ErrorCode::kInvalidArgument,
                             "a NIC's 'pkeys' maps port numbers to lists of keys");
          }
          auto& list = n.pkeys[number];
          for (const auto& k : keys.as_array()) {
            if (!k.is_string()) {
              return MakeError(ErrorCode::kInvalidArgument, "a partition key must be a string");
            }
            list.emplace_back(k.as_string());
          }
        }
      }
      f.nics.push_back(std::move(n));
    }
  }
  if (const auto* d = o.if_contains("device_files"); d && !d->is_null()) {
    if (!d->is_array()) {
      return MakeError(ErrorCode::kInvalidArgument, "'device_files' must be a list");
    }
    f.device_files.emplace();
    for (const auto& e : d->as_array()) {
      if (!e.is_object()) {
        return MakeError(ErrorCode::kInvalidArgument, "a device file must be an object");
      }
      DeviceFile file;
      GF_TRY_ASSIGN(file.path, GetString(e.as_object(), "path"));
      GF_TRY_ASSIGN(file.mode, GetString(e.as_object(), "mode", ""));
      GF_TRY_ASSIGN(file.group, GetString(e.as_object(), "group", ""));
      f.device_files->push_back(std::move(file));
    }
  }
  if (const auto* p = o.if_contains("packages")) {
    if (!p->is_object()) {
      return MakeError(ErrorCode::kInvalidArgument, "'packages' must be an object");
    }
    f.packages.emplace();
    for (const auto& [name, version] : p->as_object()) {
      if (!version.is_string()) {
        return MakeError(ErrorCode::kInvalidArgument, "a package's version must be a string");
      }
      (*f.packages)[std::string(name)] = std::string(version.as_string());
    }
  }
  return f;
}

}  // namespace gpufleet
