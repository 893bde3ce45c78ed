// vulns list|show|fix: each node's published CVEs and the rollout that fixes a pool;
// bulletins list|show|import: the security bulletins in effect, and loading NVIDIA's CSAF
// documents.

#include <CLI/CLI.hpp>

#include "cli/cli.h"
#include "cli/output.h"
#include "common/json_text.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

std::string Score(const json::value& v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f", v.to_number<double>());
  return buf;
}

std::string OrDash(const json::value& v) {
  std::string s = Str(v);
  return s.empty() ? "-" : s;
}

void PrintNodes(const json::value& v) {
  Table t({"NODE", "POOL", "DRIVER", "BRANCH", "TOOLKIT", "STATUS", "CVES", "MAX CVSS", "FIX"});
  for (const auto& n : v.at("items").as_array()) {
    t.Row({Str(n.at("node")) + (n.at("simulated").as_bool() ? " (sim)" : ""), Str(n.at("pool")),
           OrDash(n.at("driver")), OrDash(n.at("branch")), OrDash(n.at("container_toolkit")),
           Str(n.at("status")), std::to_string(n.at("cves").as_array().size()),
           Score(n.at("max_cvss")), OrDash(n.at("fix"))});
  }
  t.Print();
  const size_t shown = v.at("items").as_array().size();
  if (static_cast<int64_t>(shown) < v.at("total").as_int64()) {
    std::printf("(the first %zu of %s: --limit, or --pool, --status, --min-cvss)\n", shown,
                Str(v.at("total")).c_str());
  }
  const auto& s = v.at("summary");
  std::printf(
      "\n%s node(s): %s ok, %s exposed, %s on an unsupported branch; %s at CVSS 9.0 or "
      "more\n",
      Str(s.at("nodes")).c_str(), Str(s.at("ok")).c_str(), Str(s.at("exposed")).c_str(),
      Str(s.at("unsupported_branch")).c_str(), Str(s.at("critical")).c_str());
  // The nodes on the same versions share their fix: one rollout per pool.
  if (const auto* causes = v.as_object().if_contains("causes");
      causes && !causes->as_array().empty()) {
    std::printf("\nby cause:\n");
    for (const auto& c : causes->as_array()) std::printf("  %s\n", Str(c.at("summary")).c_str());
  }
}

void PrintNode(const json::value& n) {
  std::printf(
      "node:      %s%s\npool:      %s/%s\ndriver:    %s (%s)\ntoolkit:   %s\n"
      "status:    %s\nfix:       %s\n\n",
      Str(n.at("node")).c_str(), n.at("simulated").as_bool() ? " (simulated)" : "",
      Str(n.at("cluster")).c_str(), Str(n.at("pool")).c_str(), OrDash(n.at("driver")).c_str(),
      OrDash(n.at("branch")).c_str(), OrDash(n.at("container_toolkit")).c_str(),
      Str(n.at("status")).c_str(), OrDash(n.at("fix")).c_str());
  Table t({"CVE", "CVSS", "COMPONENT", "BULLETIN", "FIXED IN"});
  for (const auto& c : n.at("cves").as_array()) {
    t.Row({Str(c.at("id")), Score(c.at("cvss")), Str(c.at("component")), Str(c.at("bulletin")),
           Str(c.at("fixed_in"))});
  }
  t.Print();
}

void PrintBulletin(const json::value& b) {
  std::printf("bulletin %s: %s, published %s (%s)\n\n", Str(b.at("id")).c_str(),
              Str(b.at("product")).c_str(), Str(b.at("published")).c_str(),
              Str(b.at("origin")).c_str());
  Table t({"CVE", "CVSS", "PLATFORM", "FIXED", "SUMMARY"});
  for (const auto& c : b.at("cves").as_array()) {
    std::string fixed;
    for (const auto& f : c.at("fixes").as_array()) {
      if (!fixed.empty()) fixed += ", ";
      fixed += Str(f.at("branch")).empty() ? Str(f.at("component")) : Str(f.at("branch"));
      fixed += " " + Str(f.at("fixed"));
    }
    t.Row(
        {Str(c.at("id")), Score(c.at("cvss")), Str(c.at("platform")), fixed, Str(c.at("summary"))});
  }
  t.Print();
}

