// metrics query, metrics range and top: telemetry from the command line.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <thread>

#include "cli/cli.h"
#include "cli/output.h"
#include "common/clock.h"
#include "common/json_text.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

std::string Num(const json::value& v, double scale = 1, int decimals = 0) {
  if (v.is_null()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v.to_number<double>() * scale);
  return buf;
}

// How a field's value reads in a table, as the dashboard shows it: power in watts and energy
// in kWh (the API answers in the agents' mW and mJ, as dcgm-exporter does).
struct Shown {
  std::string unit;
  double scale = 1;
  int decimals = 2;  // at most; whole numbers stay whole
};

Shown ShownAs(const std::string& unit) {
  if (unit == "mW") return {"W", 0.001, 1};
  if (unit == "mJ") return {"kWh", 1 / 3.6e9, 3};
  return {unit, 1, 2};
}

std::string Value(const Shown& s, const json::value& v) {
  if (v.is_null()) return "-";
  const double d = v.to_number<double>() * s.scale;
  return Num(v, s.scale, d == std::floor(d) && s.scale == 1 ? 0 : s.decimals);
}

struct Selector {
  std::string cluster, pool, node, gpu;
  std::vector<std::pair<std::string, std::string>> Params() const {
    return {{"cluster", cluster}, {"pool", pool}, {"node", node}, {"gpu", gpu}};
  }
};

void AddSelector(CLI::App* cmd, Selector& s) {
  cmd->add_option("--cluster", s.cluster, "only this cluster");
  cmd->add_option("--pool", s.pool, "only this pool");
  cmd->add_option("--node", s.node, "only this node");
  cmd->add_option("--gpu", s.gpu, "only this GPU (index or UUID)");
}

// One screen of `top`: the fleet's GPUs with their main fields, sorted, busiest first.
bool TopOnce(Globals& g, const Selector& sel, const std::string& sort, size_t limit) {
  const char* kColumns[] = {"gpu_util", "mem_copy_util", "fb_used",
                            "gpu_temp", "power_usage",   "sm_clock"};
  std::map<std::string, std::map<std::string, json::value>> rows;  // "node/gpu" -> field -> value
  std::map<std::string, json::object> info;
  for (const char* field : kColumns) {
    auto params = sel.Params();
    params.push_back({"metric", field});
    auto v = Call(g, "GET", "/api/v1/query" + QueryString(params));
    if (!v) return false;
    for (const auto& item : v->at("items").as_array()) {
      char key[160];
      std::snprintf(key, sizeof key, "%s/%02lld", std::string(item.at("node").as_string()).c_str(),
                    static_cast<long long>(item.at("gpu").as_int64()));
      rows[key][field] = item.at("value");
      info[key] = item.as_object();
    }
  }
  std::vector<std::string> keys;
  for (const auto& [k, _] : rows) keys.push_back(k);
  auto value = [&](const std::string& k) {
    const auto& v = rows[k][sort];
    return v.is_null() ? -1.0 : v.to_number<double>();
  };
  std::stable_sort(keys.begin(), keys.end(),
                   [&](const std::string& a, const std::string& b) { return value(a) > value(b); });
  if (g.output == "json") {
    json::array out;
    for (const auto& k : keys) {
      json::object o = info[k];
      o.erase("value");
      for (const auto& [f, v] : rows[k]) o[f] = v;
      out.push_back(std::move(o));
    }
    std::printf("%s\n", PrettyJson(json::object{{"items", out}}).c_str());
    return true;
  }
  Table t({"NODE", "GPU", "MODEL", "UTIL%", "MEM%", "FB MIB", "TEMP C", "POWER W", "SM MHZ"});
  size_t shown = 0;
  for (const auto& k : keys) {
    if (limit && shown++ >= limit) break;
    auto& r = rows[k];
    const auto& i = info[k];
    t.Row({Str(i.at("node")) + (i.at("simulated").as_bool() ? " (sim)" : ""), Str(i.at("gpu")),
           Str(i.at("model")), Num(r["gpu_util"]), Num(r["mem_copy_util"]), Num(r["fb_used"]),
           Num(r["gpu_temp"]), Num(r["power_usage"], 0.001, 1), Num(r["sm_clock"])});
  }
  t.Print();
  std::printf("%zu GPUs, sorted by %s%s\n", keys.size(), sort.c_str(),
              limit && keys.size() > limit ? (", top " + std::to_string(limit)).c_str() : "");
  return true;
}

}  // namespace

