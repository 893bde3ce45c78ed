// The Prometheus API's metadata routes (/prometheus/api/v1/): labels, label values, series,
// status/buildinfo, metadata, and the empty answers Grafana asks for (query_exemplars, rules,
// alerts). Series are the rows of the last health cycle's view of the fleet that a selector
// keeps, and for a telemetry field only the GPUs with a sample of it since `start`.

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "alerting/expr.h"
#include "alerting/metrics.h"
#include "api/json_util.h"
#include "api/routes/prometheus.h"

namespace gpufleet::api::prom {
namespace {

constexpr size_t kMaxSeries = 100'000;  // in one answer, whatever `limit` says

// Each GPU row's newest sample of a field, kept when it is at or after `since_ms`.
class PresenceReader : public alerting::SeriesReader {
 public:
  PresenceReader(const TelemetryStore& store, int64_t since_ms)
      : store_(store), since_ms_(since_ms) {}
  void Latest(const alerting::Snapshot& snap, Field field, int64_t,
              std::vector<double>& out) override {
    if (uuids_.size() != snap.gpus.size()) {
      for (const auto& g : snap.gpus) uuids_.push_back(&g.uuid);
      store_.Handles(uuids_, handles_);
    }
    store_.LatestMany(uuids_, handles_, field, samples_);
    out.assign(snap.gpus.size(), NAN);
    for (size_t i = 0; i < samples_.size(); ++i) {
      if (samples_[i] && samples_[i]->t >= since_ms_) out[i] = samples_[i]->v;
    }
  }
  void LatestAt(const alerting::Snapshot& snap, Field field, int64_t, const std::vector<char>*,
                std::vector<double>& out) override {
    Latest(snap, field, 0, out);
  }
  void Window(const alerting::Snapshot&, size_t, Field, int64_t, int64_t,
              std::vector<tsdb::Sample>& out) override {
    out.clear();
  }

 private:
  const TelemetryStore& store_;
  int64_t since_ms_;
  std::vector<const std::string*> uuids_;
  std::vector<TelemetryStore::GpuHandle> handles_;
  std::vector<std::optional<tsdb::Sample>> samples_;
};

struct Selection {
  std::set<Labels> series;
  bool matched = false;  // match[] was given
};

// The series that match[] selects (an error names the bad one), or none when no match[] is
// given.
Result<Selection> Select(ApiContext& ctx, const Principal& who, const Params& params) {
  Selection sel;
  auto matches = params.All("match[]");
  if (matches.empty()) return sel;
  sel.matched = true;
  int64_t now = ctx.clock->NowMs();
  int64_t start = 0, end = now;
  if (params.Has("start")) GF_TRY_ASSIGN(start, ParseTime(params.Get("start")));
  if (params.Has("end")) GF_TRY_ASSIGN(end, ParseTime(params.Get("end")));
  std::shared_ptr<const alerting::Snapshot> snap;
  GF_TRY_ASSIGN(snap, FleetSnapshot(ctx, who));
  PresenceReader reader(ctx.telemetry, start - alerting::kStalenessMs);
  alerting::Evaluator ev(*snap, reader, {true});
  // The facts of the health model are series when the range reaches the snapshot's time.
  ev.SetTime(std::clamp(snap->now_ms, start, std::max(start, end)));
  for (const auto& m : matches) {
    auto expr = alerting::ParseQuery(m);
    if (!expr.ok()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "invalid parameter \"match[]\": " + expr.error().message);
    }
    if (expr.value()->kind != alerting::Expr::Kind::kSelector || expr.value()->range_ms) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "invalid parameter \"match[]\": '" + Printable(m, 80) +
                           "' is not a series selector such as DCGM_FI_DEV_GPU_UTIL{pool=\"a\"}");
    }
    auto out = ev.Run(*expr.value());
    if (!out.ok()) return out.error();
    for (auto& s : out.value()) {
      if (sel.series.size() >= kMaxSeries) break;
      sel.series.insert(std::move(s.labels));
    }
  }
  return sel;
}

