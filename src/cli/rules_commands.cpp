// rules list|test|delete|metrics: alert rules from the command line. Rule files are applied
// with `gpufleet apply -f rules.yaml`.

#include <CLI/CLI.hpp>

#include "cli/cli.h"
#include "cli/output.h"
#include "common/json_text.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

// A rule's condition: its expression, or the health check a built-in health rule watches.
std::string Condition(const json::value& r) {
  if (Str(r.at("kind")) == "health") {
    return "health " + Str(r.at("check")) + " " + Str(r.at("level"));
  }
  return Str(r.at("expr"));
}

std::string LastRun(const json::value& run) {
  if (run.is_null()) return "-";
  if (!Str(run.at("error")).empty()) return "error: " + Str(run.at("error"));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s series, %.2f ms", Str(run.at("series")).c_str(),
                run.at("duration_ms").to_number<double>());
  return buf;
}

void AddRulesListCommand(Globals& g, CLI::App* rules) {
  auto* list = rules->add_subcommand("list", "Built-in and user rules, with their last run");
  list->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/alert-rules");
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      Table t({"ALERT", "GROUP", "STATUS", "SEVERITY", "FOR", "CONDITION", "LAST RUN"});
      for (const auto& r : v.at("items").as_array()) {
        const auto& labels = r.at("labels").as_object();
        std::string severity = labels.contains("severity") ? Str(labels.at("severity")) : "";
        t.Row({Str(r.at("alert")), Str(r.at("group")), Str(r.at("status")), severity,
               Str(r.at("for")), Condition(r), LastRun(r.at("last_run"))});
      }
      t.Print();
    });
  });
}

void AddRulesTestCommand(Globals& g, CLI::App* rules) {
  auto* test = rules->add_subcommand(
      "test", "Evaluate a rule file (or one expression) against current data; activates nothing");
  static std::string file, expr;
  test->add_option("-f,--filename", file, "rule file (- for stdin)");
  test->add_option("--expr", expr, "one expression, e.g. 'gpu_temp > 80'");
  test->callback([&g] {
    if (file.empty() == expr.empty()) {
      std::fprintf(stderr, "error: give either -f FILE or --expr EXPR\n");
      g.exit_code = 2;
      return;
    }
    std::string body;
    if (!expr.empty()) {
      // A one-rule file; JSON is YAML, so the expression needs no escaping of its own.
      body = JsonText(json::object{
          {"groups",
           json::array{json::object{
               {"name", "cli"},
               {"rules", json::array{json::object{{"alert", "Test"}, {"expr", expr}}}}}}}});
    } else {
      auto text = ReadInput(g, file);
      if (!text) return;
      body = *text;
    }
    std::string name = expr.empty() ? (file == "-" ? "stdin" : file) : "--expr";
    auto v = Call(g, "POST", "/api/v1/alert-rules/test?filename=" + UrlEncode(name), body,
                  "application/yaml");
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      for (const auto& r : v.at("items").as_array()) {
        std::printf("%s: %s\n", Str(r.at("alert")).c_str(), LastRun(r.at("run")).c_str());
        Table t({"STATE", "VALUE", "LABELS", "SUMMARY"});
        for (const auto& a : r.at("alerts").as_array()) {
          std::string labels;
          for (const auto& kv : a.at("labels").as_object()) {
            if (kv.key() == "alertname") continue;
            labels += (labels.empty() ? "" : ",") + std::string(kv.key()) + "=" + Str(kv.value());
          }
          const auto& ann = a.at("annotations").as_object();
          t.Row({Str(a.at("state")), Str(a.at("value")), labels,
                 ann.contains("summary") ? Str(ann.at("summary")) : ""});
        }
        t.Print();
      }
    });
  });
}

void AddRulesDeleteCommand(Globals& g, CLI::App* rules) {
  auto* del =
      rules->add_subcommand("delete", "Remove a user rule (a built-in of its name returns)");
  static std::string target;
  del->add_option("name", target, "the rule's alert name")->required();
  del->callback([&g] {
    auto v = Call(g, "DELETE", "/api/v1/alert-rules/" + UrlEncode(target));
    if (!v) return;
    Show(g, *v, [](const json::value&) { std::printf("rule %s deleted\n", target.c_str()); });
  });
}

void AddRulesMetricsCommand(Globals& g, CLI::App* rules) {
  auto* metrics = rules->add_subcommand("metrics", "The names rule expressions can use");
  metrics->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/alert-rules/metrics");
    if (!v) return;
    Show(g, *v, [](const json::value& v) {
      Table t({"NAME", "ROWS", "HELP"});
      for (const auto& m : v.at("items").as_array()) {
        t.Row({Str(m.at("name")), Str(m.at("rows")), Str(m.at("help"))});
      }
      t.Print();
    });
  });
}

}  // namespace

void AddRuleCommands(CLI::App& app, Globals& g) {
  auto* rules = app.add_subcommand("rules", "Alert rules")->require_subcommand(1);
  AddRulesListCommand(g, rules);
  AddRulesTestCommand(g, rules);
  AddRulesDeleteCommand(g, rules);
  AddRulesMetricsCommand(g, rules);
}

}  // namespace gpufleet::cli
