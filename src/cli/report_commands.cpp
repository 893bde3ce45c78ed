// reports compliance: the posture per cluster and for the fleet, its daily trend, and the nodes
// that fail a check (tables, -o json, or --csv as the API writes it).
// reports utilization|cost|energy|queue|peaks: the usage reports, a row per item; reports rates:
// the prices they use, and setting them.

#include <CLI/CLI.hpp>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "cli/cli.h"
#include "cli/output.h"
#include "common/json_text.h"

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

// A report's cell: text as it is, a whole number as one, others to three places.
std::string ReportCell(const json::value& v) {
  if (v.is_null()) return "-";
  if (!v.is_number()) return Str(v);
  const double d = v.to_number<double>();
  char buf[64];
  if (d == std::floor(d) && std::fabs(d) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", d);
  } else {
    std::snprintf(buf, sizeof buf, "%.3f", d);
  }
  return buf;
}

// How a usage report's column reads, as the dashboard shows it: shares and utilization in
// percent, hours and energy to a tenth, money to the cent, waits in whole seconds.
struct Column {
  std::string header;
  double scale = 1;
  int decimals = -1;  // -1: ReportCell's
};

Column ColumnOf(std::string key) {
  Column c;
  if (key.ends_with("_share") || key == "budget_used") {
    c = {"", 100, 1};
    key += " %";
  } else if (key.starts_with("util_")) {
    c = {"", 1, 1};
    key += " %";
  } else if (key == "kwh") {
    c = {"", 1, 1};
    key = "energy kwh";
  } else if (key == "gpu_hours_per_kwh") {
    c = {"", 1, 2};
  } else if (key.starts_with("gpu_hours")) {
    c = {"", 1, 1};
  } else if (key.ends_with("cost") || key == "budget") {
    c = {"", 1, 2};
  } else if (key.ends_with("_s")) {
    c = {"", 1, 0};
  }
  for (auto& ch : key) ch = ch == '_' ? ' ' : static_cast<char>(std::toupper(ch));
  c.header = key;
  return c;
}

std::string ColumnCell(const Column& c, const json::value& v) {
  if (c.decimals < 0 || !v.is_number()) return ReportCell(v);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", c.decimals, c.scale * v.to_number<double>());
  return buf;
}

void PrintReport(const json::value& v) {
  const auto& items = v.at("items").as_array();
  std::vector<std::string> keys;
  if (!items.empty()) {
    for (const auto& kv : items[0].as_object()) keys.emplace_back(kv.key());
  }
  std::vector<Column> columns;
  std::vector<std::string> headers;
  for (const auto& k : keys) {
    columns.push_back(ColumnOf(k));
    headers.push_back(columns.back().header);
  }
  Table t(headers);
  for (const auto& item : items) {
    std::vector<std::string> row;
    for (size_t i = 0; i < keys.size(); ++i) {
      const auto* cell = item.as_object().if_contains(keys[i]);
      row.push_back(cell ? ColumnCell(columns[i], *cell) : "-");
    }
    t.Row(row);
  }
  t.Print();
  std::printf("%zu item(s) by %s from %s to %s%s\n", items.size(), Str(v.at("by")).c_str(),
              Str(v.at("from")).c_str(), Str(v.at("to")).c_str(),
              v.as_object().contains("currency") ? (", in " + Str(v.at("currency"))).c_str() : "");
  // Less history than the period: said, not left to be guessed from small numbers.
  if (const auto* note = v.as_object().if_contains("note")) {
    std::printf("note: %s\n", Str(*note).c_str());
  }
}

void PrintRates(const json::value& v) {
  std::printf("currency %s; energy %s per kWh; a model without a price: %s per GPU-hour\n\n",
              Str(v.at("currency")).c_str(), ReportCell(v.at("energy_kwh")).c_str(),
              ReportCell(v.at("default_gpu_hour")).c_str());
  Table t({"MODEL", "SITE", "PER GPU-HOUR"});
  for (const auto& r : v.at("gpu_hour").as_array()) {
    t.Row({Str(r.at("model")), Str(r.at("site")).empty() ? "every site" : Str(r.at("site")),
           ReportCell(r.at("price"))});
  }
  for (const auto& m : v.at("models").as_array()) {
    t.Row({Str(m.at("model")), "default", ReportCell(m.at("price"))});
  }
  t.Print();
}

// "H100-SXM5-80GB@eu-west-1=2.1" -> {model, site, price}.
std::optional<json::object> RateArg(const std::string& arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0) return std::nullopt;
  std::string model = arg.substr(0, eq), site;
  if (size_t at = model.find('@'); at != std::string::npos) {
    site = model.substr(at + 1);
    model = model.substr(0, at);
  }
  char* end = nullptr;
  const std::string price = arg.substr(eq + 1);
  const double p = std::strtod(price.c_str(), &end);
  if (price.empty() || *end != '\0') return std::nullopt;
  return json::object{{"model", model}, {"site", site}, {"price", p}};
}

