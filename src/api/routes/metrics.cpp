// Telemetry reads: GET /api/v1/query (the latest value of a field for every selected GPU),
// GET /api/v1/query_range (parsing and rendering; the query is telemetry/query.h) and
// GET /metrics (Prometheus text format 0.0.4 under dcgm-exporter's names, plus the
// controller's own gauges and counters).

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>

#include "api/json_util.h"
#include "api/peers.h"
#include "common/strings.h"
#include "model/json.h"
#include "runtime/leadership.h"
#include "slurm/bridge.h"
#include "telemetry/query.h"

namespace json = boost::json;

namespace gpufleet::api {
namespace {

// Escapes a label value: backslash, double quote and newline.
void AppendLabel(std::string& out, std::string_view name, std::string_view value, bool first) {
  if (!first) out += ',';
  out += name;
  out += "=\"";
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += '"';
}

void AppendFamily(std::string& out, std::string_view name, std::string_view type,
                  std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

// The controller's periodic tasks (runtime::Ticker): how long each last took, how often it ran
// and failed, and when it last ran.
void AppendTaskFigures(std::string& out, const std::vector<runtime::TaskFigures>& tasks) {
  struct Family {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const runtime::TaskFigures&);
  };
  static constexpr Family kFamilies[] = {
      {"gpufleet_task_duration_seconds", "gauge", "How long the task's last run took.",
       [](const runtime::TaskFigures& t) { return t.last_duration_s; }},
      {"gpufleet_task_busy_seconds_total", "counter", "Time spent in the task's runs.",
       [](const runtime::TaskFigures& t) { return t.total_duration_s; }},
      {"gpufleet_task_runs_total", "counter", "The task's runs since the controller started.",
       [](const runtime::TaskFigures& t) { return static_cast<double>(t.runs); }},
      {"gpufleet_task_errors_total", "counter", "The task's runs that failed.",
       [](const runtime::TaskFigures& t) { return static_cast<double>(t.errors); }},
      {"gpufleet_task_last_run_timestamp_seconds", "gauge",
       "When the task's last run began (0: not run yet).",
       [](const runtime::TaskFigures& t) { return static_cast<double>(t.last_run_ms) / 1000.0; }},
  };
  for (const Family& f : kFamilies) {
    AppendFamily(out, f.name, f.type, f.help);
    for (const auto& t : tasks) {
      out += f.name;
      out += '{';
      AppendLabel(out, "task", t.name, true);
      out += "} ";
      AppendNumber(out, f.value(t));
      out += '\n';
    }
  }
}

// The controller's own figures: its store, its agents, its alerts and their delivery.
void AppendControllerFigures(ApiContext& ctx, std::string& out) {
  auto stats = ctx.telemetry.Stats();
  auto own = [&](std::string_view name, std::string_view type, std::string_view help, double v) {
    AppendFamily(out, name, type, help);
    out += name;
    out += ' ';
    AppendNumber(out, v);
    out += '\n';
  };
  own("gpufleet_tsdb_samples_ingested_total", "counter",
      "Samples stored since the controller started.",
      static_cast<double>(ctx.telemetry.samples_ingested()));
  own("gpufleet_tsdb_series", "gauge", "Series in the time-series store.",
      static_cast<double>(stats.series));
  own("gpufleet_tsdb_bytes_per_sample", "gauge",
      "Memory per raw sample held, compressed chunks and bookkeeping.",
      stats.raw_bytes_per_sample());
  own("gpufleet_wal_bytes", "gauge", "Bytes in the telemetry write-ahead log.",
      static_cast<double>(ctx.telemetry.wal_bytes()));
  own("gpufleet_agents_connected", "gauge", "Agents with a live connection.",
      ctx.fleet.ConnectedAgents());
  if (ctx.leadership) {
    AppendFamily(out, "gpufleet_leader", "gauge",
                 "1 while this controller leads (runs the engines), else 0; epoch: the lease's, "
                 "this controller's while it leads, else the leader's as last seen.");
    out += "gpufleet_leader{epoch=\"" + std::to_string(ctx.leadership->epoch()) + "\"} ";
    AppendNumber(out, ctx.leadership->leading() ? 1 : 0);
    out += '\n';
    own("gpufleet_leader_changes_total", "counter",
        "Changes of the leading controller this controller saw since it started.",
        static_cast<double>(ctx.leadership->changes()));
  }
  AppendRemoteWriteMetrics(out, ctx);
  if (ctx.alerts) {
    std::map<std::string, int> by_state{{"pending", 0}, {"firing", 0}, {"resolved", 0}};
    for (const auto& a : ctx.alerts->Alerts()) ++by_state[std::string(alerting::ToString(a.state))];
    AppendFamily(out, "gpufleet_alerts", "gauge",
                 "Alerts by state (resolved: within the last hour).");
    for (const auto& [state, n] : by_state) {
      out += "gpufleet_alerts{state=\"" + state + "\"} ";
      AppendNumber(out, n);
      out += '\n';
    }
  }
  // Delivery status per channel: notifications written and not yet acknowledged.
  auto channels = ctx.store.alerting->ListChannels();
  auto outbox = ctx.store.alerting->OutboxCounts();
  if (channels.ok() && outbox.ok() && !channels->empty()) {
    AppendFamily(out, "gpufleet_notifications_pending", "gauge",
                 "Alert notifications waiting for their receiver's acknowledgement.");
    for (const auto& c : channels.value()) {
      int64_t pending = 0;
      for (const auto& o : outbox.value()) pending += o.channel == c.name ? o.pending : 0;
      out += "gpufleet_notifications_pending{";
      AppendLabel(out, "channel", c.name, true);
      out += "} ";
      AppendNumber(out, static_cast<double>(pending));
      out += '\n';
    }
  }
}

struct GpuLatest {
  std::string uuid;
  std::string labels;
  std::array<std::optional<tsdb::Sample>, kFieldCount> latest;
};

// format=json (another controller's fleet=1 asks): the newest sample of each field of each GPU
// this controller holds, {"fields": [names], "gpus": [{"uuid", "t": [ms, 0: none], "v": []}]}.
Response LatestJson(const std::vector<GpuLatest>& gpus) {
  std::string out = "{\"fields\":[";
  for (size_t f = 0; f < kFieldCount; ++f) {
    if (f) out += ',';
    AppendJsonString(out, Fields()[f].name);
  }
  out += "],\"gpus\":[";
  bool first = true;
  for (const auto& g : gpus) {
    if (std::none_of(g.latest.begin(), g.latest.end(), [](const auto& s) { return s; })) continue;
    out += first ? "{\"uuid\":" : ",{\"uuid\":";
    first = false;
    AppendJsonString(out, g.uuid);
    std::string t = ",\"t\":[", v = ",\"v\":[";
    for (size_t f = 0; f < kFieldCount; ++f) {
      t += f ? "," : "";
      v += f ? "," : "";
      const bool held = g.latest[f] && std::isfinite(g.latest[f]->v);  // JSON has no NaN
      t += std::to_string(held ? g.latest[f]->t : 0);
      if (held) {
        AppendNumber(v, g.latest[f]->v);
      } else {
        v += '0';
      }
    }
    out += t + "]" + v + "]}";
  }
  out += "]}";
  return JsonResponse(200, std::move(out));
}

// fleet=1: each GPU's fields take the other live controllers' newer samples (its agent is, or
// was last, theirs). Returns the controllers that did not answer, "id: why".
std::vector<std::string> TakePeersLatest(ApiContext& ctx, const Request& req,
                                         std::vector<GpuLatest>& gpus) {
  PeerAnswers peers = AskPeers(ctx, req, "/metrics", {{"format", "json"}}, 10'000);
  if (peers.bodies.empty()) return peers.missing;
  std::map<std::string_view, GpuLatest*> by_uuid;
  for (auto& g : gpus) by_uuid[g.uuid] = &g;
  for (const auto& body : peers.bodies) {
    const auto* o = body.if_object();
    const auto* fields = o ? o->if_contains("fields") : nullptr;
    const auto* list = o ? o->if_contains("gpus") : nullptr;
    if (!fields || !fields->is_array() || !list || !list->is_array()) continue;
    std::vector<std::optional<Field>> field_of;  // their order, by name
    for (const auto& f : fields->as_array()) {
      field_of.push_back(f.is_string() ? ParseField(f.as_string()) : std::nullopt);
    }
    for (const auto& item : list->as_array()) {
      const auto* g = item.if_object();
      const auto* uuid = g ? g->if_contains("uuid") : nullptr;
      const auto* t = g ? g->if_contains("t") : nullptr;
      const auto* v = g ? g->if_contains("v") : nullptr;
      if (!uuid || !uuid->is_string() || !t || !t->is_array() || !v || !v->is_array()) continue;
      auto mine = by_uuid.find(std::string_view(uuid->as_string()));
      if (mine == by_uuid.end()) continue;  // outside the filter or the token's scope
      const auto& ts = t->as_array();
      const auto& vs = v->as_array();
      for (size_t i = 0; i < field_of.size() && i < ts.size() && i < vs.size(); ++i) {
        if (!field_of[i] || !ts[i].is_int64() || !vs[i].is_number()) continue;
        auto& slot = mine->second->latest[static_cast<size_t>(*field_of[i])];
        int64_t when = ts[i].as_int64();
        if (when > 0 && (!slot || slot->t < when))
          slot = tsdb::Sample{when, vs[i].to_number<double>()};
      }
    }
  }
  return peers.missing;
}

// ?cluster=&pool= narrow the page (a scrape job per cluster keeps each page small); a token
// scoped to clusters sees only their GPUs. ?fleet=1: with several controllers, every GPU's
// newest values wherever its agent is connected (this controller's own figures stay its own).
Response Metrics(ApiContext& ctx, const Request& req, const Principal& who) {
  NodeFilter filter;
  filter.cluster = req.Param("cluster");
  filter.pool = req.Param("pool");
  filter.clusters = who.clusters;
  std::vector<GpuLatest> gpus;
  // Labels under the registry's lock, values after it.
  ctx.fleet.ForEachNode(filter, [&](const Node& n) {
    for (const auto& g : n.gpus) {
      GpuLatest gl{g.uuid, {}, {}};
      AppendLabel(gl.labels, "gpu", std::to_string(g.index), true);
      AppendLabel(gl.labels, "UUID", g.uuid, false);
      AppendLabel(gl.labels, "pci_bus_id", g.pci_bus_id, false);
      // dcgm-exporter's device is the device file's: its minor number (the index where the agent
      // could not tell).
      AppendLabel(gl.labels, "device",
                  "nvidia" + std::to_string(g.minor_number >= 0 ? g.minor_number : g.index), false);
      AppendLabel(gl.labels, "modelName", g.name, false);
      AppendLabel(gl.labels, "Hostname", n.name, false);
      AppendLabel(gl.labels, "cluster", n.cluster, false);
      AppendLabel(gl.labels, "pool", n.pool, false);
      gpus.push_back(std::move(gl));
    }
  });
  for (auto& g : gpus) g.latest = ctx.telemetry.LatestAll(g.uuid);
  if (req.Param("format") == "json") return LatestJson(gpus);
  if (!req.Param("format").empty()) {
    return ErrorResponse(MakeError(ErrorCode::kInvalidArgument,
                                   "'format' must be json (or absent: the text format)"));
  }
  std::vector<std::string> missing;
  if (req.Param("fleet") == "1") missing = TakePeersLatest(ctx, req, gpus);
  std::string out = ctx.buffers.Take();
  out.reserve(gpus.size() * kFieldCount * 220 + 4096);
  for (size_t f = 0; f < kFieldCount; ++f) {
    const FieldInfo& info = Fields()[f];
    std::string name = info.dcgm_name.empty() ? "gpufleet_gpu_" + std::string(info.name)
                                              : std::string(info.dcgm_name);
    bool any = false;
    for (const auto& g : gpus) any = any || g.latest[f].has_value();
    if (!any) continue;
    AppendFamily(out, name, info.type, info.help);
    for (const auto& g : gpus) {
      if (!g.latest[f]) continue;
      out += name;
      out += '{';
      out += g.labels;
      out += "} ";
      AppendNumber(out, g.latest[f]->v * info.metrics_scale);
      out += '\n';
    }
  }
  if (req.Param("fleet") == "1") {
    AppendFamily(out, "gpufleet_metrics_missing_controllers", "gauge",
                 "Live controllers that did not answer this fleet=1 page: their agents' GPUs "
                 "show their last values here, if any");
    out += "gpufleet_metrics_missing_controllers " + std::to_string(missing.size()) + "\n";
    for (const auto& m : missing) out += "# " + Printable(m, 300) + "\n";
  }
  AppendControllerFigures(ctx, out);
  if (ctx.ticker) AppendTaskFigures(out, ctx.ticker->Figures());
  if (ctx.slurm) out += ctx.slurm->MetricsText();
  ctx.http_metrics.Render(out);
  Response r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = std::move(out);
  return r;
}

// What a telemetry read needs of a selected GPU, copied out of the registry so that the read
// itself runs without holding the fleet's lock.
struct GpuRef {
  std::string node, cluster, pool, uuid, model;
  int index = 0;
  bool simulated = false;
};

// The GPUs a telemetry read selects: ?cluster=&pool=&node=&gpu= (an index or a UUID), within
// the caller's cluster scope, in node order.
std::vector<GpuRef> SelectGpus(ApiContext& ctx, const Request& req, const Principal& who) {
  NodeFilter filter;
  filter.cluster = req.Param("cluster");
  filter.pool = req.Param("pool");
  filter.name = req.Param("node");
  filter.clusters = who.clusters;
  std::string gpu = req.Param("gpu");
  std::vector<GpuRef> out;
  ctx.fleet.ForEachNode(filter, [&](const Node& n) {
    for (const auto& g : n.gpus) {
      if (gpu.empty() || std::to_string(g.index) == gpu || g.uuid == gpu) {
        out.push_back({n.name, n.cluster, n.pool, g.uuid, g.model, g.index, n.simulated});
      }
    }
  });
  return out;
}

// GET /healthz
Response GetHealthz(ApiContext& ctx, const Request& req, const Principal& who) {
  json::object o;
  json::object store{{"backend", ctx.store.database->backend()}};
  auto ping = ctx.store.database->Ping();
  store["ok"] = ping.ok();
  // Not the error itself: it names the database's host, and this route is public.
  if (!ping.ok()) store["error"] = "the store does not answer";
  // The telemetry log: a controller that cannot write it acknowledges nothing, and says
  // so here (the reason, "No space left on device", names no host).
  const std::string wal_error = ctx.telemetry.write_error();
  json::object telemetry{{"ok", wal_error.empty()}};
  if (!wal_error.empty()) telemetry["error"] = wal_error;
  const bool ok = ping.ok() && wal_error.empty();
  o["status"] = ok ? "ok" : "unavailable";
  o["store"] = std::move(store);
  o["telemetry"] = std::move(telemetry);
  return JsonResponse(ok ? 200 : 503, json::serialize(o));
}

// GET /api/v1/query_range
Response GetQueryRange(ApiContext& ctx, const Request& req, const Principal& who) {
  auto field = ParseField(req.Param("metric"));
  if (!field) {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument, "'metric' must name a field, e.g. metric=gpu_util"));
  }
  int64_t now = ctx.clock->NowMs();
  auto end = TimeParam(req, "end", now, now);
  if (!end.ok()) return ErrorResponse(end.error());
  auto start = TimeParam(req, "start", now, end.value() - 3'600'000);
  if (!start.ok()) return ErrorResponse(start.error());
  // Checked by QueryRange (-1: not a duration).
  int64_t step = req.Param("step").empty() ? 60'000 : ParseDurationMs(req.Param("step"));
  std::string agg = req.Param("agg").empty() ? "avg" : req.Param("agg");
  auto parsed_agg = ParseRangeAgg(agg);
  if (!parsed_agg) {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument, "'agg' must be avg, min, max, sum or p95"));
  }
  std::string by = req.Param("by").empty() ? "gpu" : req.Param("by");
  auto parsed_by = ParseRangeBy(by);
  if (!parsed_by) {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument, "'by' must be gpu, node, pool or cluster"));
  }
  std::vector<RangeGpu> gpus;
  for (GpuRef& g : SelectGpus(ctx, req, who)) {
    gpus.push_back(
        {std::move(g.node), std::move(g.cluster), std::move(g.pool), std::move(g.uuid), g.index});
  }
  RangeQuery query{*field, start.value(), end.value(), step, *parsed_agg, *parsed_by};
  // The other controllers' part, per GPU: their by=gpu answer over this window (in ms, so the
  // steps line up) and, for groups, the reduction each GPU gets first (min, max, else the mean).
  std::string per_gpu = by == "gpu" ? agg : agg == "min" || agg == "max" ? agg : "avg";
  PeerAnswers peers;
  if (step > 0 && start.value() < end.value()) {  // else QueryRange says what is wrong
    peers = AskPeers(ctx, req, "/api/v1/query_range",
                     {{"by", "gpu"},
                      {"agg", per_gpu},
                      {"start", std::to_string(start.value())},
                      {"end", std::to_string(end.value())},
                      {"step", std::to_string(step) + "ms"}});
  }
  RangeElsewhere elsewhere;
  for (const auto& body : peers.bodies) {
    const auto* list = body.is_object() ? body.as_object().if_contains("series") : nullptr;
    if (!list || !list->is_array()) continue;
    for (const auto& s : list->as_array()) {
      const auto* o = s.if_object();
      const auto* uuid = o ? o->if_contains("uuid") : nullptr;
      const auto* points = o ? o->if_contains("points") : nullptr;
      if (!uuid || !uuid->is_string() || !points || !points->is_array()) continue;
      auto& into = elsewhere[std::string(uuid->as_string())];
      for (const auto& p : points->as_array()) {
        const auto* pair = p.if_array();
        if (!pair || pair->size() != 2 || !pair->at(0).is_number() || !pair->at(1).is_number()) {
          continue;
        }
        into.emplace_back(pair->at(0).to_number<int64_t>(), pair->at(1).to_number<double>());
      }
    }
  }
  auto result = QueryRange(ctx.telemetry, query, gpus, elsewhere.empty() ? nullptr : &elsewhere);
  if (!result.ok()) return ErrorResponse(result.error());
  json::array series;
  for (const RangeSeries& s : result->series) {
    json::array points;
    for (const auto& [t, v] : s.points) points.push_back(json::array{t, v});
    const RangeGpu& l = s.labels;
    json::object o;
    switch (query.by) {
      case RangeBy::kGpu:
        o = {{"node", l.node},
             {"gpu", l.index},
             {"uuid", l.uuid},
             {"cluster", l.cluster},
             {"pool", l.pool}};
        break;
      case RangeBy::kNode:
        o = {{"node", l.node}, {"cluster", l.cluster}, {"pool", l.pool}, {"gpus", s.gpus}};
        break;
      case RangeBy::kPool:
        o = {{"pool", l.pool}, {"cluster", l.cluster}, {"gpus", s.gpus}};
        break;
      case RangeBy::kCluster:
        o = {{"cluster", l.cluster}, {"gpus", s.gpus}};
        break;
    }
    o["points"] = std::move(points);
    series.push_back(std::move(o));
  }
  const char* tier = result->tier == tsdb::Resolution::kHour     ? "1h"
                     : result->tier == tsdb::Resolution::kMinute ? "1m"
                                                                 : "raw";
  json::object o{{"metric", Info(*field).name},
                 {"unit", Info(*field).unit},
                 {"start", start.value()},
                 {"end", end.value()},
                 {"step", step},
                 {"agg", agg},
                 {"by", by},
                 {"tier", tier},
                 {"series", std::move(series)}};
  if (!peers.missing.empty()) {  // their agents' GPUs have no points: say why
    json::array missing;
    for (const auto& m : peers.missing) missing.push_back(json::string(m));
    o["missing_controllers"] = std::move(missing);
  }
  return ObjectResponse(200, o);
}