void AddSimInjectCommand(CLI::App& sim, Globals& g) {
  auto* inject = sim.add_subcommand("inject", "Make a simulated GPU show a fault");
  static std::string node;
  static int gpu = 0, xid = 0, ecc_dbe = 0, temperature = -1;
  static bool lost = false, clear = false;
  inject->add_option("node", node, "simulated node")->required();
  inject->add_option("gpu", gpu, "GPU index")->required();
  inject->add_option("--xid", xid, "raise this XID error once, e.g. 79");
  inject->add_option("--ecc-dbe", ecc_dbe, "add double-bit ECC errors");
  inject->add_option("--temperature", temperature, "hold the temperature (C)");
  inject->add_flag("--lost", lost, "the GPU stops answering");
  inject->add_flag("--clear", clear, "end every injected fault");
  inject->callback([&g] {
    json::object body;
    if (xid) body["xid"] = xid;
    if (ecc_dbe) body["ecc_dbe"] = ecc_dbe;
    if (temperature >= 0) body["temperature_c"] = temperature;
    if (lost) body["lost"] = true;
    if (clear) body["clear"] = true;
    auto v = Call(g, "POST",
                  "/api/v1/nodes/" + UrlEncode(node) + "/gpus/" + std::to_string(gpu) + "/inject",
                  JsonText(body));
    if (!v) return;
    Show(g, *v,
         [](const json::value&) { std::printf("queued for %s GPU %d\n", node.c_str(), gpu); });
  });
}

// POST /api/v1/nodes/{name}/inject: a simulated node changed as if by hand, for drift.
void AddSimDriftCommand(CLI::App& sim, Globals& g) {
  auto* cmd = sim.add_subcommand(
      "drift", "Change a simulated node as if by hand (facts, packages, a GPU's settings)");
  static std::string node;
  static int gpu = -1;
  static std::vector<std::string> facts, add, remove, settings;
  cmd->add_option("node", node, "simulated node")->required();
  cmd->add_option("--gpu", gpu, "the GPU whose --set this is");
  cmd->add_option("--fact", facts, "FACT=VALUE: kernel, os or image_id");
  cmd->add_option("--package-add", add, "NAME=VERSION installed");
  cmd->add_option("--package-remove", remove, "NAME removed");
  cmd->add_option("--set", settings,
                  "SETTING=VALUE on --gpu: power_limit_w=250, persistence_mode=disabled, "
                  "ecc_mode=..., compute_mode=..., application_clocks=1980/2619");
  cmd->callback([&g] {
    json::object body;
    if (gpu >= 0) body["gpu"] = gpu;
    auto pairs = [&g](const std::vector<std::string>& list, const char* what,
                      json::object& into) -> bool {
      for (const auto& entry : list) {
        size_t eq = entry.find('=');
        if (eq == std::string::npos || eq == 0) {
          std::fprintf(stderr, "error: %s '%s': want NAME=VALUE\n", what, entry.c_str());
          g.exit_code = 2;
          return false;
        }
        into[entry.substr(0, eq)] = entry.substr(eq + 1);
      }
      return true;
    };
    json::object fact_map;
    if (!pairs(facts, "--fact", fact_map) || !pairs(settings, "--set", body)) return;
    if (auto* p = body.if_contains("power_limit_w"); p && p->is_string()) {
      *p = std::atoi(std::string(p->as_string()).c_str());
    }
    if (!fact_map.empty()) body["facts"] = std::move(fact_map);
    if (!add.empty() || !remove.empty()) {
      json::object packages;
      if (!add.empty()) packages["add"] = json::value_from(add);
      if (!remove.empty()) packages["remove"] = json::value_from(remove);
      body["packages"] = std::move(packages);
    }
    auto v = Call(g, "POST", "/api/v1/nodes/" + UrlEncode(node) + "/inject", JsonText(body));
    if (!v) return;
    Show(g, *v, [](const json::value&) {
      std::printf("queued for %s; `gpufleet drift list --node %s` shows what it changed\n",
                  node.c_str(), node.c_str());
    });
  });
}

