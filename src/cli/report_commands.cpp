// reports compliance: the posture per cluster and for the fleet, its daily trend, and the nodes
// that fail a check (tables, -o json, or --csv as the API writes it).

#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/cli.h"
#include "cli/output.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

std::string Percent(const json::value& share) {
  char text[16];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * share.to_number<double>());
  return text;
}

const char* kShareFields[] = {"supported_branch",    "drift_free",           "cve_free",
                              "firmware_at_profile", "audit_chain_verified", "compliant"};

std::vector<std::string> ShareCells(std::string first, const json::value& s) {
  std::vector<std::string> row{std::move(first), Str(s.at("nodes"))};
  for (const char* f : kShareFields) row.push_back(Percent(s.at(f)));
  return row;
}

std::vector<std::string> ShareHeaders(std::string first) {
  return {std::move(first),      "NODES",       "SUPPORTED BRANCH", "DRIFT FREE", "CVE FREE",
          "FIRMWARE AT PROFILE", "AUDIT CHAIN", "COMPLIANT"};
}

void PrintPosture(const json::value& v) {
  const auto& audit = v.at("audit");
  const std::string chain = audit.at("verified").as_bool()
                                ? "verified, " + Str(audit.at("records")) + " record(s)"
                                : "NOT verified: " + Str(audit.at("problem"));
  std::printf("compliance posture on %s (measured %s); audit chain: %s\n\n",
              Str(v.at("day")).c_str(), Str(v.at("measured_at")).c_str(), chain.c_str());
  Table now(ShareHeaders("SCOPE"));
  now.Row(ShareCells("fleet", v.at("fleet")));
  for (const auto& c : v.at("clusters").as_array()) {
    now.Row(ShareCells("cluster " + Str(c.at("name")), c));
  }
  now.Print();
  std::printf("\ntrend, %zu day(s):\n", v.at("series").as_array().size());
  Table trend(ShareHeaders("DAY"));
  for (const auto& d : v.at("series").as_array()) trend.Row(ShareCells(Str(d.at("day")), d));
  trend.Print();
  std::printf("\nthe nodes behind the figures: gpufleet reports compliance --nodes --failing\n");
}

void PrintNodes(const json::value& v) {
  Table t({"NODE", "CLUSTER", "POOL", "COMPLIANT", "FAILS"});
  for (const auto& n : v.at("items").as_array()) {
    std::string why;
    for (const auto& r : n.at("reasons").as_array()) {
      why += (why.empty() ? "" : "; ") + Str(r);
    }
    t.Row({Str(n.at("node")), Str(n.at("cluster")), Str(n.at("pool")),
           n.at("compliant").as_bool() ? "yes" : "no", why.empty() ? "-" : why});
  }
  t.Print();
  const size_t shown = v.at("items").as_array().size();
  if (static_cast<int64_t>(shown) < v.at("total").as_int64()) {
    std::printf("(the first %zu of %s: --limit, or --cluster, --pool, --check)\n", shown,
                Str(v.at("total")).c_str());
  }
}

}  // namespace

void AddReportCommands(CLI::App& app, Globals& g) {
  auto* reports = app.add_subcommand("reports", "Reports: the compliance posture");
  reports->require_subcommand(1);
  static std::string cluster, pool, check, days, limit;
  static bool nodes = false, failing = false, csv = false;
  auto* compliance = reports->add_subcommand(
      "compliance",
      "Per cluster and for the fleet: the share of nodes on a supported branch, free of drift, "
      "free of critical and high CVEs, with firmware at the profile, and the audit chain; with "
      "the daily trend");
  compliance->add_option("--cluster", cluster, "only this cluster");
  compliance->add_option("--days", days, "days of trend (default 30, at most 400)");
  compliance->add_flag("--nodes", nodes, "each node's checks instead of the shares");
  compliance->add_option("--pool", pool, "with --nodes: only this pool's");
  compliance->add_option("--check", check,
                         "with --nodes: only the nodes failing this check (supported_branch, "
                         "drift_free, cve_free, firmware_at_profile)");
  compliance->add_flag("--failing", failing, "with --nodes: only the nodes failing a check");
  compliance->add_option("--limit", limit, "with --nodes: at most this many (default 500)");
  compliance->add_flag("--csv", csv, "print CSV (the trend per day and scope, or the nodes)");
  compliance->callback([&g] {
    if (!nodes && (!pool.empty() || !check.empty() || failing || !limit.empty())) {
      std::fprintf(stderr, "error: --pool, --check, --failing and --limit go with --nodes\n");
      g.exit_code = 2;
      return;
    }
    if (nodes && !days.empty()) {
      std::fprintf(stderr, "error: --days goes with the shares, not --nodes\n");
      g.exit_code = 2;
      return;
    }
    const std::string path =
        nodes ? "/api/v1/reports/compliance/nodes" : "/api/v1/reports/compliance";
    const std::string query = QueryString({{"cluster", cluster},
                                           {"pool", pool},
                                           {"check", check},
                                           {"failing", failing ? "true" : ""},
                                           {"days", days},
                                           {"limit", limit},
                                           {"format", csv ? "csv" : ""}});
    if (csv) {
      if (auto text = CallText(g, "GET", path + query)) std::fputs(text->c_str(), stdout);
      return;
    }
    if (auto v = Call(g, "GET", path + query)) Show(g, *v, nodes ? PrintNodes : PrintPosture);
  });
}

}  // namespace gpufleet::cli
