#include "proto/proto.h"

#include <algorithm>
#include <cstdlib>

#include "common/json_text.h"
#include "model/json.h"
#include "model/profile.h"

namespace json = boost::json;

namespace gpufleet::proto {

bool IsNodeAction(std::string_view action) {
  return std::find(kNodeActions.begin(), kNodeActions.end(), action) != kNodeActions.end();
}

namespace {

json::array GpusJson(const std::vector<Gpu>& gpus) {
  json::array a;
  for (const auto& g : gpus) a.push_back(ToJson(g));
  return a;
}

Result<std::vector<Gpu>> GpusFrom(const json::object& o) {
  std::vector<Gpu> gpus;
  auto it = o.find("gpus");
  if (it == o.end()) return gpus;
  if (!it->value().is_array())
    return MakeError(ErrorCode::kInvalidArgument, "'gpus' must be a list");
  for (const auto& v : it->value().as_array()) {
    Gpu g;
    GF_TRY_ASSIGN(g, GpuFromJson(v));
    gpus.push_back(std::move(g));
  }
  return gpus;
}

struct Encoder {
  json::object operator()(const Hello& m) const {
    json::object o{{"type", "hello"},
                   {"facts", ToJson(m.facts)},
                   {"gpus", GpusJson(m.gpus)},
                   {"simulated", m.simulated}};
    if (!m.join_token.empty()) o["join_token"] = m.join_token;
    if (!m.node_token.empty()) o["node_token"] = m.node_token;
    return o;
  }
  json::object operator()(const Welcome& m) const {
    return {{"type", "welcome"},          {"node", m.node},
            {"cluster", m.cluster},       {"pool", m.pool},
            {"node_token", m.node_token}, {"heartbeat_interval_ms", m.heartbeat_interval_ms}};
  }
  json::object operator()(const Heartbeat& m) const {
    return {{"type", "heartbeat"}, {"seq", m.seq}, {"time_ms", m.time_ms}};
  }
  json::object operator()(const Inventory& m) const {
    json::object o{{"type", "inventory"}, {"gpus", GpusJson(m.gpus)}};
    if (m.facts) o["facts"] = ToJson(*m.facts);
    return o;
  }
  json::object operator()(const Samples& m) const {
    json::array rows;
    rows.reserve(m.rows.size());
    for (const auto& r : m.rows) {
      json::array row;
      row.reserve(2 + kFieldCount);
      row.push_back(r.time_ms);
      row.push_back(r.gpu);
      for (size_t i = 0; i < kFieldCount; ++i) {
        if (r.present & (1u << i)) {
          row.push_back(r.values[i]);
        } else {
          row.push_back(nullptr);
        }
      }
      rows.push_back(std::move(row));
    }
    json::object o{{"type", "samples"}, {"seq", m.seq}, {"rows", std::move(rows)}};
    if (!m.events.empty()) {
      json::array events;
      for (const auto& e : m.events)
        events.push_back(json::array{e.time_ms, e.gpu, e.kind, e.value});
      o["events"] = std::move(events);
    }
    return o;
  }
  json::object operator()(const Command& m) const {
    json::object o{{"type", "command"}, {"id", m.id}, {"gpu", m.gpu}};
    if (m.action.empty()) {
      o["inject"] = InjectionJson(m.inject);
    } else {
      o["action"] = m.action;
    }
    if (!m.args.empty()) {
      json::array args;
      for (const auto& a : m.args) args.emplace_back(a);
      o["args"] = std::move(args);
    }
    if (m.timeout_ms > 0) o["timeout_ms"] = m.timeout_ms;
    if (m.sim_faulty) o["sim_faulty"] = true;
    if (m.action == kSimLoadAction) {
      json::array loads;
      for (const auto& l : m.loads)
        loads.push_back(json::array{l.gpu, l.job, l.profile, l.since_ms});
      o["loads"] = std::move(loads);
    }
    return o;
  }
  json::object operator()(const CommandResult& m) const {
    return {{"type", "command_result"},
            {"id", m.id},
            {"gpu", m.gpu},
            {"action", m.action},
            {"ok", m.ok},
            {"message", m.message},
            {"exit_code", m.exit_code},
            {"duration_ms", m.duration_ms}};
  }
  json::object operator()(const Ack& m) const { return {{"type", "ack"}, {"seq", m.seq}}; }
  json::object operator()(const ErrorMessage& m) const {
    return {{"type", "error"}, {"code", m.code}, {"message", m.message}};
  }
};

}  // namespace

json::object InjectionJson(const Injection& in) {
  json::object o;
  if (in.xid) o["xid"] = *in.xid;
  if (in.ecc_dbe) o["ecc_dbe"] = *in.ecc_dbe;
  if (in.temperature_c) o["temperature_c"] = *in.temperature_c;
  if (in.lost) o["lost"] = true;
  if (in.clear) o["clear"] = true;
  for (const auto& [setting, value] : in.settings) {
    // Numbers as numbers, as the API takes them.
    if (setting == "power_limit_w") {
      o[setting] = std::atoi(value.c_str());
    } else {
      o[setting] = value;
    }
  }
  if (!in.facts.empty()) {
    json::object facts;
    for (const auto& [k, v] : in.facts) facts[k] = v;
    o["facts"] = std::move(facts);
  }
  if (!in.packages_add.empty() || !in.packages_remove.empty()) {
    json::object packages;
    auto list = [&](const char* key, const std::vector<std::string>& v) {
      if (!v.empty()) packages[key] = json::value_from(v);
    };
    list("add", in.packages_add);
    list("remove", in.packages_remove);
    o["packages"] = std::move(packages);
  }
  return o;
}

namespace {
constexpr std::string_view kSettingKeys[] = {"persistence_mode",   "ecc_mode",
                                             "compute_mode",       "power_limit_w",
                                             "application_clocks", "mig_mode"};
bool IsSettingKey(std::string_view k) {
  return std::find(std::begin(kSettingKeys), std::end(kSettingKeys), k) != std::end(kSettingKeys);
}

Result<std::vector<std::string>> StringList(const json::object& o, const char* key,
                                            const std::string& path) {
  std::vector<std::string> out;
  const auto* v = o.if_contains(key);
  if (!v) return out;
  if (!v->is_array()) {
    return MakeError(ErrorCode::kInvalidArgument, "'" + path + "' must be a list of strings");
  }
  for (const auto& e : v->as_array()) {
    if (!e.is_string() || e.as_string().empty()) {
      return MakeError(ErrorCode::kInvalidArgument, "'" + path + "' must be a list of strings");
    }
    out.emplace_back(e.as_string());
  }
  return out;
}

// A sim-load command's "loads": [[gpu, job, profile, since_ms], ...].
Result<std::vector<GpuLoad>> LoadsFromJson(const json::object& o) {
  std::vector<GpuLoad> out;
  const auto* v = o.if_contains("loads");
  if (!v) return out;
  auto bad = [] {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'loads' must be a list of [gpu, job, profile, since_ms]");
  };
  if (!v->is_array()) return bad();
  for (const auto& e : v->as_array()) {
    const auto* a = e.if_array();
    if (!a || a->size() != 4 || !(*a)[0].is_int64() || !(*a)[1].is_int64() ||
        !(*a)[2].is_string() || !(*a)[3].is_int64()) {
      return bad();
    }
    out.push_back({static_cast<int>((*a)[0].as_int64()), (*a)[1].as_int64(),
                   std::string((*a)[2].as_string()), (*a)[3].as_int64()});
  }
  return out;
}
// inject's "facts": {kernel, os, image_id}.
Status ReadInjectedFacts(const json::value* facts, Injection& in) {
  if (!facts->is_object() || facts->as_object().empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'facts' must be an object of kernel, os or image_id");
  }
  for (const auto& [k, v] : facts->as_object()) {
    if (std::find(kInjectableFacts.begin(), kInjectableFacts.end(), k) == kInjectableFacts.end()) {
      return MakeError(ErrorCode::kInvalidArgument, "facts." + std::string(k) +
                                                        ": not a fact a simulated node can change "
                                                        "(kernel, os, image_id)");
    }
    if (!v.is_string() || v.as_string().empty()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "facts." + std::string(k) + ": must be a non-empty string");
    }
    in.facts[std::string(k)] = std::string(v.as_string());
  }
  return {};
}

// inject's "packages": {add: ["name=version", ...], remove: ["name", ...]}.
Status ReadInjectedPackages(const json::value* packages, Injection& in) {
  if (!packages->is_object()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'packages' must be {\"add\": [...], "
                     "\"remove\": [...]}");
  }
  for (const auto& kv : packages->as_object()) {
    if (kv.key() != "add" && kv.key() != "remove") {
      return MakeError(ErrorCode::kInvalidArgument,
                       "packages." + std::string(kv.key()) + ": unknown (add, remove)");
    }
  }
  GF_TRY_ASSIGN(in.packages_add, StringList(packages->as_object(), "add", "packages.add"));
  GF_TRY_ASSIGN(in.packages_remove, StringList(packages->as_object(), "remove", "packages.remove"));
  for (const auto& p : in.packages_add) {
    size_t eq = p.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == p.size()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "packages.add: '" + p + "' must be name=version");
    }
  }
  if (in.packages_add.empty() && in.packages_remove.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "packages: say what to add or remove");
  }
  return {};
}

}  // namespace