void AddReportsComplianceCommand(Globals& g, CLI::App* reports) {
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

void AddReportsRatesCommand(Globals& g, CLI::App* reports) {
  static std::vector<std::string> set;
  static std::string currency, energy, fallback;
  auto* rates = reports->add_subcommand(
      "rates", "The prices of the cost and energy reports; with options, sets them");
  rates->add_option("--set", set,
                    "MODEL[@SITE]=PRICE per GPU-hour (repeatable; over the catalogue's price)");
  rates->add_option("--energy-price", energy, "price per kWh");
  rates->add_option("--currency", currency, "the currency's code, e.g. EUR");
  rates->add_option("--default-price", fallback, "per GPU-hour of a model without a price");
  rates->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/reports/rates");
    if (!v) return;
    if (set.empty() && energy.empty() && currency.empty() && fallback.empty()) {
      Show(g, *v, PrintRates);
      return;
    }
    json::object body = v->as_object();
    body.erase("models");
    json::array list = body.at("gpu_hour").as_array();
    for (const auto& arg : set) {
      auto rate = RateArg(arg);
      if (!rate) {
        std::fprintf(stderr, "error: --set %s: give MODEL[@SITE]=PRICE\n", arg.c_str());
        g.exit_code = 2;
        return;
      }
      json::array kept;  // a new price for the same model and site replaces the old one
      for (const auto& r : list) {
        if (r.at("model") != rate->at("model") || r.at("site") != rate->at("site")) {
          kept.push_back(r);
        }
      }
      kept.push_back(std::move(*rate));
      list = std::move(kept);
    }
    body["gpu_hour"] = std::move(list);
    auto number = [&](const std::string& text, const char* field) {
      char* end = nullptr;
      const double d = std::strtod(text.c_str(), &end);
      if (*end != '\0') return false;
      body[field] = d;
      return true;
    };
    if ((!energy.empty() && !number(energy, "energy_kwh")) ||
        (!fallback.empty() && !number(fallback, "default_gpu_hour"))) {
      std::fprintf(stderr, "error: a price is a number\n");
      g.exit_code = 2;
      return;
    }
    if (!currency.empty()) body["currency"] = currency;
    if (auto put = Call(g, "PUT", "/api/v1/reports/rates", JsonText(body))) {
      if (auto now = Call(g, "GET", "/api/v1/reports/rates")) Show(g, *now, PrintRates);
    }
  });
}

}  // namespace

void AddReportCommands(CLI::App& app, Globals& g) {
  auto* reports = app.add_subcommand(
      "reports", "Reports: utilization, cost, energy, queue waits, peaks, compliance posture");
  AddReportsComplianceCommand(g, reports);
  struct Kind {
    const char* name;
    const char* help;
  };
  static const Kind kKinds[] = {
      {"utilization",
       "GPU-hours allocated against used (--by team, project, pool, cluster, model, node, gpu)"},
      {"cost",
       "GPU-hours and cost at the rates, the idle cost shared by cost, against the budget (--by "
       "team, project, pool, cluster, model)"},
      {"energy",
       "kWh, its cost, GPU-hours per kWh and the idle share (--by team, project, pool, "
       "cluster, model)"},
      {"queue", "queue waits per day: p50, p95, max (--by pool, team)"},
      {"peaks", "demand by hour of the week (--by fleet, pool, cluster, model)"}};
  static std::string r_from, r_to, r_by, r_cluster;
  static bool r_csv = false, r_apart = false;
  for (const auto& k : kKinds) {
    auto* sub = reports->add_subcommand(k.name, k.help);
    sub->add_option("--from", r_from, "from: -30d (default), ms since the epoch or RFC 3339");
    sub->add_option("--to", r_to, "to (default: now)");
    sub->add_option("--by", r_by, "what each row is");
    sub->add_option("--cluster", r_cluster, "only this cluster's");
    if (std::string(k.name) == "cost") {
      sub->add_flag("--idle-apart", r_apart,
                    "the idle cost as an item of its own (__idle__) instead of shared by cost");
    }
    sub->add_flag("--csv", r_csv, "print CSV as the API writes it");
    const std::string path = std::string("/api/v1/reports/") + k.name;
    sub->callback([&g, path] {
      const std::string query = QueryString({{"from", r_from},
                                             {"to", r_to},
                                             {"by", r_by},
                                             {"cluster", r_cluster},
                                             {"share_idle", r_apart ? "false" : ""},
                                             {"format", r_csv ? "csv" : ""}});
      if (r_csv) {
        if (auto text = CallText(g, "GET", path + query)) std::fputs(text->c_str(), stdout);
        return;
      }
      if (auto v = Call(g, "GET", path + query)) Show(g, *v, PrintReport);
    });
  }
  AddReportsRatesCommand(g, reports);
}

}  // namespace gpufleet::cli
