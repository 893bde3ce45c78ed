#include "proto/proto.h"

#include <algorithm>

#include "common/json_text.h"
#include "model/json.h"

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
    return {{"type", "inventory"}, {"gpus", GpusJson(m.gpus)}};
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
    json::object inject;
    if (m.inject.xid) inject["xid"] = *m.inject.xid;
    if (m.inject.ecc_dbe) inject["ecc_dbe"] = *m.inject.ecc_dbe;
    if (m.inject.temperature_c) inject["temperature_c"] = *m.inject.temperature_c;
    if (m.inject.lost) inject["lost"] = true;
    if (m.inject.clear) inject["clear"] = true;
    json::object o{{"type", "command"}, {"id", m.id}, {"gpu", m.gpu}};
    if (m.action.empty()) {
      o["inject"] = std::move(inject);
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

Result<Injection> InjectionFromJson(const json::object& o) {
  Injection in;
  for (const auto& kv : o) {
    std::string_view k = kv.key();
    if (k != "xid" && k != "ecc_dbe" && k != "temperature_c" && k != "lost" && k != "clear") {
      return MakeError(ErrorCode::kInvalidArgument,
                       "unknown field '" + std::string(k) +
                           "' (inject takes xid, ecc_dbe, temperature_c, lost, clear)");
    }
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
  if (!in.xid && !in.ecc_dbe && !in.temperature_c && !in.lost && !in.clear) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "say what to inject: xid, ecc_dbe, temperature_c, lost or clear");
  }
  return in;
}

std::string Encode(const Message& message) {
  json::object o = std::visit(Encoder{}, message);
  o["v"] = kProtoVersion;
  return JsonText(o);
}

Result<Message> Decode(std::string_view text) {
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
      if (!rv.is_array() || rv.as_array().size() < 2 || !rv.as_array()[0].is_number() ||
          !rv.as_array()[1].is_number()) {
        return MakeError(ErrorCode::kInvalidArgument, "each row is [time_ms, gpu, values...]");
      }
      const auto& row = rv.as_array();
      SampleRow r;
      r.time_ms = row[0].to_number<int64_t>();
      r.gpu = row[1].to_number<int>();
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
        if (!e.is_array() || e.as_array().size() != 4 || !e.as_array()[0].is_number() ||
            !e.as_array()[1].is_number() || !e.as_array()[2].is_string() ||
            !e.as_array()[3].is_number()) {
          return MakeError(ErrorCode::kInvalidArgument,
                           "each event is [time_ms, gpu, kind, value]");
        }
        const auto& a = e.as_array();
        m.events.push_back({a[0].to_number<int64_t>(), a[1].to_number<int>(),
                            std::string(a[2].as_string()), a[3].to_number<int64_t>()});
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
        !IsNodeAction(m.action)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "unknown action '" + m.action +
                           "': reset_gpu, reboot_node, install-driver, flash-gpu-firmware, "
                           "flash-nic-firmware, reboot, reset-gpu or validate");
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

}  // namespace gpufleet::proto
