// The Prometheus HTTP API at /prometheus/api/v1/ (the prefix Mimir and VictoriaMetrics use), so
// that Grafana and promtool read gpufleet directly: query and query_range here, evaluated by
// the alert rules' engine (alerting/expr.h) over the telemetry store under dcgm-exporter's
// names and labels; labels, label values, series and the rest in prometheus_meta.cpp.
// Answers and errors are Prometheus's: {"status", "data"} or {"status", "errorType", "error"}.

#include "api/routes/prometheus.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "alerting/expr.h"
#include "alerting/history.h"
#include "alerting/notifier.h"
#include "api/json_util.h"

namespace gpufleet::api::prom {

// As Prometheus: at most 11,000 points per series in a range query, and a query's default and
// longest run. A query loads at most kMaxSamples raw samples (16 bytes each) and answers at
// most kMaxPoints points in all.
constexpr int64_t kMaxStepsPerSeries = 11'000;
constexpr int64_t kMaxTimeoutMs = 120'000;
constexpr size_t kMaxSamples = 10'000'000;
constexpr size_t kMaxPoints = 5'000'000;

std::string Params::Get(std::string_view key) const {
  std::string out;
  for (const auto& [k, v] : all) {
    if (k == key) out = v;
  }
  return out;
}

std::vector<std::string> Params::All(std::string_view key) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : all) {
    if (k == key) out.push_back(v);
  }
  return out;
}

bool Params::Has(std::string_view key) const {
  return std::any_of(all.begin(), all.end(), [&](const auto& p) { return p.first == key; });
}

namespace {

// application/x-www-form-urlencoded: '+' is a space, %XX a byte.
Result<std::string> FormDecode(std::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '+') {
      out += ' ';
    } else if (c == '%') {
      if (i + 2 >= in.size() || !std::isxdigit(static_cast<unsigned char>(in[i + 1])) ||
          !std::isxdigit(static_cast<unsigned char>(in[i + 2]))) {
        return MakeError(ErrorCode::kInvalidArgument, "the form body has a bad %-escape");
      }
      out += static_cast<char>(std::stoi(std::string(in.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

Result<Params> ParamsOf(const Request& req) {
  Params p;
  p.all = req.query_list;
  if (req.method != "POST" || req.body.empty()) return p;
  if (req.content_type.rfind("application/x-www-form-urlencoded", 0) != 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "a POST takes a form body (Content-Type: application/x-www-form-urlencoded)");
  }
  std::string_view body(req.body);
  while (!body.empty()) {
    size_t amp = body.find('&');
    std::string_view pair = body.substr(0, amp);
    body = amp == std::string_view::npos ? std::string_view() : body.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string key;
    GF_TRY_ASSIGN(key, FormDecode(pair.substr(0, eq)));
    std::string value;
    if (eq != std::string_view::npos) GF_TRY_ASSIGN(value, FormDecode(pair.substr(eq + 1)));
    p.all.emplace_back(std::move(key), std::move(value));
  }
  return p;
}

Response Success(std::string data) {
  return JsonResponse(200, "{\"status\":\"success\",\"data\":" + data + "}");
}

Response Failure(int status, std::string_view type, std::string_view message) {
  std::string body = "{\"status\":\"error\",\"errorType\":";
  AppendJsonString(body, type);
  body += ",\"error\":";
  AppendJsonString(body, message);
  body += "}";
  return JsonResponse(status, std::move(body));
}

Result<int64_t> ParseTime(const std::string& text) {
  auto bad = [&] {
    return MakeError(ErrorCode::kInvalidArgument,
                     "cannot parse \"" + Printable(text, 64) + "\" to a valid timestamp");
  };
  if (text.empty() || text.size() > 40) return bad();
  char* end = nullptr;
  double seconds = std::strtod(text.c_str(), &end);
  if (end == text.c_str() + text.size()) {
    if (!std::isfinite(seconds) || std::fabs(seconds) > 1e11) return bad();
    return static_cast<int64_t>(std::llround(seconds * 1000));
  }
  // RFC 3339: 2026-12-07T10:00:00(.123)?(Z|+01:00)
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6 ||
      consumed != 19 || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
      tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60) {
    return bad();
  }
  size_t i = 19;
  int64_t ms = 0;
  if (i < text.size() && text[i] == '.') {
    int64_t scale = 100;
    for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
      ms += (text[i] - '0') * scale;
      scale /= 10;
    }
  }
  int64_t zone_s = 0;
  std::string zone = text.substr(i);
  if (zone == "Z" || zone == "z") {
    zone_s = 0;
  } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':' &&
             std::isdigit(static_cast<unsigned char>(zone[1])) &&
             std::isdigit(static_cast<unsigned char>(zone[2])) &&
             std::isdigit(static_cast<unsigned char>(zone[4])) &&
             std::isdigit(static_cast<unsigned char>(zone[5]))) {
    zone_s = (std::stoi(zone.substr(1, 2)) * 3600 + std::stoi(zone.substr(4, 2)) * 60) *
             (zone[0] == '+' ? 1 : -1);
  } else {
    return bad();
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return (static_cast<int64_t>(timegm(&tm)) - zone_s) * 1000 + ms;
}

Result<int64_t> ParseStep(const std::string& text) {
  int64_t ms = ParseDurationMs(text);
  if (ms <= 0) {
    char* end = nullptr;
    double seconds = std::strtod(text.c_str(), &end);
    if (!text.empty() && end == text.c_str() + text.size() && std::isfinite(seconds) &&
        seconds > 0 && seconds < 1e10) {
      ms = static_cast<int64_t>(std::llround(seconds * 1000));
    }
  }
  if (ms <= 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "cannot parse \"" + Printable(text, 64) +
                         "\" to a valid duration: a positive number of seconds or 15s, 1m, 1h");
  }
  return ms;
}

void AppendTime(std::string& out, int64_t ms) {
  char buf[32];
  int64_t s = ms / 1000, frac = ms % 1000;
  if (frac < 0) {
    s -= 1;
    frac += 1000;
  }
  if (frac == 0) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(s));
  } else {
    std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(s),
                  static_cast<long long>(frac));
    size_t n = std::strlen(buf);
    while (buf[n - 1] == '0') buf[--n] = '\0';
  }
  out += buf;
}

