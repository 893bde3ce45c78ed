#include "config/fleet_spec.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <set>
#include <tuple>

#include "common/clock.h"
#include "common/strings.h"
#include "common/url.h"
#include "config/fleet_yaml.h"
#include "model/compat.h"
#include "model/profile.h"
#include "model/scaling_policy.h"
#include "model/yaml_input.h"

namespace gpufleet {
namespace {

constexpr int kMaxGpusPerNode = 16;
constexpr int kMaxPoolSize = 100000;

class Validator : YamlFields {
 public:
  Validator(std::string_view filename, const GpuCatalog& catalog)
      : YamlFields(filename), catalog_(catalog) {}

  Result<FleetSpec> Run(const YAML::Node& root) {
    if (!root.IsMap()) return Bad(root, "", "the document must be a mapping");
    GF_TRY(Only(root, "", {"apiVersion", "kind", "metadata", "teams", "clusters", "channels"}));
    if (auto v = root["apiVersion"]; !v || v.as<std::string>("") != "gpufleet/v1") {
      return Bad(v ? v : root, "apiVersion", "must be 'gpufleet/v1'");
    }
    if (auto k = root["kind"]; !k || k.as<std::string>("") != "Fleet") {
      return Bad(k ? k : root, "kind", "must be 'Fleet'");
    }
    auto clusters = root["clusters"];
    if (!clusters || !clusters.IsSequence() || clusters.size() == 0) {
      return Bad(clusters ? clusters : root, "clusters", "must be a non-empty list");
    }
    FleetSpec spec;
    std::set<std::string> cluster_names, pool_names, node_names;
    for (size_t i = 0; i < clusters.size(); ++i) {
      const YAML::Node c = clusters[i];
      std::string path = "clusters[" + std::to_string(i) + "]";
      if (!c.IsMap()) return Bad(c, path, "must be a mapping");
      GF_TRY(Only(c, path,
                  {"name", "type", "site", "team", "labels", "remediation", "scheduler", "tier",
                   "requires", "driver_branch", "maintenance_windows", "profile", "pools"}));
      Cluster cluster;
      GF_TRY_ASSIGN(cluster.name, Name(c, path));
      if (!cluster_names.insert(cluster.name).second) {
        return Bad(c["name"], path + ".name", "duplicate cluster '" + cluster.name + "'");
      }
      std::string type;
      GF_TRY_ASSIGN(type, String(c, path, "type", true));
      auto parsed = ParseClusterType(type);
      if (!parsed) {
        return Bad(c["type"], path + ".type",
                   "'" + type + "' is not one of training, inference, development, edge");
      }
      cluster.type = *parsed;
      GF_TRY_ASSIGN(cluster.site, String(c, path, "site", true));
      GF_TRY_ASSIGN(cluster.team, TeamRef(c, path));
      GF_TRY_ASSIGN(cluster.labels, LabelMap(c, path));
      GF_TRY(RemediationPolicy(c, path, cluster.remediation));
      GF_TRY(SchedulerBlock(c, path, cluster.scheduler));
      GF_TRY(LifecycleFields(c, path, cluster.lifecycle));
      auto pools = c["pools"];
      if (pools && !pools.IsSequence()) return Bad(pools, path + ".pools", "must be a list");
      for (size_t j = 0; pools && j < pools.size(); ++j) {
        const YAML::Node p = pools[j];
        std::string ppath = path + ".pools[" + std::to_string(j) + "]";
        auto pool = ReadPool(p, ppath, cluster.name, spec, pool_names, node_names);
        if (!pool.ok()) return pool.error();
        spec.pools.push_back(std::move(pool).value());
      }
      spec.clusters.push_back(std::move(cluster));
    }
    GF_TRY(Channels(root, spec));
    GF_TRY(Teams(root, spec));
    return spec;
  }