Result<Injection> InjectionFromJson(const json::object& o) {
  Injection in;
  for (const auto& kv : o) {
    std::string_view k = kv.key();
    if (k != "xid" && k != "ecc_dbe" && k != "temperature_c" && k != "lost" && k != "clear" &&
        k != "facts" && k != "packages" && !IsSettingKey(k)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "unknown field '" + std::string(k) +
                           "' (inject takes xid, ecc_dbe, temperature_c, lost, clear, facts, "
                           "packages, persistence_mode, ecc_mode, compute_mode, power_limit_w, "
                           "application_clocks, mig_mode)");
    }
    if (IsSettingKey(k)) {
      std::string value;
      if (kv.value().is_int64()) {
        value = std::to_string(kv.value().as_int64());
      } else if (kv.value().is_string()) {
        value = std::string(kv.value().as_string());
      } else {
        return MakeError(ErrorCode::kInvalidArgument,
                         "field '" + std::string(k) + "' must be a string or a number");
      }
      if (auto v = ParseGpuSetting(k, value); !v.ok()) return v.error();
      in.settings[std::string(k)] = value;
    }
  }
  if (const auto* facts = o.if_contains("facts")) GF_TRY(ReadInjectedFacts(facts, in));
  if (const auto* packages = o.if_contains("packages")) {
    GF_TRY(ReadInjectedPackages(packages, in));
  }
  auto bounded = [&](const char* key, int lo, int hi) -> Result<std::optional<int>> {
    if (!o.contains(key)) return std::optional<int>();
    int64_t v = 0;
    GF_TRY_ASSIGN(v, GetInt(o, key));
    if (v < lo || v > hi) {
      return MakeError(ErrorCode::kInvalidArgument, "field '" + std::string(key) + "' must be " +
                                                        std::to_string(lo) + ".." +
                                                        std::to_string(hi));
    }
    return std::optional<int>(static_cast<int>(v));
  };
  GF_TRY_ASSIGN(in.xid, bounded("xid", 1, 1023));
  GF_TRY_ASSIGN(in.ecc_dbe, bounded("ecc_dbe", 1, 1'000'000));
  GF_TRY_ASSIGN(in.temperature_c, bounded("temperature_c", 0, 150));
  GF_TRY_ASSIGN(in.lost, GetBool(o, "lost", false));
  GF_TRY_ASSIGN(in.clear, GetBool(o, "clear", false));
  if (!in.gpu_part() && in.facts.empty() && in.packages_add.empty() && in.packages_remove.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "say what to inject: xid, ecc_dbe, temperature_c, lost, clear, a GPU "
                     "setting, facts or packages");
  }
  return in;
}