namespace {

void AddQueryCommand(CLI::App& app, Globals& g, CLI::App* metrics) {
  auto* q = metrics->add_subcommand("query", "The latest value of a field for every selected GPU");
  static std::string metric;
  static Selector sel;
  q->add_option("metric", metric, "field, e.g. gpu_util, power_usage, gpu_temp")->required();
  AddSelector(q, sel);
  q->callback([&g] {
    auto params = sel.Params();
    params.push_back({"metric", metric});
    auto v = Call(g, "GET", "/api/v1/query" + QueryString(params));
    if (!v) return;
    Show(g, *v, [](const json::value& r) {
      Table t({"NODE", "GPU", "MODEL", "VALUE", "UNIT", "TIME"});
      const Shown shown = ShownAs(Str(r.at("unit")));
      for (const auto& i : r.at("items").as_array()) {
        t.Row({Str(i.at("node")), Str(i.at("gpu")), Str(i.at("model")), Value(shown, i.at("value")),
               shown.unit, Str(i.at("time"))});
      }
      t.Print();
    });
  });
}

void AddRangeCommand(CLI::App& app, Globals& g, CLI::App* metrics) {
  auto* r = metrics->add_subcommand("range", "A field over time, per GPU, aligned to a step");
  static std::string metric, start = "-1h", end, step = "1m", agg = "avg", by = "gpu";
  static Selector sel;
  r->add_option("metric", metric, "field, e.g. gpu_util")->required();
  AddSelector(r, sel);
  r->add_option("--start", start, "ms since the epoch, or -DURATION (default -1h)");
  r->add_option("--end", end, "ms since the epoch, or -DURATION (default now)");
  r->add_option("--step", step, "e.g. 10s, 1m, 1h (default 1m)");
  r->add_option("--agg", agg, "avg, min, max, sum or p95 (default avg)");
  r->add_option("--by", by, "one series per gpu, node, pool or cluster (default gpu)");
  r->callback([&g] {
    auto params = sel.Params();
    params.insert(params.end(), {{"metric", metric},
                                 {"start", start},
                                 {"end", end},
                                 {"step", step},
                                 {"agg", agg},
                                 {"by", by}});
    auto v = Call(g, "GET", "/api/v1/query_range" + QueryString(params));
    if (!v) return;
    Show(g, *v, [](const json::value& r) {
      for (const auto& s : r.at("series").as_array()) {
        const auto& o = s.as_object();
        std::string what = o.contains("gpu")    ? Str(s.at("node")) + " GPU " + Str(s.at("gpu"))
                           : o.contains("node") ? "node " + Str(s.at("node"))
                           : o.contains("pool") ? "pool " + Str(s.at("pool"))
                                                : "cluster " + Str(s.at("cluster"));
        if (o.contains("gpus")) what += ", " + Str(s.at("gpus")) + " GPUs";
        const Shown shown = ShownAs(Str(r.at("unit")));
        std::printf("%s (%s %s, %s, tier %s)\n", what.c_str(), Str(r.at("agg")).c_str(),
                    Str(r.at("metric")).c_str(), shown.unit.c_str(), Str(r.at("tier")).c_str());
        Table t({"TIME", "VALUE"});
        for (const auto& p : s.at("points").as_array()) {
          int64_t ms = p.at(0).as_int64();
          std::time_t secs = ms / 1000;
          char when[32];
          std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&secs));
          t.Row({when, Value(shown, p.at(1))});
        }
        t.Print();
      }
    });
  });
}

// A PromQL instant query through the Prometheus API (docs/grafana.md).
void AddPromqlCommand(CLI::App& app, Globals& g, CLI::App* metrics) {
  auto* p = metrics->add_subcommand("promql", "A PromQL query now (or at --time), as Grafana's");
  static std::string expr, time;
  p->add_option("expr", expr, "PromQL, e.g. 'avg by (pool) (DCGM_FI_DEV_GPU_UTIL)'")->required();
  p->add_option("--time", time, "RFC 3339 or Unix seconds (default now)");
  p->callback([&g] {
    std::vector<std::pair<std::string, std::string>> params{{"query", expr}};
    if (!time.empty()) params.push_back({"time", time});
    auto v = Call(g, "GET", "/prometheus/api/v1/query" + QueryString(params));
    if (!v) return;
    Show(g, *v, [](const json::value& r) {
      const auto& data = r.at("data");
      if (data.at("resultType") == "scalar") {
        std::printf("%s\n", Str(data.at("result").at(1)).c_str());
        return;
      }
      Table t({"SERIES", "VALUE"});
      for (const auto& s : data.at("result").as_array()) {
        std::string labels;
        for (const auto& [k, val] : s.at("metric").as_object()) {
          if (k == "__name__") continue;
          labels += (labels.empty() ? "" : ", ") + std::string(k) + "=" + Str(val);
        }
        auto name = s.at("metric").as_object().if_contains("__name__");
        t.Row({(name ? Str(*name) : "") + "{" + labels + "}", Str(s.at("value").at(1))});
      }
      t.Print();
    });
  });
}