void AppendValue(std::string& out, double v) {
  out += '"';
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    AppendNumber(out, v);
  }
  out += '"';
}

void AppendLabels(std::string& out, const Labels& labels) {
  out += '{';
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ',';
    first = false;
    AppendJsonString(out, k);
    out += ':';
    AppendJsonString(out, v);
  }
  out += '}';
}

Result<std::shared_ptr<const alerting::Snapshot>> FleetSnapshot(ApiContext& ctx,
                                                                const Principal& who) {
  if (!ctx.alerts) {
    return MakeError(ErrorCode::kUnavailable,
                     "alerting is not running on this controller: queries evaluate over its "
                     "health cycle's view of the fleet");
  }
  auto base = ctx.alerts->LastSnapshot();
  if (!base) {
    return MakeError(ErrorCode::kUnavailable,
                     "no health cycle has run on this controller yet: try again in a few seconds");
  }
  std::string scope = Join(who.clusters, ",");
  static std::mutex mu;
  static std::tuple<uint64_t, std::string, std::shared_ptr<const alerting::Snapshot>> cached;
  {
    std::lock_guard lock(mu);
    if (std::get<2>(cached) && std::get<0>(cached) == base->generation &&
        std::get<1>(cached) == scope) {
      return std::get<2>(cached);
    }
  }
  struct GpuFacts {
    std::string name, pci_bus_id, device;
  };
  std::unordered_map<std::string, GpuFacts> facts;
  NodeFilter filter;
  filter.clusters = who.clusters;
  ctx.fleet.ForEachNode(filter, [&](const Node& n) {
    for (const auto& g : n.gpus) {
      facts[g.uuid] = {g.name, g.pci_bus_id,
                       "nvidia" + std::to_string(g.minor_number >= 0 ? g.minor_number : g.index)};
    }
  });
  auto s = std::make_shared<alerting::Snapshot>();
  s->generation = base->generation;
  s->now_ms = base->now_ms;
  s->facts_ms = base->now_ms;
  s->clusters = base->clusters;
  s->pools = base->pools;
  s->pool_teams = base->pool_teams;
  s->api_p99_s = base->api_p99_s;
  s->node_inputs = base->node_inputs;
  s->controller_inputs = base->controller_inputs;
  std::vector<int64_t> node_at(base->nodes.size(), -1);
  for (size_t i = 0; i < base->nodes.size(); ++i) {
    if (!who.CanSeeCluster(base->clusters[base->nodes[i].cluster])) continue;
    node_at[i] = static_cast<int64_t>(s->nodes.size());
    s->nodes.push_back(base->nodes[i]);
  }
  std::unordered_map<std::string, uint32_t> model_ids;
  for (size_t i = 0; i < base->gpus.size(); ++i) {
    const auto& g = base->gpus[i];
    if (node_at[g.node] < 0) continue;
    alerting::Snapshot::GpuRow row = g;
    row.node = static_cast<uint32_t>(node_at[g.node]);
    std::string model = base->models[g.model];
    if (auto f = facts.find(g.uuid); f != facts.end()) {
      if (!f->second.name.empty()) model = f->second.name;
      row.pci_bus_id = f->second.pci_bus_id;
      row.device = f->second.device;
    }
    auto [it, fresh] = model_ids.try_emplace(model, static_cast<uint32_t>(s->models.size()));
    if (fresh) s->models.push_back(model);
    row.model = it->second;
    if (auto x = base->xids.find(i); x != base->xids.end()) s->xids[s->gpus.size()] = x->second;
    s->gpus.push_back(std::move(row));
  }
  for (const auto& p : base->pool_rows) {
    if (who.CanSeeCluster(base->clusters[p.cluster])) s->pool_rows.push_back(p);
  }
  std::lock_guard lock(mu);
  cached = {base->generation, scope, s};
  return std::shared_ptr<const alerting::Snapshot>(s);
}

