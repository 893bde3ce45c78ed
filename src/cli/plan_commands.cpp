// plan capacity: the nodes each pool needs ordered, by when and at what cost, to keep the p95
// queue wait under a target at a horizon; plan growth: what the operator plans beyond the
// trend (a team's growth a quarter, new demand from a date).

#include <CLI/CLI.hpp>
#include <cmath>

#include "cli/cli.h"
#include "cli/output.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

std::string Wait(const json::value& v) {
  if (!v.is_number()) return "unplaceable";
  double s = v.to_number<double>();
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 120 ? "%.0f s" : "%.0f min", s < 120 ? s : s / 60);
  return buf;
}

std::string Fixed(const json::value& v, int digits) {
  if (!v.is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v.to_number<double>());
  return buf;
}

void PrintGrowth(const json::value& g) {
  std::printf("team growth a quarter:");
  if (g.at("teams").as_array().empty()) std::printf(" none");
  for (const auto& t : g.at("teams").as_array()) {
    std::printf(" %s %+.0f%%", Str(t.at("team")).c_str(),
                t.at("quarterly").to_number<double>() * 100);
  }
  std::printf("\nnew demand:");
  if (g.at("demands").as_array().empty()) std::printf(" none");
  for (const auto& d : g.at("demands").as_array()) {
    std::printf(" %s: %s GPUs of %s from %s;", Str(d.at("name")).c_str(), Str(d.at("gpus")).c_str(),
                Str(d.at("pool")).c_str(), Str(d.at("from")).c_str());
  }
  std::printf("\n");
}

void AddPlanCapacityCommand(Globals& g, CLI::App* plan) {
  static std::string pool, horizon, lead_time, wait, history, budget;
  auto* capacity = plan->add_subcommand(
      "capacity",
      "What each pool needs ordered, by when and at what cost, to keep the p95 queue "
      "wait under the target at the horizon (replayed on the projected demand)");
  capacity->add_option("--pool", pool, "one pool's");
  capacity->add_option("--horizon", horizon, "how far ahead: 30d to 730d (default 180d)");
  capacity->add_option("--lead-time", lead_time, "procurement lead time (default 90d)");
  capacity->add_option("--wait-p95", wait, "the p95 queue wait to keep under (default 10m)");
  capacity->add_option("--history", history,
                       "the ledger's jobs replayed: the last 1d to 90d "
                       "(default 30d)");
  capacity->add_option("--budget", budget, "for all the orders, in the rates' currency");
  capacity->callback([&g] {
    auto v = Call(g, "GET",
                  "/api/v1/reports/capacity" + QueryString({{"pool", pool},
                                                            {"horizon", horizon},
                                                            {"lead_time", lead_time},
                                                            {"wait_p95", wait},
                                                            {"history", history},
                                                            {"budget", budget}}));
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      Table t({"POOL", "MODEL", "NODES", "DEMAND NOW", "x AT HORIZON", "P95 NOW", "P95 THEN",
               "NEEDED", "ORDER", "BY", "COST"});
      for (const auto& i : v.at("items").as_array()) {
        t.Row({Str(i.at("pool")), Str(i.at("gpu_model")), Str(i.at("nodes")),
               Fixed(i.at("peak_demand_now"), 1) + " GPUs", Fixed(i.at("factor"), 2),
               Wait(i.at("wait_p95_now_s")), Wait(i.at("wait_p95_horizon_s")),
               Str(i.at("nodes_needed")),
               i.at("order_gpus").as_int64() ? Str(i.at("order_gpus")) + " GPUs" : "-",
               i.at("order_by").is_null() ? "-" : Str(i.at("order_by")),
               i.at("cost").is_null() ? "-" : Fixed(i.at("cost"), 0)});
      }
      t.Print();
      std::printf("\n");
      for (const auto& i : v.at("items").as_array()) {
        std::printf("%s: %s%s\n", Str(i.at("pool")).c_str(), Str(i.at("summary")).c_str(),
                    i.at("within_budget").as_bool() ? "" : " (over the budget)");
        for (const auto& n : i.at("notes").as_array()) std::printf("  note: %s\n", Str(n).c_str());
      }
      std::printf(
          "total %s %s%s\n", Fixed(v.at("total_cost"), 0).c_str(), Str(v.at("currency")).c_str(),
          v.at("budget").is_null() ? "" : (" of a budget of " + Fixed(v.at("budget"), 0)).c_str());
      PrintGrowth(v.at("growth"));
    });
  });
}