// GET /api/v1/query
Response GetQuery(ApiContext& ctx, const Request& req, const Principal& who) {
  auto metric = req.query.find("metric");
  if (metric == req.query.end() || metric->second.empty()) {
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument, "'metric' is required, e.g. metric=gpu_util"));
  }
  auto field = ParseField(metric->second);
  if (!field) {
    std::string known;
    for (const auto& f : Fields()) known += (known.empty() ? "" : ", ") + std::string(f.name);
    return ErrorResponse(
        MakeError(ErrorCode::kInvalidArgument,
                  "unknown metric '" + metric->second + "' (known: " + known + ")"));
  }
  // Written directly: this is the heatmap's read of every GPU in the fleet, and building
  // a JSON tree of 10,000 objects first costs several times the writing.
  const FieldInfo& info = Info(*field);
  auto gpus = SelectGpus(ctx, req, who);
  // What the other controllers' agents sent them: the newest value of each GPU, wherever it is.
  struct Remote {
    double value;
    std::string time;
  };
  std::map<std::string, Remote> remote;  // by UUID
  PeerAnswers peers = AskPeers(ctx, req, "/api/v1/query");
  for (const auto& body : peers.bodies) {
    const auto* items = body.is_object() ? body.as_object().if_contains("items") : nullptr;
    if (!items || !items->is_array()) continue;
    for (const auto& item : items->as_array()) {
      const auto* o = item.if_object();
      const auto* uuid = o ? o->if_contains("uuid") : nullptr;
      const auto* value = o ? o->if_contains("value") : nullptr;
      const auto* time = o ? o->if_contains("time") : nullptr;
      if (!uuid || !uuid->is_string() || !value || !value->is_number() || !time ||
          !time->is_string()) {
        continue;
      }
      Remote r{value->to_number<double>(), std::string(time->as_string())};
      auto [it, added] = remote.try_emplace(std::string(uuid->as_string()), r);
      if (!added && r.time > it->second.time) it->second = std::move(r);
    }
  }
  std::string out;
  out.reserve(256 + gpus.size() * 260);
  out += "{\"metric\":";
  AppendJsonString(out, info.name);
  out += ",\"unit\":";
  AppendJsonString(out, info.unit);
  out += ",\"items\":[";
  for (size_t i = 0; i < gpus.size(); ++i) {
    const GpuRef& g = gpus[i];
    auto latest = ctx.telemetry.Latest(g.uuid, *field);
    std::string time = latest ? FormatTime(latest->t) : "";
    double value = latest ? latest->v : std::nan("");
    if (auto r = remote.find(g.uuid); r != remote.end() && r->second.time > time) {
      value = r->second.value;  // its agent is (or was last) another controller's
      time = r->second.time;
    }
    out += i ? ",{\"node\":" : "{\"node\":";
    AppendJsonString(out, g.node);
    out += ",\"gpu\":";
    out += std::to_string(g.index);
    out += ",\"uuid\":";
    AppendJsonString(out, g.uuid);
    out += ",\"model\":";
    AppendJsonString(out, g.model);
    out += ",\"cluster\":";
    AppendJsonString(out, g.cluster);
    out += ",\"pool\":";
    AppendJsonString(out, g.pool);
    out += g.simulated ? ",\"simulated\":true,\"value\":" : ",\"simulated\":false,\"value\":";
    if (!std::isfinite(value)) {
      out += "null";
    } else {
      AppendNumber(out, value);  // NVML's integers print as integers
    }
    out += ",\"time\":";
    if (!time.empty()) {
      AppendJsonString(out, time);
    } else {
      out += "null";
    }
    out += '}';
  }
  out += "]";
  if (!peers.missing.empty()) {  // their agents' GPUs are null: say why
    out += ",\"missing_controllers\":[";
    for (size_t i = 0; i < peers.missing.size(); ++i) {
      if (i) out += ',';
      AppendJsonString(out, peers.missing[i]);
    }
    out += "]";
  }
  out += "}";
  return JsonResponse(200, std::move(out));
}

}  // namespace

void AddMetricsRoutes(Router& router, ApiContext& ctx) {
  // Public: says whether this controller can serve, not what it holds. A store that does not
  // answer makes it 503, so a load balancer or a supervisor sees it.
  router.Add(
      "GET", "/healthz", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetHealthz(ctx, req, who); },
      /*public_route=*/true);
  router.Scoped(Scope::kAny);

  router.Add("GET", "/metrics", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return Metrics(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  // Ranges per GPU, aligned to `step`, from the coarsest tier that serves the step: raw below a
  // minute, 1-minute rollups below an hour, 1-hour rollups above.
  router.Add(
      "GET", "/api/v1/query_range", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) { return GetQueryRange(ctx, req, who); });
  router.Scoped(Scope::kClusters);

  router.Add("GET", "/api/v1/query", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return GetQuery(ctx, req, who); });
  router.Scoped(Scope::kClusters);
  AddPrometheusRoutes(router, ctx);   // the Prometheus HTTP API: routes/prometheus.cpp
  AddRemoteWriteRoutes(router, ctx);  // routes/remote_write.cpp
}

}  // namespace gpufleet::api