std::string Encode(const Message& message) {
  json::object o = std::visit(Encoder{}, message);
  o["v"] = kProtoVersion;
  return JsonText(o);
}

namespace {

// An integer in a row of numbers (a fraction or a number out of range is not one).
std::optional<int64_t> IntegerIn(const json::value& v) {
  if (v.is_int64()) return v.as_int64();
  if (v.is_uint64() && v.as_uint64() <= INT64_MAX) return static_cast<int64_t>(v.as_uint64());
  return std::nullopt;
}

// A GPU's index on its node, as rows and events carry it.
constexpr int64_t kMaxGpuIndex = 1023;

Result<Message> DecodeObject(std::string_view text) {
  json::object o;
  GF_TRY_ASSIGN(o, ParseObject(text));
  int64_t version = 0;
  GF_TRY_ASSIGN(version, GetInt(o, "v"));
  if (version < 1 || version > kProtoVersion) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "unsupported protocol version " + std::to_string(version) +
                         " (this controller speaks 1.." + std::to_string(kProtoVersion) + ")");
  }
  std::string type;
  GF_TRY_ASSIGN(type, GetString(o, "type"));
  if (type == "hello") {
    Hello m;
    GF_TRY_ASSIGN(m.join_token, GetString(o, "join_token", ""));
    GF_TRY_ASSIGN(m.node_token, GetString(o, "node_token", ""));
    auto facts = o.find("facts");
    if (facts == o.end()) return MakeError(ErrorCode::kInvalidArgument, "hello needs 'facts'");
    GF_TRY_ASSIGN(m.facts, FactsFromJson(facts->value()));
    GF_TRY_ASSIGN(m.gpus, GpusFrom(o));
    GF_TRY_ASSIGN(m.simulated, GetBool(o, "simulated", false));
    return Message(std::move(m));
  }
  if (type == "welcome") {
    Welcome m;
    GF_TRY_ASSIGN(m.node, GetString(o, "node"));
    GF_TRY_ASSIGN(m.cluster, GetString(o, "cluster", ""));
    GF_TRY_ASSIGN(m.pool, GetString(o, "pool", ""));
    GF_TRY_ASSIGN(m.node_token, GetString(o, "node_token", ""));
    int64_t hb = 0;
    GF_TRY_ASSIGN(hb, GetInt(o, "heartbeat_interval_ms", 5000));
    m.heartbeat_interval_ms = static_cast<int>(hb);
    return Message(std::move(m));
  }
  if (type == "heartbeat") {
    Heartbeat m;
    GF_TRY_ASSIGN(m.seq, GetInt(o, "seq", 0));
    GF_TRY_ASSIGN(m.time_ms, GetInt(o, "time_ms", 0));
    return Message(m);
  }
  if (type == "inventory") {
    Inventory m;
    GF_TRY_ASSIGN(m.gpus, GpusFrom(o));
    if (const auto* facts = o.if_contains("facts"); facts && !facts->is_null()) {
      GF_TRY_ASSIGN(m.facts, FactsFromJson(*facts));
    }
    return Message(std::move(m));
  }
  if (type == "samples") {
    Samples m;
    GF_TRY_ASSIGN(m.seq, GetInt(o, "seq"));
    auto rows = o.find("rows");
    if (rows == o.end() || !rows->value().is_array()) {
      return MakeError(ErrorCode::kInvalidArgument, "samples need 'rows'");
    }
    for (const auto& rv : rows->value().as_array()) {
      const auto* row_array = rv.if_array();
      std::optional<int64_t> time_ms, gpu;
      if (row_array && row_array->size() >= 2) {
        time_ms = IntegerIn((*row_array)[0]);
        gpu = IntegerIn((*row_array)[1]);
      }
      if (!time_ms || !gpu || *time_ms < 0 || *gpu < 0 || *gpu > kMaxGpuIndex) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "each row is [time_ms, gpu, values...] with whole non-negative "
                         "time_ms and gpu (0.." +
                             std::to_string(kMaxGpuIndex) + ")");
      }
      const auto& row = *row_array;
      SampleRow r;
      r.time_ms = *time_ms;
      r.gpu = static_cast<int>(*gpu);
      for (size_t i = 2; i < row.size() && i - 2 < kFieldCount; ++i) {
        if (row[i].is_null()) continue;
        if (!row[i].is_number()) {
          return MakeError(ErrorCode::kInvalidArgument, "row values are numbers or null");
        }
        r.present |= 1u << (i - 2);
        r.values[i - 2] = row[i].to_number<double>();
      }
      m.rows.push_back(r);
    }
    if (auto ev = o.find("events"); ev != o.end() && ev->value().is_array()) {
      for (const auto& e : ev->value().as_array()) {
        const auto* a = e.if_array();
        std::optional<int64_t> time_ms, gpu, value;
        if (a && a->size() == 4 && (*a)[2].is_string()) {
          time_ms = IntegerIn((*a)[0]);
          gpu = IntegerIn((*a)[1]);
          value = IntegerIn((*a)[3]);
        }
        if (!time_ms || !gpu || !value || *time_ms < 0 || *gpu < 0 || *gpu > kMaxGpuIndex ||
            (*a)[2].as_string().size() > 64) {
          return MakeError(ErrorCode::kInvalidArgument,
                           "each event is [time_ms, gpu, kind, value]: whole numbers, gpu 0.." +
                               std::to_string(kMaxGpuIndex) + ", a kind of at most 64 bytes");
        }
        m.events.push_back(
            {*time_ms, static_cast<int>(*gpu), std::string((*a)[2].as_string()), *value});
      }
    }
    return Message(std::move(m));
  }
  if (type == "command") {
    Command m;
    GF_TRY_ASSIGN(m.id, GetInt(o, "id"));
    int64_t gpu = 0;
    GF_TRY_ASSIGN(gpu, GetInt(o, "gpu"));
    m.gpu = static_cast<int>(gpu);
    GF_TRY_ASSIGN(m.action, GetString(o, "action", ""));
    if (!m.action.empty() && m.action != "reset_gpu" && m.action != "reboot_node" &&
        m.action != kApplySettingAction && m.action != kSimLoadAction && !IsNodeAction(m.action)) {
      std::string known = "reset_gpu, reboot_node, apply-setting, sim-load";
      for (size_t i = 0; i < kNodeActions.size(); ++i) {
        known += (i + 1 == kNodeActions.size() ? " or " : ", ") + std::string(kNodeActions[i]);
      }
      return MakeError(ErrorCode::kInvalidArgument, "unknown action '" + m.action + "': " + known);
    }
    if (auto* args = o.if_contains("args")) {
      if (!args->is_array()) return MakeError(ErrorCode::kInvalidArgument, "'args' must be a list");
      for (const auto& a : args->as_array()) {
        if (!a.is_string()) {
          return MakeError(ErrorCode::kInvalidArgument, "'args' must be a list of strings");
        }
        m.args.emplace_back(a.as_string());
      }
    }
    GF_TRY_ASSIGN(m.timeout_ms, GetInt(o, "timeout_ms", 0));
    GF_TRY_ASSIGN(m.sim_faulty, GetBool(o, "sim_faulty", false));
    if (m.action == kSimLoadAction) GF_TRY_ASSIGN(m.loads, LoadsFromJson(o));
    if (!m.action.empty()) return Message(std::move(m));
    auto in = o.find("inject");
    if (in == o.end() || !in->value().is_object()) {
      return MakeError(ErrorCode::kInvalidArgument, "a command needs 'inject'");
    }
    GF_TRY_ASSIGN(m.inject, InjectionFromJson(in->value().as_object()));
    return Message(std::move(m));
  }
  if (type == "command_result") {
    CommandResult m;
    GF_TRY_ASSIGN(m.id, GetInt(o, "id"));
    int64_t gpu = 0;
    GF_TRY_ASSIGN(gpu, GetInt(o, "gpu"));
    m.gpu = static_cast<int>(gpu);
    GF_TRY_ASSIGN(m.action, GetString(o, "action", ""));
    GF_TRY_ASSIGN(m.message, GetString(o, "message", ""));
    auto ok = o.find("ok");
    if (ok == o.end() || !ok->value().is_bool()) {
      return MakeError(ErrorCode::kInvalidArgument, "a command result needs 'ok'");
    }
    m.ok = ok->value().as_bool();
    int64_t exit_code = -1;
    GF_TRY_ASSIGN(exit_code, GetInt(o, "exit_code", -1));
    m.exit_code = static_cast<int>(exit_code);
    GF_TRY_ASSIGN(m.duration_ms, GetInt(o, "duration_ms", 0));
    return Message(std::move(m));
  }
  if (type == "ack") {
    Ack m;
    GF_TRY_ASSIGN(m.seq, GetInt(o, "seq"));
    return Message(m);
  }
  if (type == "error") {
    ErrorMessage m;
    GF_TRY_ASSIGN(m.code, GetString(o, "code", "error"));
    GF_TRY_ASSIGN(m.message, GetString(o, "message", ""));
    return Message(std::move(m));
  }
  return MakeError(ErrorCode::kInvalidArgument, "unknown message type '" + type + "'");
}

}  // namespace

Result<Message> Decode(std::string_view text) {
  // A frame comes from the network: whatever it holds is an error value, never an exception
  // that unwinds a session (a fraction where an integer goes once did, and took the process).
  try {
    return DecodeObject(text);
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInvalidArgument, std::string("malformed message: ") + e.what());
  }
}

}  // namespace gpufleet::proto