  // One pool of a cluster; its scaling block, if any, goes to `spec`.
  Result<Pool> ReadPool(const YAML::Node& p, const std::string& ppath, const std::string& cluster,
                        FleetSpec& spec, std::set<std::string>& pool_names,
                        std::set<std::string>& node_names) {
    if (!p.IsMap()) return Bad(p, ppath, "must be a mapping");
    GF_TRY(Only(p, ppath,
                {"name", "gpu_model", "gpus_per_node", "size", "team", "labels", "exporters",
                 "scrape_interval", "scaling", "tier", "requires", "driver_branch",
                 "maintenance_windows", "profile"}));
    Pool pool;
    pool.cluster = cluster;
    GF_TRY_ASSIGN(pool.name, Name(p, ppath));
    if (!pool_names.insert(pool.name).second) {
      return Bad(p["name"], ppath + ".name",
                 "duplicate pool '" + pool.name + "' (pool names are unique in the fleet)");
    }
    GF_TRY_ASSIGN(pool.gpu_model, String(p, ppath, "gpu_model", true));
    if (!catalog_.Find(pool.gpu_model)) {
      std::string known;
      for (const auto& m : catalog_.models()) known += (known.empty() ? "" : ", ") + m.id;
      return Bad(p["gpu_model"], ppath + ".gpu_model",
                 "unknown GPU model '" + pool.gpu_model + "' (known: " + known + ")");
    }
    GF_TRY_ASSIGN(pool.gpus_per_node, Int(p, ppath, "gpus_per_node", 1, kMaxGpusPerNode, 8));
    GF_TRY_ASSIGN(pool.size, Int(p, ppath, "size", 0, kMaxPoolSize, 0));
    GF_TRY_ASSIGN(pool.team, TeamRef(p, ppath));
    GF_TRY_ASSIGN(pool.labels, LabelMap(p, ppath));
    GF_TRY(Exporters(p, ppath, pool, node_names));
    GF_TRY(LifecycleFields(p, ppath, pool.lifecycle));
    if (auto sc = p["scaling"]) {
      auto parsed = Scaling(sc, ppath + ".scaling");
      if (!parsed.ok()) return parsed.error();
      parsed->pool = pool.name;
      if (parsed->policy.max_nodes > kMaxPoolSize) {
        return Bad(sc["max_nodes"], ppath + ".scaling.max_nodes",
                   "must be at most " + std::to_string(kMaxPoolSize));
      }
      spec.scaling.push_back(std::move(parsed).value());
    }
    return pool;
  }

 private:
  // `team:` names the owning team (checked against the teams where the file is applied).
  Result<std::string> TeamRef(const YAML::Node& map, const std::string& path) const {
    std::string team;
    GF_TRY_ASSIGN(team, String(map, path, "team", false));
    if (!team.empty() && !IsValidName(team)) {
      return Bad(map["team"], path + ".team", "'" + team + "' is not a team name");
    }
    return team;
  }

  Result<std::string> Name(const YAML::Node& map, const std::string& path) const {
    std::string name;
    GF_TRY_ASSIGN(name, String(map, path, "name", true));
    if (!IsValidName(name)) {
      return Bad(map["name"], path + ".name",
                 "'" + Printable(name, 80) +
                     "' must be lower-case letters, digits, '-' or '.', at most 63");
    }
    // A plain `name: true` (or null, yes, 1e3) is another type to other YAML readers: a name is
    // a string, so an ambiguous one must be quoted.
    if (map["name"].Tag() == "?" && LooksTyped(name)) {
      return Bad(
          map["name"], path + ".name",
          "'" + name + "' reads as a boolean, null or number in YAML: quote it (\"" + name + "\")");
    }
    return name;
  }

  static bool LooksTyped(const std::string& v) {
    static const std::set<std::string> kWords = {"true", "false", "yes",  "no",  "on", "off",
                                                 "y",    "n",     "null", "nan", "inf"};
    if (kWords.count(v)) return true;
    return !v.empty() && v.find_first_not_of("0123456789.e-") == std::string::npos &&
           std::isdigit(static_cast<unsigned char>(v[0]));
  }