void AddTopCommand(CLI::App& app, Globals& g) {
  auto* top = app.add_subcommand("top", "A live view of the fleet's GPUs, busiest first");
  static Selector sel;
  static std::string sort = "gpu_util", interval = "2s";
  static size_t limit = 40;
  static bool once = false;
  AddSelector(top, sel);
  top->add_option("--sort", sort, "field to sort by (default gpu_util)");
  top->add_option("--interval", interval, "refresh period (default 2s)");
  top->add_option("--limit", limit, "rows to show (default 40; 0 for all)");
  top->add_flag("--once", once, "print one screen and exit");
  top->callback([&g] {
    int64_t period = ParseDurationMs(interval);
    if (period <= 0) {
      std::fprintf(stderr, "error: --interval must be a duration such as 500ms, 2s or 1m\n");
      g.exit_code = 2;
      return;
    }
    // A terminal is cleared for each screen; a pipe or a file gets plain text, a blank line
    // between screens.
    const bool terminal = ::isatty(STDOUT_FILENO) == 1;
    bool first = true;
    do {
      if (!once && terminal) std::printf("\033[H\033[2J");
      if (!once && !terminal && !first) std::printf("\n");
      first = false;
      if (!TopOnce(g, sel, sort, limit)) return;
      std::fflush(stdout);
      if (!once) std::this_thread::sleep_for(std::chrono::milliseconds(period));
    } while (!once);
  });
}

void AddScrapeCommand(CLI::App& app, Globals& g) {
  auto* scrape = app.add_subcommand("scrape", "Scrape mode: nodes read through dcgm-exporter")
                     ->require_subcommand(1);
  auto* targets =
      scrape->add_subcommand("targets", "Every exporter endpoint and how its last scrape went");
  static std::string pool;
  targets->add_option("--pool", pool, "only this pool");
  targets->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/scrape/targets" + QueryString({{"pool", pool}}));
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      Table t({"NODE", "POOL", "URL", "HEALTH", "LAST SCRAPE", "MS", "SAMPLES", "ERROR"});
      for (const auto& r : v.at("items").as_array()) {
        t.Row({Str(r.at("node")), Str(r.at("pool")), Str(r.at("url")), Str(r.at("health")),
               Str(r.at("last_scrape")), Num(r.at("duration_ms"), 1, 1), Str(r.at("samples")),
               Str(r.at("error"))});
      }
      t.Print();
    });
  });
}

// gpufleet remote-write list: each receiver's state and counters.
void AddRemoteWriteCommand(CLI::App& app, Globals& g) {
  auto* rw = app.add_subcommand("remote-write", "Remote write to VictoriaMetrics, Prometheus, ...")
                 ->require_subcommand(1);
  auto* list = rw->add_subcommand("list", "Each receiver: its state, samples sent and pending");
  list->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/remote-write");
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      if (v.at("items").as_array().empty()) {
        std::printf("no remote-write receiver (serve --remote-write URL, or --config)\n");
        return;
      }
      Table t({"NAME", "URL", "STATE", "SENT", "FAILED", "DROPPED", "PENDING", "NEWEST SENT",
               "LAST ERROR"});
      for (const auto& r : v.at("items").as_array()) {
        t.Row({Str(r.at("name")), Str(r.at("url")), Str(r.at("state")), Str(r.at("samples_sent")),
               Str(r.at("samples_failed")), Str(r.at("samples_dropped")),
               Str(r.at("samples_pending")), Str(r.at("newest_sample_sent")),
               Str(r.at("last_error"))});
      }
      t.Print();
      std::printf("queue: %.1f MiB of %.0f MiB kept on disk\n",
                  v.at("queue_bytes").to_number<double>() / (1 << 20),
                  v.at("window_bytes").to_number<double>() / (1 << 20));
    });
  });
}

}  // namespace

void AddMetricsCommands(CLI::App& app, Globals& g) {
  auto* metrics = app.add_subcommand("metrics", "GPU telemetry")->require_subcommand(1);
  AddQueryCommand(app, g, metrics);
  AddRangeCommand(app, g, metrics);
  AddPromqlCommand(app, g, metrics);
  AddTopCommand(app, g);
  AddScrapeCommand(app, g);
  AddRemoteWriteCommand(app, g);
}

}  // namespace gpufleet::cli
