// pools scale, and scaling list|show|events|set|tune|delete: autoscaling from the command line.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>

#include "cli/cli.h"
#include "cli/output.h"
#include "common/json_text.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

std::string Num(const json::value& v, const char* fmt = "%.0f") {
  if (v.is_null()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, v.to_number<double>());
  return buf;
}

std::string Nodes(const json::value& s) {
  const auto& n = s.at("nodes");
  std::string out = Str(n.at("ready"));
  if (n.at("provisioning").to_number<int>() > 0) out += "+" + Str(n.at("provisioning"));
  if (n.at("other").to_number<int>() > 0) out += " (" + Str(n.at("other")) + " other)";
  return out;
}

std::string Mape(const json::value& f) {
  const auto& m = f.at("mape");
  return m.is_null() ? "-" : Num(json::value(m.to_number<double>() * 100), "%.1f%%");
}

void EventTable(const json::array& events) {
  Table t({"TIME", "KIND", "DELTA", "NODES", "REASON", "ACTOR", "DETAIL"});
  for (const auto& e : events) {
    std::string names;
    for (const auto& n : e.at("nodes").as_array()) {
      if (!names.empty()) names += ',';
      names += Str(n);
    }
    int delta = e.at("delta").to_number<int>();
    t.Row({Str(e.at("time")), Str(e.at("kind")),
           delta > 0 ? "+" + std::to_string(delta) : std::to_string(delta),
           names.empty() ? "-" : names, Str(e.at("reason")), Str(e.at("actor")),
           Str(e.at("detail"))});
  }
  t.Print();
}

void StatusTable(const json::array& pools) {
  Table t({"POOL", "CLUSTER", "MODE", "NODES", "TARGET", "BOUNDS", "DEMAND", "FORECAST", "MAPE",
           "DECISION", "ERROR"});
  for (const auto& s : pools) {
    const auto& p = s.at("policy");
    std::string mode = Str(p.at("mode")) + (p.at("enabled").as_bool() ? "" : " (off)") +
                       (s.at("simulated").as_bool() ? ", sim" : "");
    t.Row({Str(s.at("pool")), Str(s.at("cluster")), mode, Nodes(s), Str(s.at("nodes").at("target")),
           Str(p.at("min_nodes")) + ".." + Str(p.at("max_nodes")),
           Num(s.at("demand").at("gpus")) + " GPUs", Num(s.at("forecast").at("gpus")),
           Mape(s.at("forecast")), Str(s.at("decision").at("reason")), Str(s.at("last_error"))});
  }
  t.Print();
}

// A tune candidate's margin: "4", "4 by hour".
std::string Margin(const json::value& c) {
  return Num(c.at("forecast_margin"), "%g") + (Str(c.at("margin_by")) == "hour" ? " by hour" : "");
}

std::string Setting(const json::value& c) {
  std::string out = "share " + Num(c.at("target_share"), "%g");
  if (!c.at("forecast_margin").is_null()) out += ", margin " + Margin(c);
  return out;
}

void CandidateRow(Table& t, const std::string& label, const json::value& c) {
  t.Row({label, Num(c.at("target_share"), "%g"), Margin(c), Num(c.at("gpu_hours_idle"), "%.1f"),
         Num(c.at("gpu_hours_provisioned"), "%.1f"), Num(c.at("wait_p95_s"), "%.0fs"),
         Num(c.at("wait_p99_s"), "%.0fs"), Str(c.at("jobs_waited_over_lead_time")),
         Str(c.at("scale_events"))});
}

}  // namespace

void PrintTune(const json::value& v, bool all) {
  const auto& o = v.as_object();
  double objective = o.at("objective").at("wait_p95_s").to_number<double>();
  std::printf(
      "%s%s: %s jobs over %.1f h replayed under %zu settings in %.2f s; objective: p95 "
      "wait <= %g s\n\n",
      o.contains("pool") ? ("pool " + Str(o.at("pool")) + ", ").c_str() : "",
      Str(o.at("mode")).c_str(), Str(o.at("jobs")).c_str(),
      o.at("simulated_hours").to_number<double>(), o.at("grid").as_array().size() + 1,
      o.at("replay_seconds").to_number<double>(), objective);
  Table t({"SETTING", "SHARE", "MARGIN", "GPU-H IDLE", "GPU-H PROVISIONED", "WAIT P95", "WAIT P99",
           "WAITED > LEAD", "SCALE EVENTS"});
  CandidateRow(t, "current", o.at("current"));
  const auto& chosen = o.at("chosen");
  if (!chosen.is_null()) CandidateRow(t, "cheapest within objective", chosen);
  if (!o.at("closest").is_null()) CandidateRow(t, "lowest p95 (none within)", o.at("closest"));
  if (all) {
    std::vector<const json::value*> grid;
    for (const auto& c : o.at("grid").as_array()) grid.push_back(&c);
    std::stable_sort(grid.begin(), grid.end(), [](const json::value* a, const json::value* b) {
      return a->at("gpu_hours_idle").to_number<double>() <
             b->at("gpu_hours_idle").to_number<double>();
    });
    for (const auto* c : grid) CandidateRow(t, c->at("meets").as_bool() ? "within" : "over", *c);
  }
  t.Print();
  if (chosen.is_null()) {
    std::printf("\nno setting kept the p95 wait within %g s\n", objective);
    return;
  }
  double saving = o.at("saving").is_null() ? 0 : o.at("saving").to_number<double>();
  if (!(saving > 0)) {
    std::printf("\nthe current setting (%s) is as cheap as any within the objective\n",
                Setting(o.at("current")).c_str());
    return;
  }
  std::printf(
      "\n%s: %.0f%% fewer idle GPU-hours than the current setting (%s), at a p95 wait "
      "of %.0f s against %.0f s\n",
      Setting(chosen).c_str(), saving * 100, Setting(o.at("current")).c_str(),
      chosen.at("wait_p95_s").to_number<double>(),
      o.at("current").at("wait_p95_s").to_number<double>());
}

