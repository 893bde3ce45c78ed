// Telemetry reads: GET /api/v1/query (the latest value of a field for every selected GPU) and
// GET /metrics (Prometheus text format 0.0.4 under dcgm-exporter's names, plus the
// controller's own gauges and counters).

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "api/json_util.h"
#include "model/json.h"

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

// The shortest text that reads back as the same double ("16.911", not "16.911000000000001").
void AppendNumber(std::string& out, double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, ec == std::errc() ? end : buf);
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

Response Metrics(ApiContext& ctx) {
  auto nodes = ctx.fleet.Nodes({});
  struct GpuLatest {
    const Node* node;
    const Gpu* gpu;
    std::string labels;
    std::array<std::optional<tsdb::Sample>, kFieldCount> latest;
  };
  std::vector<GpuLatest> gpus;
  for (const auto& n : nodes) {
    for (const auto& g : n.gpus) {
      GpuLatest gl{&n, &g, {}, ctx.telemetry.LatestAll(g.uuid)};
      AppendLabel(gl.labels, "gpu", std::to_string(g.index), true);
      AppendLabel(gl.labels, "UUID", g.uuid, false);
      AppendLabel(gl.labels, "pci_bus_id", g.pci_bus_id, false);
      AppendLabel(gl.labels, "device", "nvidia" + std::to_string(g.index), false);
      AppendLabel(gl.labels, "modelName", g.name, false);
      AppendLabel(gl.labels, "Hostname", n.name, false);
      AppendLabel(gl.labels, "cluster", n.cluster, false);
      AppendLabel(gl.labels, "pool", n.pool, false);
      gpus.push_back(std::move(gl));
    }
  }
  std::string out;
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
  ctx.http_metrics.Render(out);
  Response r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = std::move(out);
  return r;
}

Result<int64_t> TimeParam(const Request& req, const char* key, int64_t now, int64_t fallback) {
  auto it = req.query.find(key);
  if (it == req.query.end() || it->second.empty()) return fallback;
  const std::string& v = it->second;
  // Milliseconds since the epoch, or relative to now: "-1h", "-30m".
  if (v[0] == '-') {
    int64_t ago = ParseDurationMs(v.substr(1));
    if (ago < 0)
      return MakeError(ErrorCode::kInvalidArgument, std::string("'") + key + "' is not a time");
    return now - ago;
  }
  if (v.size() > 15 || v.find_first_not_of("0123456789") != std::string::npos) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        std::string("'") + key + "' must be milliseconds since the epoch or -DURATION");
  }
  return std::stoll(v);
}

// Folds tier buckets into step-aligned points with `agg`.
json::array Fold(const std::vector<tsdb::Bucket>& buckets, int64_t start, int64_t step,
                 const std::string& agg) {
  json::array points;
  size_t i = 0;
  while (i < buckets.size()) {
    int64_t at = start + (buckets[i].start - start) / step * step;
    double mn = buckets[i].min, mx = buckets[i].max, sum = 0, count = 0;
    for (; i < buckets.size() && buckets[i].start < at + step; ++i) {
      mn = std::min(mn, buckets[i].min);
      mx = std::max(mx, buckets[i].max);
      sum += buckets[i].sum;
      count += buckets[i].count;
    }
    double v = agg == "min"   ? mn
               : agg == "max" ? mx
               : agg == "sum" ? sum
                              : (count ? sum / count : 0);
    points.push_back(json::array{at, v});
  }
  return points;
}

// Calls fn(node, gpu) for every GPU a telemetry read selects: ?cluster=&pool=&node=&gpu= (an
// index or a UUID), within the caller's cluster scope.
template <class Fn>
void ForEachSelectedGpu(ApiContext& ctx, const Request& req, const Principal& who, Fn&& fn) {
  NodeFilter filter;
  filter.cluster = req.Param("cluster");
  filter.pool = req.Param("pool");
  filter.clusters = who.clusters;
  std::string node = req.Param("node"), gpu = req.Param("gpu");
  for (const auto& n : ctx.fleet.Nodes(filter)) {
    if (!node.empty() && n.name != node) continue;
    for (const auto& g : n.gpus) {
      if (gpu.empty() || std::to_string(g.index) == gpu || g.uuid == gpu) fn(n, g);
    }
  }
}

}  // namespace

void AddMetricsRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/metrics", Role::kViewer,
             [&ctx](const Request&, const Principal&) { return Metrics(ctx); });

  // Ranges per GPU, aligned to `step`, from the coarsest tier that serves the step: raw below a
  // minute, 1-minute rollups below an hour, 1-hour rollups above.
  router.Add(
      "GET", "/api/v1/query_range", Role::kViewer,
      [&ctx](const Request& req, const Principal& who) {
        auto field = ParseField(req.Param("metric"));
        if (!field) {
          return ErrorResponse(MakeError(ErrorCode::kInvalidArgument,
                                         "'metric' must name a field, e.g. metric=gpu_util"));
        }
        int64_t now = ctx.clock.NowMs();
        auto end = TimeParam(req, "end", now, now);
        if (!end.ok()) return ErrorResponse(end.error());
        auto start = TimeParam(req, "start", now, end.value() - 3'600'000);
        if (!start.ok()) return ErrorResponse(start.error());
        int64_t step = req.Param("step").empty() ? 60'000 : ParseDurationMs(req.Param("step"));
        if (step <= 0)
          return ErrorResponse(MakeError(ErrorCode::kInvalidArgument,
                                         "'step' must be a duration such as 1s, 1m, 1h"));
        if (start.value() >= end.value())
          return ErrorResponse(
              MakeError(ErrorCode::kInvalidArgument, "'start' must be before 'end'"));
        if ((end.value() - start.value()) / step > 11'000) {
          return ErrorResponse(
              MakeError(ErrorCode::kInvalidArgument,
                        "too many points: at most 11000 steps per series; use a larger step"));
        }
        std::string agg = req.Param("agg").empty() ? "avg" : req.Param("agg");
        if (agg != "avg" && agg != "min" && agg != "max" && agg != "sum") {
          return ErrorResponse(
              MakeError(ErrorCode::kInvalidArgument, "'agg' must be avg, min, max or sum"));
        }
        tsdb::Resolution resolution = step >= 3'600'000 ? tsdb::Resolution::kHour
                                      : step >= 60'000  ? tsdb::Resolution::kMinute
                                                        : tsdb::Resolution::kRaw;
        json::array series;
        ForEachSelectedGpu(ctx, req, who, [&](const Node& n, const Gpu& g) {
          auto buckets =
              ctx.telemetry.Range(g.uuid, *field, resolution, start.value(), end.value());
          series.push_back(json::object{{"node", n.name},
                                        {"gpu", g.index},
                                        {"uuid", g.uuid},
                                        {"cluster", n.cluster},
                                        {"pool", n.pool},
                                        {"points", Fold(buckets, start.value(), step, agg)}});
        });
        const char* tier = resolution == tsdb::Resolution::kHour     ? "1h"
                           : resolution == tsdb::Resolution::kMinute ? "1m"
                                                                     : "raw";
        return ObjectResponse(200, {{"metric", Info(*field).name},
                                    {"unit", Info(*field).unit},
                                    {"start", start.value()},
                                    {"end", end.value()},
                                    {"step", step},
                                    {"agg", agg},
                                    {"tier", tier},
                                    {"series", std::move(series)}});
      });

  router.Add(
      "GET", "/api/v1/query", Role::kViewer, [&ctx](const Request& req, const Principal& who) {
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
        json::array items;
        ForEachSelectedGpu(ctx, req, who, [&](const Node& n, const Gpu& g) {
          auto latest = ctx.telemetry.Latest(g.uuid, *field);
          json::object o{{"node", n.name},          {"gpu", g.index},       {"uuid", g.uuid},
                         {"model", g.model},        {"cluster", n.cluster}, {"pool", n.pool},
                         {"simulated", n.simulated}};
          if (!latest) {
            o["value"] = nullptr;
          } else if (latest->v == static_cast<double>(static_cast<int64_t>(latest->v))) {
            o["value"] = static_cast<int64_t>(latest->v);  // NVML's integers stay integers
          } else {
            o["value"] = latest->v;
          }
          o["time"] = latest ? json::value(FormatTime(latest->t)) : json::value(nullptr);
          items.push_back(std::move(o));
        });
        const FieldInfo& info = Info(*field);
        return ObjectResponse(
            200, {{"metric", info.name}, {"unit", info.unit}, {"items", std::move(items)}});
      });
}

}  // namespace gpufleet::api