void AddPlanGrowthCommand(Globals& g, CLI::App* plan) {
  static std::vector<std::string> teams, demands;
  static bool clear = false;
  auto* growth =
      plan->add_subcommand("growth", "What the plan adds to the trend; without flags, shows it");
  growth->add_option("--team", teams,
                     "TEAM=RATE: its demand grows RATE a quarter (0.2 or 20%); "
                     "repeat; replaces the teams' list");
  growth->add_option("--demand", demands,
                     "NAME:POOL:GPUS@YYYY-MM-DD: new demand of GPUS held from that date; repeat; "
                     "replaces the demands' list");
  growth->add_flag("--clear", clear, "remove all of it");
  growth->callback([&g] {
    if (teams.empty() && demands.empty() && !clear) {
      auto v = Call(g, "GET", "/api/v1/reports/capacity/growth");
      if (v) Show(g, *v, PrintGrowth);
      return;
    }
    auto fail = [&g](const std::string& what) {
      std::fprintf(stderr, "error: %s\n", what.c_str());
      g.exit_code = 2;
    };
    auto current = Call(g, "GET", "/api/v1/reports/capacity/growth");
    if (!current) return;
    json::object body = clear ? json::object{{"teams", json::array()}, {"demands", json::array()}}
                              : current->as_object();
    if (!teams.empty()) {
      json::array list;
      for (const auto& t : teams) {
        auto eq = t.find('=');
        std::string rate = eq == std::string::npos ? "" : t.substr(eq + 1);
        bool pct = !rate.empty() && rate.back() == '%';
        if (pct) rate.pop_back();
        char* end = nullptr;
        double r = rate.empty() ? NAN : std::strtod(rate.c_str(), &end);
        if (eq == std::string::npos || std::isnan(r) || *end) {
          return fail("--team '" + t + "': expected TEAM=RATE, such as nlp=20% or nlp=0.2");
        }
        list.push_back({{"team", t.substr(0, eq)}, {"quarterly", pct ? r / 100 : r}});
      }
      body["teams"] = std::move(list);
    }
    if (!demands.empty()) {
      json::array list;
      for (const auto& d : demands) {
        auto c1 = d.find(':'), c2 = d.find(':', c1 == std::string::npos ? 0 : c1 + 1),
             at = d.find('@');
        const std::string count = c2 == std::string::npos || at == std::string::npos || at < c2
                                      ? ""
                                      : d.substr(c2 + 1, at - c2 - 1);
        char* end = nullptr;
        long gpus = count.empty() ? -1 : std::strtol(count.c_str(), &end, 10);
        if (gpus < 0 || *end) {
          return fail("--demand '" + d + "': expected NAME:POOL:GPUS@YYYY-MM-DD");
        }
        list.push_back({{"name", d.substr(0, c1)},
                        {"pool", d.substr(c1 + 1, c2 - c1 - 1)},
                        {"gpus", gpus},
                        {"from", d.substr(at + 1)}});
      }
      body["demands"] = std::move(list);
    }
    auto v = Call(g, "PUT", "/api/v1/reports/capacity/growth", json::serialize(body));
    if (v) Show(g, *v, PrintGrowth);
  });
}

}  // namespace

void AddPlanCommands(CLI::App& app, Globals& g) {
  auto* plan = app.add_subcommand("plan", "Capacity planning")->require_subcommand(1);

  AddPlanCapacityCommand(g, plan);
  AddPlanGrowthCommand(g, plan);
}

}  // namespace gpufleet::cli