namespace {

void AddScaleCommand(CLI::App& app, Globals& g, CLI::App* pools) {
  auto* scale = pools->add_subcommand("scale", "Scale a pool now (its scaling policy's actuator)");
  static std::string pool;
  static int to = -1;
  static std::string by, keep;
  scale->add_option("pool", pool, "pool name")->required();
  auto* t = scale->add_option("--to", to, "nodes wanted");
  auto* b = scale->add_option("--by", by, "nodes to add (+N) or remove (-N)");
  t->excludes(b);
  scale->add_option("--keep", keep,
                    "the autoscaler keeps at least (up) or at most (down) this many nodes for "
                    "this long, e.g. 2h (default: it goes on deciding at once)");
  scale->callback([&g, t] {
    json::object body;
    if (!keep.empty()) body["keep"] = keep;
    if (t->count() > 0 && to < 0) {
      std::fprintf(stderr, "error: --to takes a node count of 0 or more, not %d\n", to);
      g.exit_code = 2;
      return;
    }
    if (!by.empty()) {
      char* end = nullptr;
      long v = std::strtol(by.c_str(), &end, 10);
      if (*end != '\0' || by == "+" || by == "-") {
        std::fprintf(stderr, "error: --by takes a whole number such as +2 or -1, not '%s'\n",
                     by.c_str());
        g.exit_code = 2;
        return;
      }
      body["delta"] = v;
    } else if (t->count() > 0) {
      body["target"] = to;
    } else {
      std::fprintf(stderr, "error: give --to N or --by +/-N\n");
      g.exit_code = 2;
      return;
    }
    auto v = Call(g, "POST", "/api/v1/pools/" + UrlEncode(pool) + "/scale", JsonText(body));
    if (!v) return;
    Show(g, *v, [](const json::value& e) {
      std::string names;
      for (const auto& n : e.at("nodes").as_array()) names += " " + Str(n);
      std::printf("pool %s: %s %s -> %s nodes%s\n", Str(e.at("pool")).c_str(),
                  Str(e.at("kind")).c_str(), Str(e.at("from")).c_str(), Str(e.at("to")).c_str(),
                  names.empty() ? "" : (":" + names).c_str());
      if (!keep.empty()) {
        std::printf("kept for %s (gpufleet scaling show %s)\n", keep.c_str(), pool.c_str());
      }
    });
  });
}

void AddScalingShowCommand(CLI::App& app, Globals& g, CLI::App* pools, CLI::App* scaling) {
  auto* show = scaling->add_subcommand("show", "One pool's policy, state and recent events");
  static std::string pool;
  show->add_option("pool", pool, "pool name")->required();
  show->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/pools/" + UrlEncode(pool) + "/scaling");
    if (!v) return;
    if (g.output == "json") {
      std::printf("%s\n", PrettyJson(*v).c_str());
      return;
    }
    StatusTable(json::array{*v});
    // The policy as a fleet file's `scaling:` block would give it (JSON's flow style is
    // YAML), so that it can be read, and pasted, field by field.
    std::printf("\nPolicy:\n");
    for (const auto& [key, value] : v->at("policy").as_object()) {
      if (key == "pool" || key == "updated_ms") continue;
      std::printf(
          "  %s: %s\n", std::string(key).c_str(),
          value.is_string() ? std::string(value.as_string()).c_str() : JsonText(value).c_str());
    }
    std::printf("Forecast: model %s, MAPE %s, bias %s, shortfall %s GPUs, %s forecasts scored\n",
                Str(v->at("forecast").at("model")).c_str(), Mape(v->at("forecast")).c_str(),
                Num(v->at("forecast").at("bias"), "%+.3f").c_str(),
                Num(v->at("forecast").at("shortfall_gpus"), "%.1f").c_str(),
                Str(v->at("forecast").at("scored")).c_str());
    if (const auto& k = v->at("keep"); k.is_object()) {
      bool floor = !k.at("min_nodes").is_null();
      std::printf("Kept:     at %s %s nodes until %s (manual, by %s)\n", floor ? "least" : "most",
                  Str(k.at(floor ? "min_nodes" : "max_nodes")).c_str(), Str(k.at("until")).c_str(),
                  Str(k.at("by")).c_str());
    }
    if (auto e = Call(g, "GET", "/api/v1/pools/" + UrlEncode(pool) + "/scaling/events?limit=10")) {
      std::printf("\nRecent events:\n");
      EventTable(e->at("items").as_array());
    }
  });
}