void AddVulnsCommand(CLI::App& app, Globals& g) {
  auto* vulns = app.add_subcommand("vulns", "Published CVEs each node is exposed to");
  vulns->require_subcommand(1);
  static std::string node, pool, cluster, status, min_cvss, limit;
  auto* list = vulns->add_subcommand("list", "Every node's status, CVEs and fix");
  list->add_option("--pool", pool, "only this pool's nodes");
  list->add_option("--cluster", cluster, "only this cluster's nodes");
  list->add_option("--status", status, "ok, exposed or unsupported_branch");
  list->add_option("--min-cvss", min_cvss, "only nodes with a CVE of at least this score");
  list->add_option("--limit", limit, "at most this many nodes (default 500, at most 5000)");
  list->callback([&g] {
    auto v = Call(g, "GET",
                  "/api/v1/vulnerabilities" + QueryString({{"pool", pool},
                                                           {"cluster", cluster},
                                                           {"status", status},
                                                           {"min_cvss", min_cvss},
                                                           {"limit", limit}}));
    if (v) Show(g, *v, PrintNodes);
  });
  auto* show =
      vulns->add_subcommand("show", "One node's CVEs, each with the version that fixes it");
  show->add_option("node", node, "node name")->required();
  show->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/vulnerabilities" + QueryString({{"node", node}}));
    if (!v) return;
    const auto& items = v->at("items").as_array();
    if (items.empty()) {
      std::fprintf(stderr, "error: no node '%s'\n", node.c_str());
      g.exit_code = 1;
      return;
    }
    Show(g, items[0], PrintNode);
  });
  static bool start = false;
  auto* fix = vulns->add_subcommand(
      "fix", "The driver rollout that fixes a pool's CVEs: its plan, or --start it (operator)");
  fix->add_option("--pool", pool, "the pool")->required();
  fix->add_flag("--start", start, "start the rollout (default: show the proposal and its plan)");
  fix->callback([&g] {
    auto proposal = Call(g, "GET", "/api/v1/vulnerabilities/fix" + QueryString({{"pool", pool}}));
    if (!proposal) return;
    const std::string request = JsonText(proposal->at("request"));
    if (start) {
      if (auto r = Call(g, "POST", "/api/v1/rollouts", request)) {
        Show(g, *r, [](const json::value& r) {
          std::printf("rollout %s started: %s to %s on %zu node(s): gpufleet rollouts status %s\n",
                      Str(r.at("id")).c_str(), Str(r.at("kind")).c_str(),
                      Str(r.at("target")).c_str(), r.at("nodes").as_array().size(),
                      Str(r.at("id")).c_str());
        });
      }
      return;
    }
    auto plan = Call(g, "POST", "/api/v1/rollouts/plan", request);
    if (!plan) return;
    json::object both{{"proposal", *proposal}, {"plan", *plan}};
    Show(g, both, [](const json::value& v) {
      const auto& p = v.at("proposal");
      const auto& nodes = p.at("nodes").as_array();
      std::printf("pool %s: driver %s (%s, %s) fixes %zu node(s):", Str(p.at("pool")).c_str(),
                  Str(p.at("target")).c_str(), Str(p.at("branch")).c_str(),
                  Str(p.at("why")).c_str(), nodes.size());
      for (size_t i = 0; i < nodes.size() && i < 8; ++i) std::printf(" %s", Str(nodes[i]).c_str());
      std::printf("%s\n", nodes.size() > 8 ? " ..." : "");
      const auto& plan = v.at("plan");
      for (const auto& f : plan.at("failed").as_array()) {
        std::printf("compatibility: pool %s: %s\n", Str(f.at("pool")).c_str(),
                    Str(f.at("reason")).c_str());
      }
      std::printf("plan: %zu stage(s), %s node(s); start it with --start\n",
                  plan.at("stages").as_array().size(), Str(plan.at("nodes")).c_str());
    });
  });
}

void AddBulletinsCommand(CLI::App& app, Globals& g) {
  auto* bulletins = app.add_subcommand("bulletins", "NVIDIA security bulletins in effect");
  bulletins->require_subcommand(1);
  bulletins->add_subcommand("list", "Every bulletin, newest first")->callback([&g] {
    if (auto v = Call(g, "GET", "/api/v1/bulletins?limit=5000")) {
      Show(g, *v, [](const json::value& v) {
        Table t({"ID", "PUBLISHED", "PRODUCT", "CVES", "MAX CVSS", "ORIGIN"});
        for (const auto& b : v.at("items").as_array()) {
          t.Row({Str(b.at("id")), Str(b.at("published")), Str(b.at("product")),
                 Str(b.at("cve_count")), Score(b.at("max_cvss")), Str(b.at("origin"))});
        }
        t.Print();
      });
    }
  });
  static std::string id, file;
  auto* bshow = bulletins->add_subcommand("show", "One bulletin's CVEs and fixed versions");
  bshow->add_option("id", id, "NVIDIA's bulletin number, e.g. 5703")->required();
  bshow->callback([&g] {
    if (auto v = Call(g, "GET", "/api/v1/bulletins/" + id)) Show(g, *v, PrintBulletin);
  });
  auto* import_cmd = bulletins->add_subcommand(
      "import", "Load one of NVIDIA's CSAF 2.0 advisories (its <id>.json) (admin)");
  import_cmd->add_option("file", file, "the CSAF JSON document, or - for stdin")->required();
  import_cmd->callback([&g] {
    auto text = ReadInput(g, file);
    if (!text) return;
    if (auto v = Call(g, "POST", "/api/v1/bulletins/import", *text)) {
      Show(g, *v, [](const json::value& b) {
        std::printf("imported bulletin %s (%s, published %s): %s CVE(s)\n", Str(b.at("id")).c_str(),
                    Str(b.at("product")).c_str(), Str(b.at("published")).c_str(),
                    Str(b.at("cve_count")).c_str());
      });
    }
  });
}

}  // namespace

void AddSecurityCommands(CLI::App& app, Globals& g) {
  AddVulnsCommand(app, g);
  AddBulletinsCommand(app, g);
}

}  // namespace gpufleet::cli