// Every row's labels of the token's fleet (no match[]).
std::map<std::string, std::set<std::string>> AllLabelValues(const alerting::Snapshot& snap) {
  std::map<std::string, std::set<std::string>> out;
  auto team = [&](uint32_t pool) {
    return pool < snap.pool_teams.size() ? snap.pool_teams[pool] : std::string();
  };
  auto add = [&](const char* name, const std::string& v) {
    if (!v.empty()) out[name].insert(v);
  };
  for (const auto& n : snap.nodes) {
    add("Hostname", n.name);
    add("cluster", snap.clusters[n.cluster]);
    add("pool", snap.pools[n.pool]);
    add("team", team(n.pool));
  }
  for (const auto& g : snap.gpus) {
    add("gpu", g.gpu);
    add("UUID", g.uuid);
    add("modelName", snap.models[g.model]);
    add("pci_bus_id", g.pci_bus_id);
    add("device", g.device);
  }
  for (const auto& m : alerting::AllMetrics()) out["__name__"].insert(std::string(m.name));
  return out;
}

Response BadData(const Error& e) {
  return e.code == ErrorCode::kUnavailable ? Failure(503, "unavailable", e.message)
                                           : Failure(400, "bad_data", e.message);
}

void AppendStrings(std::string& out, const std::set<std::string>& values) {
  out += '[';
  bool first = true;
  for (const auto& v : values) {
    if (!first) out += ',';
    first = false;
    AppendJsonString(out, v);
  }
  out += ']';
}

// GET or POST /prometheus/api/v1/labels
Response LabelNames(ApiContext& ctx, const Request& req, const Principal& who) {
  auto params = ParamsOf(req);
  if (!params.ok()) return BadData(params.error());
  auto sel = Select(ctx, who, params.value());
  if (!sel.ok()) return BadData(sel.error());
  std::set<std::string> names;
  if (sel->matched) {
    for (const auto& labels : sel->series) {
      for (const auto& [k, v] : labels) names.insert(k);
    }
  } else {
    auto snap = FleetSnapshot(ctx, who);
    if (!snap.ok()) return BadData(snap.error());
    for (const auto& [k, v] : AllLabelValues(*snap.value())) names.insert(k);
  }
  std::string data;
  AppendStrings(data, names);
  return Success(data);
}

// GET /prometheus/api/v1/label/{name}/values
Response LabelValues(ApiContext& ctx, const Request& req, const Principal& who) {
  auto params = ParamsOf(req);
  if (!params.ok()) return BadData(params.error());
  std::string name = req.params.at("name");
  auto sel = Select(ctx, who, params.value());
  if (!sel.ok()) return BadData(sel.error());
  std::set<std::string> values;
  if (sel->matched) {
    for (const auto& labels : sel->series) {
      if (auto it = labels.find(name); it != labels.end()) values.insert(it->second);
    }
  } else {
    auto snap = FleetSnapshot(ctx, who);
    if (!snap.ok()) return BadData(snap.error());
    auto all = AllLabelValues(*snap.value());
    if (auto it = all.find(name); it != all.end()) values = std::move(it->second);
  }
  std::string data;
  AppendStrings(data, values);
  return Success(data);
}

// GET or POST /prometheus/api/v1/series
Response Series(ApiContext& ctx, const Request& req, const Principal& who) {
  auto params = ParamsOf(req);
  if (!params.ok()) return BadData(params.error());
  if (params->All("match[]").empty()) {
    return Failure(400, "bad_data", "no match[] parameter provided");
  }
  size_t limit = kMaxSeries;
  if (params->Has("limit")) {
    std::string l = params->Get("limit");
    if (l.empty() || l.size() > 9 || l.find_first_not_of("0123456789") != std::string::npos) {
      return Failure(400, "bad_data", "invalid parameter \"limit\": a whole number");
    }
    if (std::stoul(l) > 0) limit = std::min(limit, static_cast<size_t>(std::stoul(l)));
  }
  auto sel = Select(ctx, who, params.value());
  if (!sel.ok()) return BadData(sel.error());
  std::string data = "[";
  size_t n = 0;
  for (const auto& labels : sel->series) {
    if (n++ >= limit) break;
    if (n > 1) data += ',';
    AppendLabels(data, labels);
  }
  return Success(data + "]");
}