void AddScalingEventsCommand(CLI::App& app, Globals& g, CLI::App* pools, CLI::App* scaling) {
  auto* events = scaling->add_subcommand("events", "A pool's scaling decisions, newest first");
  static std::string pool;
  static int limit = 50;
  events->add_option("pool", pool, "pool name")->required();
  events->add_option("--limit", limit, "at most this many (default 50)");
  events->callback([&g] {
    auto v = Call(g, "GET",
                  "/api/v1/pools/" + UrlEncode(pool) + "/scaling/events" +
                      QueryString({{"limit", std::to_string(limit)}}));
    if (v) Show(g, *v, [](const json::value& v) { EventTable(v.at("items").as_array()); });
  });
}

void AddScalingSetCommand(CLI::App& app, Globals& g, CLI::App* pools, CLI::App* scaling) {
  auto* set = scaling->add_subcommand(
      "set", "Set a pool's policy from a JSON file (fleet files take a scaling: block too)");
  static std::string pool, file;
  set->add_option("pool", pool, "pool name")->required();
  set->add_option("-f,--file", file, "the policy as JSON, or - for stdin")->required();
  set->callback([&g] {
    auto text = ReadInput(g, file);
    if (!text) return;
    auto v = Call(g, "PUT", "/api/v1/pools/" + UrlEncode(pool) + "/scaling", *text);
    if (v) Show(g, *v, [](const json::value& v) { StatusTable(json::array{v}); });
  });
}

void AddScalingTuneCommand(CLI::App& app, Globals& g, CLI::App* pools, CLI::App* scaling) {
  auto* tune = scaling->add_subcommand(
      "tune",
      "Replay the pool's own jobs under a grid of target shares (and forecast margins) and "
      "propose the cheapest setting that keeps the p95 queue wait within an objective");
  static std::string pool, wait = "60s", window = "7d";
  static bool apply = false, all = false;
  tune->add_option("pool", pool, "pool name")->required();
  tune->add_option("--wait-p95", wait, "the objective: p95 queue wait at most this (60s)");
  tune->add_option("--window", window, "how far back to replay (7d; jobs are kept 7 days)");
  tune->add_flag("--apply", apply, "set the cheapest setting within the objective on the policy");
  tune->add_flag("--all", all, "print every setting replayed, cheapest first");
  tune->callback([&g] {
    json::object body{{"wait_p95", wait}, {"window", window}, {"apply", apply}};
    auto v = Call(g, "POST", "/api/v1/pools/" + UrlEncode(pool) + "/scaling/tune", JsonText(body));
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      PrintTune(v, all);
      if (v.at("applied").as_bool()) {
        std::printf("applied: the policy of pool %s now has it (gpufleet scaling show %s)\n",
                    pool.c_str(), pool.c_str());
      } else if (!apply && !v.at("saving").is_null() && v.at("saving").to_number<double>() > 0) {
        std::printf("not applied: gpufleet scaling tune %s --apply\n", pool.c_str());
      }
    });
    if (const auto& why = v->at("not_applied"); !why.is_null()) {
      std::fprintf(stderr, "error: %s\n", Str(why).c_str());
      g.exit_code = 1;
    }
  });
}

void AddScalingDeleteCommand(CLI::App& app, Globals& g, CLI::App* pools, CLI::App* scaling) {
  auto* del = scaling->add_subcommand("delete", "Stop scaling a pool (its nodes stay)");
  static std::string pool;
  del->add_option("pool", pool, "pool name")->required();
  del->callback([&g] {
    auto v = Call(g, "DELETE", "/api/v1/pools/" + UrlEncode(pool) + "/scaling");
    if (v)
      Show(g, *v,
           [](const json::value&) { std::printf("pool %s is no longer scaled\n", pool.c_str()); });
  });
}

void AddScalingCommand(CLI::App& app, Globals& g, CLI::App* pools) {
  auto* scaling =
      app.add_subcommand("scaling", "Autoscaling: policies, decisions, forecasts, events")
          ->require_subcommand(1);
  {
    auto* list = scaling->add_subcommand("list", "Every scaled pool: nodes, demand, forecast");
    list->callback([&g] {
      if (auto v = Call(g, "GET", "/api/v1/scaling")) {
        Show(g, *v, [](const json::value& v) { StatusTable(v.at("items").as_array()); });
      }
    });
  }
  AddScalingShowCommand(app, g, pools, scaling);
  AddScalingEventsCommand(app, g, pools, scaling);
  AddScalingSetCommand(app, g, pools, scaling);
  AddScalingTuneCommand(app, g, pools, scaling);
  AddScalingDeleteCommand(app, g, pools, scaling);
}

}  // namespace

void AddScalingCommands(CLI::App& app, Globals& g) {
  auto* pools = app.get_subcommand("pools");
  AddScaleCommand(app, g, pools);
  AddScalingCommand(app, g, pools);
}

}  // namespace gpufleet::cli
