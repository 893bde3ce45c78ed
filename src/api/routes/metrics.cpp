// Telemetry reads: GET /api/v1/query (the latest value of a field for every selected GPU) and
// GET /metrics (Prometheus text format 0.0.4 under dcgm-exporter's names, plus the
// controller's own gauges and counters).

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>

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

// ?cluster=&pool= narrow the page (a scrape job per cluster keeps each page small); a token
// scoped to clusters sees only their GPUs.
Response Metrics(ApiContext& ctx, const Request& req, const Principal& who) {
  NodeFilter filter;
  filter.cluster = req.Param("cluster");
  filter.pool = req.Param("pool");
  filter.clusters = who.clusters;
  struct GpuLatest {
    std::string uuid;
    std::string labels;
    std::array<std::optional<tsdb::Sample>, kFieldCount> latest;
  };
  std::vector<GpuLatest> gpus;
  // Labels under the registry's lock, values after it.
  ctx.fleet.ForEachNode(filter, [&](const Node& n) {
    for (const auto& g : n.gpus) {
      GpuLatest gl{g.uuid, {}, {}};
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
  });
  for (auto& g : gpus) g.latest = ctx.telemetry.LatestAll(g.uuid);
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

// The 95th percentile by nearest rank (the value at rank ceil(0.95 n)); sorts `values`.
double P95(std::vector<double>& values) {
  size_t rank = (values.size() * 95 + 99) / 100;
  std::nth_element(values.begin(), values.begin() + (rank - 1), values.end());
  return values[rank - 1];
}

// One step's aggregate: of a GPU's samples (by=gpu) or of the GPUs' step values (by=group).
struct StepAcc {
  double min = 0, max = 0, sum = 0, count = 0;
  std::vector<double> values;  // kept for p95 only
  void Add(double mn, double mx, double s, double c, double v, bool keep) {
    min = count ? std::min(min, mn) : mn;
    max = count ? std::max(max, mx) : mx;
    sum += s;
    count += c;
    if (keep) values.push_back(v);
  }
  double Value(const std::string& agg) {
    if (agg == "min") return min;
    if (agg == "max") return max;
    if (agg == "sum") return sum;
    if (agg == "p95") return P95(values);
    return sum / count;
  }
};

// Tier buckets on a grid of steps over [start, start + n*step).
std::vector<StepAcc> Grid(const std::vector<tsdb::Bucket>& buckets, int64_t start, int64_t step,
                          size_t n, bool p95) {
  std::vector<StepAcc> grid(n);
  for (const auto& b : buckets) {
    if (b.start < start || b.count <= 0) continue;
    size_t i = static_cast<size_t>((b.start - start) / step);
    if (i >= n) continue;
    grid[i].Add(b.min, b.max, b.sum, b.count, b.sum / b.count, p95);
  }
  return grid;
}

json::array Points(std::vector<StepAcc>& grid, int64_t start, int64_t step,
                   const std::string& agg) {
  json::array points;
  for (size_t i = 0; i < grid.size(); ++i) {
    if (grid[i].count <= 0) continue;
    points.push_back(json::array{start + static_cast<int64_t>(i) * step, grid[i].Value(agg)});
  }
  return points;
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

}  // namespace

void AddMetricsRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/metrics", Role::kViewer,
             [&ctx](const Request& req, const Principal& who) { return Metrics(ctx, req, who); });

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
        if (agg != "avg" && agg != "min" && agg != "max" && agg != "sum" && agg != "p95") {
          return ErrorResponse(
              MakeError(ErrorCode::kInvalidArgument, "'agg' must be avg, min, max, sum or p95"));
        }
        std::string by = req.Param("by").empty() ? "gpu" : req.Param("by");
        if (by != "gpu" && by != "node" && by != "pool" && by != "cluster") {
          return ErrorResponse(
              MakeError(ErrorCode::kInvalidArgument, "'by' must be gpu, node, pool or cluster"));
        }
        tsdb::Resolution resolution = step >= 3'600'000 ? tsdb::Resolution::kHour
                                      : step >= 60'000  ? tsdb::Resolution::kMinute
                                                        : tsdb::Resolution::kRaw;
        size_t steps = static_cast<size_t>((end.value() - start.value() + step - 1) / step);
        json::array series;
        // by=node|pool|cluster: each GPU is first reduced to one value per step (its min for
        // agg=min, its max for max, else its mean), then `agg` runs across the group's GPUs:
        // sum is e.g. a pool's power, p95 the hot tail of its GPUs.
        struct Group {
          json::object labels;
          std::vector<StepAcc> grid;
          int gpus = 0;
        };
        std::map<std::string, Group> groups;
        // One reply holds at most this many points (about 40 MB of JSON, or of accumulators).
        constexpr size_t kMaxPoints = 2'000'000;
        bool too_many = false;
        for (const GpuRef& g : SelectGpus(ctx, req, who)) {
          if (too_many) break;
          if ((std::max(series.size(), groups.size()) + 1) * steps > kMaxPoints) {
            too_many = true;
            break;
          }
          auto buckets =
              ctx.telemetry.Range(g.uuid, *field, resolution, start.value(), end.value());
          if (by == "gpu") {
            auto grid = Grid(buckets, start.value(), step, steps, agg == "p95");
            series.push_back(json::object{{"node", g.node},
                                          {"gpu", g.index},
                                          {"uuid", g.uuid},
                                          {"cluster", g.cluster},
                                          {"pool", g.pool},
                                          {"points", Points(grid, start.value(), step, agg)}});
            continue;
          }
          const std::string& key = by == "node" ? g.node : by == "pool" ? g.pool : g.cluster;
          Group& group = groups[key];
          if (group.grid.empty()) {
            group.grid.resize(steps);
            group.labels =
                by == "node"
                    ? json::object{{"node", g.node}, {"cluster", g.cluster}, {"pool", g.pool}}
                : by == "pool" ? json::object{{"pool", g.pool}, {"cluster", g.cluster}}
                               : json::object{{"cluster", g.cluster}};
          }
          ++group.gpus;
          std::string per_gpu = agg == "min" || agg == "max" ? agg : "avg";
          auto grid = Grid(buckets, start.value(), step, steps, false);
          for (size_t i = 0; i < steps; ++i) {
            if (grid[i].count <= 0) continue;
            double v = grid[i].Value(per_gpu);
            group.grid[i].Add(v, v, v, 1, v, agg == "p95");
          }
        }
        if (too_many) {
          return ErrorResponse(MakeError(ErrorCode::kInvalidArgument,
                                         "too many points: at most " + std::to_string(kMaxPoints) +
                                             " series x steps (" + std::to_string(steps) +
                                             " steps each); narrow the selection, group it with "
                                             "'by', or use a larger step"));
        }
        for (auto& [_, group] : groups) {
          json::object o = std::move(group.labels);
          o["gpus"] = group.gpus;
          o["points"] = Points(group.grid, start.value(), step, agg);
          series.push_back(std::move(o));
        }
        const char* tier = resolution == tsdb::Resolution::kHour     ? "1h"
                           : resolution == tsdb::Resolution::kMinute ? "1m"
                                                                     : "raw";
        return ObjectResponse(200, {{"metric", Info(*field).name},
                                    {"unit", Info(*field).unit},
                                    {"start", start.value()},
                                    {"end", end.value()},
                                    {"step", step},
                                    {"agg", agg},
                                    {"by", by},
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
        // Written directly: this is the heatmap's read of every GPU in the fleet, and building
        // a JSON tree of 10,000 objects first costs several times the writing.
        const FieldInfo& info = Info(*field);
        auto gpus = SelectGpus(ctx, req, who);
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
          if (!latest || !std::isfinite(latest->v)) {
            out += "null";
          } else {
            AppendNumber(out, latest->v);  // NVML's integers print as integers
          }
          out += ",\"time\":";
          if (latest) {
            AppendJsonString(out, FormatTime(latest->t));
          } else {
            out += "null";
          }
          out += '}';
        }
        out += "]}";
        return JsonResponse(200, std::move(out));
      });
}

}  // namespace gpufleet::api
