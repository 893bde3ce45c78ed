// usage list: the usage ledger, each allocation that ended with what its GPUs did; usage
// export: all of a period's as CSV.
// recommendations: the optimization advice, with its evidence and what it would save.

#include <CLI/CLI.hpp>
#include <cmath>

#include "cli/cli.h"
#include "cli/output.h"
#include "common/json_text.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

std::string Fixed(const json::value& v, int digits, double scale = 1) {
  if (!v.is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v.to_number<double>() * scale);
  return buf;
}

}  // namespace

void AddUsageCommands(CLI::App& app, Globals& g) {
  auto* usage = app.add_subcommand("usage", "The usage ledger: every allocation that ended")
                    ->require_subcommand(1);
  auto* list = usage->add_subcommand("list", "Allocations that ended, newest first");
  static std::string from, to, team, project, pool, cluster, limit = "100";
  static bool csv = false;
  static auto filter_params = [] {
    return std::vector<std::pair<std::string, std::string>>{{"from", from}, {"to", to},
                                                            {"team", team}, {"project", project},
                                                            {"pool", pool}, {"cluster", cluster}};
  };
  auto filters = [](CLI::App* command) {
    command->add_option("--from", from,
                        "ended after: -30d (default), ms since the epoch or RFC 3339");
    command->add_option("--to", to, "started before (default: now)");
    command->add_option("--team", team, "one team's");
    command->add_option("--project", project, "one project's");
    command->add_option("--pool", pool, "one pool's");
    command->add_option("--cluster", cluster, "one cluster's");
  };
  filters(list);
  list->add_option("--limit", limit, "at most this many (default 100)");
  list->add_flag("--csv", csv, "print CSV as the API writes it");
  list->callback([&g] {
    auto params = filter_params();
    params.insert(params.end(), {{"limit", limit}, {"format", csv ? "csv" : ""}});
    const std::string query = QueryString(params);
    if (csv) {
      if (auto text = CallText(g, "GET", "/api/v1/usage" + query)) {
        std::fputs(text->c_str(), stdout);
      }
      return;
    }
    auto v = Call(g, "GET", "/api/v1/usage" + query);
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      Table t({"JOB", "TEAM", "PROJECT", "POOL", "GPUS", "END", "OUTCOME", "GPU-H", "WAIT", "UTIL%",
               "UTIL% P95", "MEM GiB", "PEAK GiB", "ENERGY kWh"});
      for (const auto& e : v.at("items").as_array()) {
        t.Row({Str(e.at("job")), Str(e.at("team")), Str(e.at("project")), Str(e.at("pool")),
               Str(e.at("gpus")), Str(e.at("end")), Str(e.at("outcome")),
               Fixed(e.at("gpu_hours"), 3), Fixed(e.at("wait_s"), 0) + "s",
               Fixed(e.at("util_mean"), 1), Fixed(e.at("util_p95"), 1),
               Fixed(e.at("mem_mean_bytes"), 1, 1.0 / 1073741824.0),
               Fixed(e.at("mem_peak_bytes"), 1, 1.0 / 1073741824.0),
               Fixed(e.at("energy_j"), 3, 1.0 / 3.6e6)});
      }
      t.Print();
      std::printf("%s of %s allocation(s) from %s to %s; kept %s days\n",
                  std::to_string(v.at("items").as_array().size()).c_str(),
                  Str(v.at("total")).c_str(), Str(v.at("from")).c_str(), Str(v.at("to")).c_str(),
                  Str(v.at("retention_days")).c_str());
    });
  });
  auto* export_ = usage->add_subcommand(
      "export", "Every allocation of the period as CSV (the API streams it; up to 256 MiB here)");
  filters(export_);
  export_->callback([&g] {
    if (auto text = CallText(g, "GET", "/api/v1/usage/export" + QueryString(filter_params()))) {
      std::fwrite(text->data(), 1, text->size(), stdout);
    }
  });
}

void AddRecommendationCommands(CLI::App& app, Globals& g) {
  auto* rec = app.add_subcommand(
      "recommendations",
      "Optimization advice: idle allocations, right-sizing to MIG slices, MIG for inference, "
      "time-slicing for development, spot for patient movable jobs, pools to shrink");
  static std::string from, to, min_idle;
  rec->add_option("--from", from, "look from: -30d (default), ms since the epoch or RFC 3339");
  rec->add_option("--to", to, "to (default: now)");
  rec->add_option("--min-idle", min_idle,
                  "an allocation under 5% utilization this long is idle (default 1h)");
  rec->callback([&g] {
    auto v = Call(g, "GET",
                  "/api/v1/recommendations" +
                      QueryString({{"from", from}, {"to", to}, {"min_idle", min_idle}}));
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      const auto& items = v.at("items").as_array();
      Table t({"KIND", "TARGET", "GPU-H SAVED", "COST SAVED", "kWh SAVED", "WHY"});
      double gpu_h = 0, cost = 0;
      for (const auto& i : items) {
        t.Row({Str(i.at("kind")), Str(i.at("target")), Fixed(i.at("gpu_hours_saved"), 2),
               Fixed(i.at("cost_saved"), 2), Fixed(i.at("kwh_saved"), 2), Str(i.at("summary"))});
        gpu_h += i.at("gpu_hours_saved").to_number<double>();
        if (i.at("cost_saved").is_number()) cost += i.at("cost_saved").to_number<double>();
      }
      t.Print();
      std::printf(
          "%zu recommendation(s) from %s to %s: %.1f GPU-hours, %.2f %s; the evidence: -o json\n",
          items.size(), Str(v.at("from")).c_str(), Str(v.at("to")).c_str(), gpu_h, cost,
          Str(v.at("currency")).c_str());
    });
  });
}

}  // namespace gpufleet::cli
