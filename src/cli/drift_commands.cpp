// drift list|show|remediate: the differences between nodes and their golden profiles, and the
// rollout that fixes a driver or firmware one.

#include <CLI/CLI.hpp>

#include "cli/cli.h"
#include "cli/output.h"
#include "common/json_text.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

std::string Where(const json::value& f) {
  return Str(f.at("node")) + (f.at("gpu").is_null() ? "" : " GPU " + Str(f.at("gpu")));
}

void PrintFindings(const json::value& v) {
  Table t({"ID", "NODE", "POOL", "FACT", "EXPECTED", "ACTUAL", "SEVERITY", "REMEDIATION", "STATE",
           "FIRST SEEN"});
  for (const auto& f : v.at("items").as_array()) {
    t.Row({Str(f.at("id")), Where(f), Str(f.at("pool")), Str(f.at("fact")), Str(f.at("expected")),
           Str(f.at("actual")), Str(f.at("severity")), Str(f.at("remediation")), Str(f.at("state")),
           Str(f.at("first_seen"))});
  }
  t.Print();
  const size_t shown = v.at("items").as_array().size();
  if (static_cast<int64_t>(shown) < v.at("total").as_int64()) {
    std::printf("(the first %zu of %s: --limit, or --node, --pool, --state, --severity)\n", shown,
                Str(v.at("total")).c_str());
  }
  const auto& s = v.at("summary");
  const auto& sev = s.at("by_severity");
  std::printf(
      "\n%s node(s) drifted: %s open, %s remediating, %s resolved; unresolved by severity: %s "
      "critical, %s high, %s medium, %s low\n",
      Str(s.at("nodes_drifted")).c_str(), Str(s.at("open")).c_str(),
      Str(s.at("remediating")).c_str(), Str(s.at("resolved")).c_str(),
      Str(sev.at("critical")).c_str(), Str(sev.at("high")).c_str(), Str(sev.at("medium")).c_str(),
      Str(sev.at("low")).c_str());
  // The same difference on many nodes is one thing to fix.
  if (const auto* causes = v.as_object().if_contains("causes");
      causes && !causes->as_array().empty()) {
    std::printf("\nby cause:\n");
    for (const auto& c : causes->as_array()) {
      std::printf("  %-8s  %s\n", Str(c.at("severity")).c_str(), Str(c.at("summary")).c_str());
    }
  }
}

void PrintFinding(const json::value& f) {
  std::printf(
      "finding:     %s\nnode:        %s (%s/%s)\nfact:        %s\nexpected:    %s\nactual:      "
      "%s\nseverity:    %s\nremediation: %s\nstate:       %s\nfirst seen:  %s\nlast seen:   "
      "%s\nresolved:    %s\nnote:        %s\nprofile:     %s\n",
      Str(f.at("id")).c_str(), Where(f).c_str(), Str(f.at("cluster")).c_str(),
      Str(f.at("pool")).c_str(), Str(f.at("fact")).c_str(), Str(f.at("expected")).c_str(),
      Str(f.at("actual")).c_str(), Str(f.at("severity")).c_str(), Str(f.at("remediation")).c_str(),
      Str(f.at("state")).c_str(), Str(f.at("first_seen")).c_str(), Str(f.at("last_seen")).c_str(),
      f.at("resolved_at").is_null() ? "-" : Str(f.at("resolved_at")).c_str(),
      f.at("note").as_string().empty() ? "-" : Str(f.at("note")).c_str(),
      JsonText(f.at("profile")).c_str());
}

}  // namespace

void AddDriftCommands(CLI::App& app, Globals& g) {
  auto* drift = app.add_subcommand("drift", "Nodes that differ from their golden profile");
  drift->require_subcommand(1);
  static std::string node, pool, cluster, state, severity, limit, id;
  static bool start = false;
  auto* list = drift->add_subcommand("list", "Drift findings, unresolved and most severe first");
  list->add_option("--node", node, "only this node's");
  list->add_option("--pool", pool, "only this pool's");
  list->add_option("--cluster", cluster, "only this cluster's");
  list->add_option("--state", state, "open, remediating or resolved");
  list->add_option("--severity", severity, "at least this severity: critical, high, medium, low");
  list->add_option("--limit", limit, "at most this many (default 500, at most 5000)");
  list->callback([&g] {
    auto v = Call(g, "GET",
                  "/api/v1/drift" + QueryString({{"node", node},
                                                 {"pool", pool},
                                                 {"cluster", cluster},
                                                 {"state", state},
                                                 {"severity", severity},
                                                 {"limit", limit}}));
    if (v) Show(g, *v, PrintFindings);
  });
  auto* show = drift->add_subcommand("show", "One finding, with the profile in effect");
  show->add_option("id", id, "the finding's id")->required();
  show->callback([&g] {
    if (auto v = Call(g, "GET", "/api/v1/drift/" + id)) Show(g, *v, PrintFinding);
  });
  auto* remediate = drift->add_subcommand(
      "remediate", "How a finding is fixed: the rollout's plan, or --start it (operator)");
  remediate->add_option("id", id, "the finding's id")->required();
  remediate->add_flag("--start", start, "start the rollout (default: show it and its plan)");
  remediate->callback([&g] {
    auto r = Call(g, "GET", "/api/v1/drift/" + id + "/remediation");
    if (!r) return;
    if (r->at("request").is_null()) {
      if (start) {
        std::fprintf(stderr, "error: no rollout fixes finding %s: %s\n", id.c_str(),
                     Str(r->at("why")).c_str());
        g.exit_code = 1;
        return;
      }
      Show(g, *r,
           [](const json::value& r) { std::printf("manual: %s\n", Str(r.at("why")).c_str()); });
      return;
    }
    const std::string request = JsonText(r->at("request"));
    if (start) {
      if (auto v = Call(g, "POST", "/api/v1/rollouts", request)) {
        Show(g, *v, [](const json::value& v) {
          std::printf("rollout %s started: %s to %s on %zu node(s): gpufleet rollouts status %s\n",
                      Str(v.at("id")).c_str(), Str(v.at("kind")).c_str(),
                      Str(v.at("target")).c_str(), v.at("nodes").as_array().size(),
                      Str(v.at("id")).c_str());
        });
      }
      return;
    }
    auto plan = Call(g, "POST", "/api/v1/rollouts/plan", request);
    if (!plan) return;
    json::object both{{"remediation", *r}, {"plan", *plan}};
    Show(g, both, [](const json::value& v) {
      std::printf("rollout: %s\n", Str(v.at("remediation").at("why")).c_str());
      for (const auto& f : v.at("plan").at("failed").as_array()) {
        std::printf("compatibility: pool %s: %s\n", Str(f.at("pool")).c_str(),
                    Str(f.at("reason")).c_str());
      }
      std::printf("plan: %zu stage(s), %s node(s); start it with --start\n",
                  v.at("plan").at("stages").as_array().size(),
                  Str(v.at("plan").at("nodes")).c_str());
    });
  });
}

}  // namespace gpufleet::cli