  Result<int> Int(const YAML::Node& map, const std::string& path, const char* key, int lo, int hi,
                  int fallback) const {
    auto v = map[key];
    if (!v) return fallback;
    int n = 0;
    if (!v.IsScalar() || !YAML::convert<int>::decode(v, n)) {
      return Bad(v, path + "." + key, "must be an integer");
    }
    if (n < lo || n > hi) {
      return Bad(
          v, path + "." + key,
          std::to_string(n) + " is out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    }
    return n;
  }

  // remediation: {cordon_unhealthy, drain_unhealthy, max_share, reset_gpu, reboot_node}.
  Status RemediationPolicy(const YAML::Node& c, const std::string& path, Remediation& r) const {
    auto v = c["remediation"];
    if (!v) return {};
    std::string rpath = path + ".remediation";
    if (!v.IsMap()) return Bad(v, rpath, "must be a mapping");
    GF_TRY(Only(v, rpath,
                {"cordon_unhealthy", "drain_unhealthy", "max_share", "reset_gpu", "reboot_node"}));
    for (auto [key, out] : {std::pair<const char*, bool*>{"cordon_unhealthy", &r.cordon_unhealthy},
                            {"drain_unhealthy", &r.drain_unhealthy},
                            {"reset_gpu", &r.reset_gpu},
                            {"reboot_node", &r.reboot_node}}) {
      if (auto b = v[key]) {
        if (!b.IsScalar() || !YAML::convert<bool>::decode(b, *out)) {
          return Bad(b, rpath + "." + key, "must be true or false");
        }
      }
    }
    if (auto s = v["max_share"]) {
      if (!s.IsScalar() || !YAML::convert<double>::decode(s, r.max_share) || r.max_share < 0 ||
          r.max_share > 1) {
        return Bad(s, rpath + ".max_share", "must be a number from 0 to 1");
      }
    }
    return {};
  }

  // scheduler: {type: slurm, bin_dir, conf, partitions, poll, node_name} (model/types.h).
  Status SchedulerBlock(const YAML::Node& c, const std::string& path, Scheduler& s) const {
    auto v = c["scheduler"];
    if (!v) return {};
    std::string spath = path + ".scheduler";
    GF_TRY(Only(v, spath, {"type", "bin_dir", "conf", "partitions", "poll", "node_name"}));
    GF_TRY_ASSIGN(s.type, String(v, spath, "type", true));
    if (s.type != "slurm") {
      return Bad(v["type"], spath + ".type", "'" + Printable(s.type, 40) + "' is not one of slurm");
    }
    for (auto [key, out, required] :
         {std::tuple<const char*, std::string*, bool>{"bin_dir", &s.bin_dir, false},
          {"conf", &s.conf, false}}) {
      std::string given;
      GF_TRY_ASSIGN(given, String(v, spath, key, required));
      if (given.empty()) continue;
      if (given[0] != '/' || given.find_first_of(std::string("\0\n\r", 3)) != std::string::npos) {
        return Bad(v[key], spath + "." + key, "must be an absolute path");
      }
      *out = given;
    }
    if (auto list = v["partitions"]) {
      if (!list.IsSequence()) return Bad(list, spath + ".partitions", "must be a list");
      for (size_t i = 0; i < list.size(); ++i) {
        std::string at = spath + ".partitions[" + std::to_string(i) + "]";
        std::string name = list[i].IsScalar() ? list[i].as<std::string>() : "";
        if (name.empty() || name.size() > 64 ||
            name.find_first_not_of(
                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
                std::string::npos) {
          return Bad(list[i], at, "must be a partition name (letters, digits, '_', '-', '.')");
        }
        s.partitions.push_back(name);
      }
    }
    if (auto p = v["poll"]) {
      int64_t ms = p.IsScalar() ? ParseDurationMs(p.as<std::string>()) : -1;
      if (ms < 1'000 || ms > 3'600'000) {
        return Bad(p, spath + ".poll", "must be a duration from 1s to 1h");
      }
      s.poll_ms = ms;
    }
    std::string tmpl;
    GF_TRY_ASSIGN(tmpl, String(v, spath, "node_name", false));
    if (!tmpl.empty()) {
      if (tmpl.find("{name}") == std::string::npos &&
          tmpl.find("{hostname}") == std::string::npos) {
        return Bad(v["node_name"], spath + ".node_name", "must contain {name} or {hostname}");
      }
      // Slurm node names go to scontrol as one argument ("NodeName=N"): no space or '=' in one.
      std::string rest = SchedulerNodeName(tmpl, "x");
      if (rest.size() > 64 ||
          rest.find_first_not_of(
              "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
              std::string::npos) {
        return Bad(v["node_name"], spath + ".node_name",
                   "may hold only letters, digits, '_', '-', '.' besides {name} and {hostname}");
      }
      s.node_name = tmpl;
    }
    return {};
  }

  // tier, requires: {cuda, gpu_operator, kubernetes} and driver_branch: what the workloads need
  // of their drivers (model/compat.h checks a driver against them). The branch is kept as "R580".
  Status LifecycleFields(const YAML::Node& m, const std::string& path, Lifecycle& l) const {
    GF_TRY_ASSIGN(l.tier, String(m, path, "tier", false));
    GF_TRY_ASSIGN(l.driver_branch, String(m, path, "driver_branch", false));
    if (auto r = m["requires"]) {
      if (!r.IsMap()) return Bad(r, path + ".requires", "must be a mapping");
      GF_TRY(Only(r, path + ".requires", {"cuda", "gpu_operator", "kubernetes"}));
      GF_TRY_ASSIGN(l.cuda, String(r, path + ".requires", "cuda", false));
      GF_TRY_ASSIGN(l.gpu_operator, String(r, path + ".requires", "gpu_operator", false));
      GF_TRY_ASSIGN(l.kubernetes, String(r, path + ".requires", "kubernetes", false));
    }
    CompatNeeds needs = ToNeeds(l);
    if (std::string why = ValidateNeeds(needs); !why.empty()) {
      const size_t colon = why.find(": ");
      const std::string field = why.substr(0, colon);
      YAML::Node at = field.rfind("requires.", 0) == 0 ? m["requires"][field.substr(9)] : m[field];
      return Bad(at, path + "." + field, why.substr(colon + 2));
    }
    if (!l.driver_branch.empty()) l.driver_branch = NormalizeBranch(l.driver_branch);
    GF_TRY(ProfileField(m, path, l.profile));
    return Windows(m, path, l.windows);
  }

  // maintenance_windows: [{days: [sat, sun], from: "02:00", to: "06:00", timezone: UTC}]
  Status Windows(const YAML::Node& m, const std::string& path,
                 std::vector<MaintenanceWindow>& out) const {
    auto list = m["maintenance_windows"];
    if (!list) return {};
    std::string lpath = path + ".maintenance_windows";
    if (!list.IsSequence()) return Bad(list, lpath, "must be a list");
    for (size_t i = 0; i < list.size(); ++i) {
      const YAML::Node w = list[i];
      std::string wpath = lpath + "[" + std::to_string(i) + "]";
      if (!w.IsMap()) return Bad(w, wpath, "must be a mapping");
      GF_TRY(Only(w, wpath, {"days", "from", "to", "timezone"}));
      std::vector<std::string> days;
      auto d = w["days"];
      if (!d || !d.IsSequence()) return Bad(d ? d : w, wpath + ".days", "must be a list of days");
      for (const auto& day : d) {
        if (!day.IsScalar()) return Bad(day, wpath + ".days", "must be a list of days");
        days.push_back(day.as<std::string>());
      }
      std::string from, to, zone;
      GF_TRY_ASSIGN(from, String(w, wpath, "from", true));
      GF_TRY_ASSIGN(to, String(w, wpath, "to", true));
      GF_TRY_ASSIGN(zone, String(w, wpath, "timezone", false));
      auto made = MakeWindow(days, from, to, zone);
      if (!made.ok()) {
        const std::string& why = made.error().message;
        const size_t colon = why.find(": ");
        const std::string field = why.substr(0, colon);
        return Bad(w[field] ? w[field] : w, wpath + "." + field, why.substr(colon + 2));
      }
      out.push_back(std::move(made).value());
    }
    return {};
  }

  // exporters: [{node, url}] and scrape_interval: nodes that run dcgm-exporter.
  Status Exporters(const YAML::Node& p, const std::string& path, Pool& pool,
                   std::set<std::string>& node_names) const {
    if (auto v = p["scrape_interval"]) {
      if (!v.IsScalar()) return Bad(v, path + ".scrape_interval", "must be a duration");
      int64_t ms = ParseDurationMs(v.as<std::string>());
      if (ms < 1'000 || ms > 3'600'000) {
        return Bad(v, path + ".scrape_interval",
                   "'" + v.as<std::string>() + "' must be a duration from 1s to 1h");
      }
      pool.scrape_interval_ms = ms;
    }
    auto list = p["exporters"];
    if (!list) return {};
    if (!list.IsSequence()) return Bad(list, path + ".exporters", "must be a list");
    for (size_t k = 0; k < list.size(); ++k) {
      const YAML::Node e = list[k];
      std::string epath = path + ".exporters[" + std::to_string(k) + "]";
      if (!e.IsMap()) return Bad(e, epath, "must be a mapping with node and url");
      GF_TRY(Only(e, epath, {"node", "url"}));
      ExporterTarget t;
      GF_TRY_ASSIGN(t.node, String(e, epath, "node", true));
      if (!IsValidName(t.node)) {
        return Bad(e["node"], epath + ".node",
                   "'" + t.node + "' must be lower-case letters, digits, '-' or '.', at most 63");
      }
      if (!node_names.insert(t.node).second) {
        return Bad(e["node"], epath + ".node", "node '" + t.node + "' is listed twice");
      }
      GF_TRY_ASSIGN(t.url, String(e, epath, "url", true));
      auto url = ParseHttpUrl(t.url, "9400");
      if (!url.ok()) return Bad(e["url"], epath + ".url", url.error().message);
      if (url->scheme != "http" && url->scheme != "https") {
        return Bad(e["url"], epath + ".url",
                   "'" + t.url + "': only http:// and https:// are scraped");
      }
      pool.exporters.push_back(std::move(t));
    }
    return {};
  }

  // channels: each a mapping with a unique name, handed on as JSON (the API checks the rest).
  Status Channels(const YAML::Node& root, FleetSpec& spec) const {
    auto list = root["channels"];
    if (!list) return {};
    if (!list.IsSequence()) return Bad(list, "channels", "must be a list");
    spec.channels.emplace();
    std::set<std::string> names;
    for (size_t i = 0; i < list.size(); ++i) {
      const YAML::Node c = list[i];
      std::string path = "channels[" + std::to_string(i) + "]";
      if (!c.IsMap()) return Bad(c, path, "must be a mapping");
      GF_TRY(Only(c, path, {"name", "type", "url", "secret", "matchers", "group_by"}));
      ChannelEntry entry;
      GF_TRY_ASSIGN(entry.name, Name(c, path));
      if (!names.insert(entry.name).second) {
        return Bad(c["name"], path + ".name", "duplicate channel '" + entry.name + "'");
      }
      YamlToJson(c, entry.json);
      entry.line = c.Mark().line + 1;
      spec.channels->push_back(std::move(entry));
    }
    return {};
  }

  // teams: each read as JSON by the team's parser (model/team.h); an error points at the
  // field's line.
  Status Teams(const YAML::Node& root, FleetSpec& spec) const {
    auto list = root["teams"];
    if (!list) return {};
    if (!list.IsSequence()) return Bad(list, "teams", "must be a list");
    spec.teams.emplace();
    std::set<std::string> names;
    for (size_t i = 0; i < list.size(); ++i) {
      const YAML::Node t = list[i];
      std::string path = "teams[" + std::to_string(i) + "]";
      if (!t.IsMap()) return Bad(t, path, "must be a mapping");
      GF_TRY(
          Only(t, path,
               {"name", "contacts", "channels", "budget_monthly", "projects", "slurm_accounts"}));
      std::string text, field;
      YamlToJson(t, text);
      auto team = ParseTeam(text, &field);
      if (!team.ok()) {
        std::string message = team.error().message;
        if (!field.empty() && message.rfind(field + ": ", 0) == 0) {
          message = message.substr(field.size() + 2);
        }
        return Bad(Locate(t, field), field.empty() ? path : path + "." + field, message);
      }
      if (!names.insert(team->name).second) {
        return Bad(t["name"], path + ".name", "duplicate team '" + team->name + "'");
      }
      spec.teams->push_back(std::move(team).value());
    }
    return {};
  }

  // scaling: the policy, read as JSON by the policy's parser (model/scaling_policy.h); an error
  // points at the field's line.
  Result<PoolScaling> Scaling(const YAML::Node& v, const std::string& path) const {
    if (!v.IsMap()) return Bad(v, path, "must be a mapping");
    std::string text;
    YamlToJson(v, text);
    std::string field;
    auto parsed = ParsePoolScaling(text, &field);
    if (parsed.ok()) return parsed;
    std::string message = parsed.error().message;
    if (!field.empty() && message.rfind(field + ": ", 0) == 0) {
      message = message.substr(field.size() + 2);
    }
    return Bad(Locate(v, field), field.empty() ? path : path + "." + field, message);
  }

  // profile: the golden profile, read as JSON by its parser (model/profile.h); an error points
  // at the field's line.
  Status ProfileField(const YAML::Node& m, const std::string& path, Profile& out) const {
    auto v = m["profile"];
    if (!v) return {};
    if (!v.IsMap()) return Bad(v, path + ".profile", "must be a mapping");
    std::string text;
    YamlToJson(v, text);
    auto parsed = ParseProfile(text);
    if (parsed.ok()) {
      out = std::move(parsed).value();
      return {};
    }
    const std::string& message = parsed.error().message;
    const size_t colon = message.find(": ");
    const std::string field = message.substr(0, colon);
    return Bad(Locate(v, field), path + ".profile." + field, message.substr(colon + 2));
  }

  // The node a field's path ("schedule[1].to") is about, followed as far as it goes.
  static YAML::Node Locate(const YAML::Node& v, const std::string& field) {
    YAML::Node at = v;
    std::string rest = field;
    while (!rest.empty()) {
      size_t end = rest.find_first_of(".[");
      std::string key = rest.substr(0, end);
      YAML::Node next = key.empty() ? YAML::Node() : at[key];
      if (!next) break;
      at = next;
      if (end != std::string::npos && rest[end] == '[') {
        size_t close = rest.find(']', end);
        size_t i = std::stoul(rest.substr(end + 1, close - end - 1));
        if (!at.IsSequence() || i >= at.size()) break;
        at = at[i];
        end = close + 1 < rest.size() ? close + 1 : std::string::npos;
      }
      rest = end == std::string::npos ? "" : rest.substr(end + 1);
    }
    return at;
  }

 private:
  Result<Labels> LabelMap(const YAML::Node& map, const std::string& path) const {
    Labels labels;
    auto v = map["labels"];
    if (!v) return labels;
    if (!v.IsMap()) return Bad(v, path + ".labels", "must be a mapping of strings");
    for (const auto& kv : v) {
      if (!kv.second.IsScalar()) {
        return Bad(kv.second, path + ".labels." + kv.first.as<std::string>(""), "must be a string");
      }
      labels[kv.first.as<std::string>()] = kv.second.as<std::string>();
    }
    return labels;
  }

  const GpuCatalog& catalog_;
};

}  // namespace

Result<FleetSpec> ParseFleetSpec(std::string_view yaml, std::string_view filename,
                                 const GpuCatalog& catalog) {
  auto root = LoadYamlInput(yaml, filename);
  if (!root.ok()) return root.error();
  return ParseFleetRoot(root.value(), filename, catalog);
}

// A YAML mapping as JSON text: plain scalars that read as numbers or booleans become those,
// quoted ones and everything else strings.
void YamlToJson(const YAML::Node& n, std::string& out) {
  if (n.IsMap()) {
    out += '{';
    bool first = true;
    for (const auto& kv : n) {
      if (!first) out += ',';
      first = false;
      AppendJsonString(out, kv.first.as<std::string>(""));
      out += ':';
      YamlToJson(kv.second, out);
    }
    out += '}';
  } else if (n.IsSequence()) {
    out += '[';
    for (size_t i = 0; i < n.size(); ++i) {
      if (i) out += ',';
      YamlToJson(n[i], out);
    }
    out += ']';
  } else if (n.IsScalar()) {
    std::string v = n.as<std::string>();
    double d = 0;
    bool plain = n.Tag() != "!";
    if (plain && (v == "true" || v == "false")) {
      out += v;
    } else if (plain && !v.empty() && v.find_first_not_of("0123456789.-+eE") == std::string::npos &&
               YAML::convert<double>::decode(n, d)) {
      out += v;
    } else {
      AppendJsonString(out, v);
    }
  } else {
    out += "null";
  }
}

Result<FleetSpec> ParseFleetRoot(const YAML::Node& root, std::string_view filename,
                                 const GpuCatalog& catalog) {
  try {
    return Validator(filename, catalog).Run(root);
  } catch (const YAML::Exception& e) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(filename) + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

}  // namespace gpufleet