namespace {

// How far before an evaluation's time the expression reads: each selector's offset and range,
// or the lookback of an instant selector.
int64_t Reach(const alerting::Expr& e) {
  int64_t reach = 0;
  if (e.kind == alerting::Expr::Kind::kSelector) {
    reach = e.offset_ms + (e.range_ms ? e.range_ms : alerting::kStalenessMs);
  }
  for (const auto& a : e.args) reach = std::max(reach, Reach(*a));
  return reach;
}

Response BadParam(std::string_view name, const Error& e) {
  return Failure(400, "bad_data", "invalid parameter \"" + std::string(name) + "\": " + e.message);
}

Response Unavailable(const Error& e) { return Failure(503, "unavailable", e.message); }

Response TooManySamples() {
  return Failure(422, "execution",
                 "query processing would load too many samples into memory (more than " +
                     std::to_string(kMaxSamples) +
                     "): narrow the selector, the time range, or the range of a function");
}

Result<int64_t> TimeoutMs(const Params& params) {
  if (!params.Has("timeout")) return kMaxTimeoutMs;
  int64_t ms = 0;
  GF_TRY_ASSIGN(ms, ParseStep(params.Get("timeout")));
  return std::min(ms, kMaxTimeoutMs);
}

struct Parsed {
  std::unique_ptr<alerting::Expr> expr;
  int64_t timeout_ms = kMaxTimeoutMs;
};

Result<Parsed> ParseQueryParams(const Params& params) {
  Parsed p;
  std::string query = params.Get("query");
  if (query.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "invalid parameter \"query\": it is empty");
  }
  auto expr = alerting::ParseQuery(query);
  if (!expr.ok()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "invalid parameter \"query\": " + expr.error().message);
  }
  p.expr = std::move(expr).value();
  auto timeout = TimeoutMs(params);
  if (!timeout.ok()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "invalid parameter \"timeout\": " + timeout.error().message);
  }
  p.timeout_ms = timeout.value();
  return p;
}

// GET or POST /prometheus/api/v1/query
Response Query(ApiContext& ctx, const Request& req, const Principal& who) {
  auto params = ParamsOf(req);
  if (!params.ok()) return Failure(400, "bad_data", params.error().message);
  auto parsed = ParseQueryParams(params.value());
  if (!parsed.ok()) return Failure(400, "bad_data", parsed.error().message);
  int64_t at = ctx.clock->NowMs();
  if (params->Has("time")) {
    auto t = ParseTime(params->Get("time"));
    if (!t.ok()) return BadParam("time", t.error());
    at = t.value();
  }
  const alerting::Expr& expr = *parsed->expr;
  std::string data = "{\"resultType\":";
  if (!expr.vector) {
    data += "\"scalar\",\"result\":[";
    AppendTime(data, at);
    data += ',';
    AppendValue(data, expr.number);
    return Success(data + "]}");
  }
  auto snap = FleetSnapshot(ctx, who);
  if (!snap.ok()) return Unavailable(snap.error());
  auto reader = alerting::MakeHistoryReader(ctx.telemetry, at - Reach(expr), at, kMaxSamples);
  alerting::Evaluator ev(*snap.value(), *reader, {true});
  ev.SetTime(at);
  auto out = ev.Run(expr);
  if (!out.ok()) return Failure(422, "execution", out.error().message);
  if (reader->exceeded()) return TooManySamples();
  std::sort(out->begin(), out->end(),
            [](const auto& a, const auto& b) { return a.labels < b.labels; });
  data += "\"vector\",\"result\":[";
  bool first = true;
  for (const auto& s : out.value()) {
    data += first ? "{\"metric\":" : ",{\"metric\":";
    first = false;
    AppendLabels(data, s.labels);
    data += ",\"value\":[";
    AppendTime(data, at);
    data += ',';
    AppendValue(data, s.value);
    data += "]}";
  }
  return Success(data + "]}");
}

