#include "proto/proto.h"

#include "model/json.h"

namespace json = boost::json;

namespace gpufleet::proto {
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
    return {{"type", "samples"}, {"seq", m.seq}, {"rows", std::move(rows)}};
  }
  json::object operator()(const Ack& m) const { return {{"type", "ack"}, {"seq", m.seq}}; }
  json::object operator()(const ErrorMessage& m) const {
    return {{"type", "error"}, {"code", m.code}, {"message", m.message}};
  }
};

}  // namespace

std::string Encode(const Message& message) {
  json::object o = std::visit(Encoder{}, message);
  o["v"] = kProtoVersion;
  return json::serialize(o);
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
