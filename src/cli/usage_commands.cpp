// usage list: the usage ledger, each allocation that ended with what its GPUs did.

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
  list->add_option("--from", from, "ended after: -30d (default), ms since the epoch or RFC 3339");
  list->add_option("--to", to, "started before (default: now)");
  list->add_option("--team", team, "one team's");
  list->add_option("--project", project, "one project's");
  list->add_option("--pool", pool, "one pool's");
  list->add_option("--cluster", cluster, "one cluster's");
  list->add_option("--limit", limit, "at most this many (default 100)");
  list->add_flag("--csv", csv, "print CSV as the API writes it");
  list->callback([&g] {
    const std::string query = QueryString({{"from", from},
                                           {"to", to},
                                           {"team", team},
                                           {"project", project},
                                           {"pool", pool},
                                           {"cluster", cluster},
                                           {"limit", limit},
                                           {"format", csv ? "csv" : ""}});
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
}

}  // namespace gpufleet::cli