// GET or POST /prometheus/api/v1/query_range
Response QueryRange(ApiContext& ctx, const Request& req, const Principal& who) {
  auto params = ParamsOf(req);
  if (!params.ok()) return Failure(400, "bad_data", params.error().message);
  auto parsed = ParseQueryParams(params.value());
  if (!parsed.ok()) return Failure(400, "bad_data", parsed.error().message);
  int64_t start = 0, end = 0, step = 0;
  for (auto [name, out] : {std::pair<const char*, int64_t*>{"start", &start}, {"end", &end}}) {
    auto t = ParseTime(params->Get(name));
    if (!t.ok()) return BadParam(name, t.error());
    *out = t.value();
  }
  auto s = ParseStep(params->Get("step"));
  if (!s.ok()) return BadParam("step", s.error());
  step = s.value();
  if (end < start) {
    return Failure(400, "bad_data",
                   "invalid parameter \"end\": end timestamp must not be before start time");
  }
  if ((end - start) / step + 1 > kMaxStepsPerSeries) {
    return Failure(400, "bad_data",
                   "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing "
                   "the query resolution (?step=XX)");
  }
  const alerting::Expr& expr = *parsed->expr;
  std::string data = "{\"resultType\":\"matrix\",\"result\":[";
  if (!expr.vector) {  // a number: one series without labels
    data += "{\"metric\":{},\"values\":[";
    for (int64_t t = start; t <= end; t += step) {
      data += t == start ? "[" : ",[";
      AppendTime(data, t);
      data += ',';
      AppendValue(data, expr.number);
      data += ']';
    }
    return Success(data + "]}]}");
  }
  auto snap = FleetSnapshot(ctx, who);
  if (!snap.ok()) return Unavailable(snap.error());
  // A step of a minute or more reads the rollups of the tier it fits, as Thanos reads its
  // downsampled blocks: a day of 1,000 GPUs is 1.4 M minute means against 86 M samples.
  int64_t rollup = step >= 3'600'000 ? 3'600'000 : step >= 60'000 ? 60'000 : 0;
  auto reader =
      alerting::MakeHistoryReader(ctx.telemetry, start - Reach(expr), end, kMaxSamples, rollup);
  alerting::Evaluator ev(*snap.value(), *reader, {true});
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(parsed->timeout_ms);
  auto series = alerting::EvaluateRange(ev, *reader, expr, start, end, step, kMaxPoints, deadline);
  if (!series.ok()) {
    return series.error().code == ErrorCode::kUnavailable
               ? Failure(503, "timeout", series.error().message)
               : Failure(422, "execution", series.error().message);
  }
  std::vector<std::pair<Labels, const alerting::RangeSeries*>> sorted;
  for (const auto& x : series.value()) {
    sorted.emplace_back(ev.OutputLabels(x.space, x.row, x.name), &x);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  bool first = true;
  for (const auto& [labels, x] : sorted) {
    data += first ? "{\"metric\":" : ",{\"metric\":";
    first = false;
    AppendLabels(data, labels);
    data += ",\"values\":[";
    for (size_t i = 0; i < x->points.size(); ++i) {
      data += i ? ",[" : "[";
      AppendTime(data, x->points[i].first);
      data += ',';
      AppendValue(data, x->points[i].second);
      data += ']';
    }
    data += "]}";
  }
  return Success(data + "]}");
}

}  // namespace

void AddRoutes(Router& router, ApiContext& ctx) {
  // GET, or POST with a form (Grafana's default: long queries fit).
  auto query = [&ctx](const Request& req, const Principal& who) { return Query(ctx, req, who); };
  auto range = [&ctx](const Request& req, const Principal& who) {
    return QueryRange(ctx, req, who);
  };
  router.Add("GET", "/prometheus/api/v1/query", Role::kViewer, query);
  router.Scoped(Scope::kClusters);
  router.Add("POST", "/prometheus/api/v1/query", Role::kViewer, query);
  router.TakesForm();
  router.Scoped(Scope::kClusters);
  router.Add("GET", "/prometheus/api/v1/query_range", Role::kViewer, range);
  router.Scoped(Scope::kClusters);
  router.Add("POST", "/prometheus/api/v1/query_range", Role::kViewer, range);
  router.TakesForm();
  router.Scoped(Scope::kClusters);
  AddMetaRoutes(router, ctx);
}

}  // namespace gpufleet::api::prom

namespace gpufleet::api {
void AddPrometheusRoutes(Router& router, ApiContext& ctx) { prom::AddRoutes(router, ctx); }
}  // namespace gpufleet::api