// GET /prometheus/api/v1/metadata: each metric's type and help.
Response Metadata(ApiContext& ctx, const Request& req, const Principal& who) {
  std::string wanted = req.Param("metric");
  std::string data = "{";
  bool first = true;
  for (const auto& m : alerting::AllMetrics()) {
    if (!wanted.empty() && m.name != wanted) continue;
    if (m.special == alerting::Special::kXidEvents) continue;  // events, not a series
    std::string_view type = "gauge";
    if (m.special == alerting::Special::kNone) type = Info(m.field).type;
    if (!first) data += ',';
    first = false;
    AppendJsonString(data, m.name);
    data += ":[{\"type\":";
    AppendJsonString(data, type);
    data += ",\"help\":";
    AppendJsonString(data, m.help);
    data += ",\"unit\":\"\"}]";
  }
  return Success(data + "}");
}

Response BuildInfo() {
  // "version" is the Prometheus API version this follows (Grafana reads it to choose what to
  // send); gpufleet's own is beside it.
  return Success(
      "{\"version\":\"2.42.0\",\"revision\":\"\",\"branch\":\"\",\"buildUser\":\"\","
      "\"buildDate\":\"\",\"goVersion\":\"\",\"application\":\"gpufleet\"}");
}

}  // namespace

void AddMetaRoutes(Router& router, ApiContext& ctx) {
  auto labels = [&ctx](const Request& req, const Principal& who) {
    return LabelNames(ctx, req, who);
  };
  auto series = [&ctx](const Request& req, const Principal& who) { return Series(ctx, req, who); };
  // Exemplars: gpufleet keeps none.
  auto exemplars = [](const Request& req, const Principal&) {
    auto params = ParamsOf(req);
    return params.ok() ? Success("[]") : BadData(params.error());
  };
  router.Add("GET", "/prometheus/api/v1/labels", Role::kViewer, labels);
  router.Scoped(Scope::kClusters);
  router.Add("POST", "/prometheus/api/v1/labels", Role::kViewer, labels);
  router.TakesForm();
  router.Scoped(Scope::kClusters);
  router.Add("GET", "/prometheus/api/v1/series", Role::kViewer, series);
  router.Scoped(Scope::kClusters);
  router.Add("POST", "/prometheus/api/v1/series", Role::kViewer, series);
  router.TakesForm();
  router.Scoped(Scope::kClusters);
  router.Add("GET", "/prometheus/api/v1/query_exemplars", Role::kViewer, exemplars);
  router.Scoped(Scope::kAny);
  router.Add("POST", "/prometheus/api/v1/query_exemplars", Role::kViewer, exemplars);
  router.TakesForm();
  router.Scoped(Scope::kAny);
  router.Add(
      "GET", "/prometheus/api/v1/label/{name}/values", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return LabelValues(ctx, req, who); });
  router.Scoped(Scope::kClusters);
  router.Add("GET", "/prometheus/api/v1/metadata", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return Metadata(ctx, req, who); });
  router.Scoped(Scope::kAny);
  router.Add("GET", "/prometheus/api/v1/status/buildinfo", Role::kViewer,
             [](const Request&, const Principal&) { return BuildInfo(); });
  router.Scoped(Scope::kAny);
  // gpufleet's rules and alerts are at /api/v1/alert-rules and /api/v1/alerts; the Prometheus
  // forms of them are not built, so these say there are none.
  router.Add("GET", "/prometheus/api/v1/rules", Role::kViewer,
             [](const Request&, const Principal&) { return Success("{\"groups\":[]}"); });
  router.Scoped(Scope::kAny);
  router.Add("GET", "/prometheus/api/v1/alerts", Role::kViewer,
             [](const Request&, const Principal&) { return Success("{\"alerts\":[]}"); });
  router.Scoped(Scope::kAny);
}

}  // namespace gpufleet::api::prom
