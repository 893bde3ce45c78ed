// compat check|show|apply|reset|export: the driver compatibility matrix; rollouts
// start|plan|list|status|pause|resume|abort|approve|rollback; node actions (nodes reboot|
// reset-gpu|maintenance|decommission|delete|actions|versions); sim faulty-version.

#include <CLI/CLI.hpp>

#include "cli/cli.h"
#include "cli/output.h"
#include "common/json_text.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

// A plan's or a check's warnings (a downgrade, known CVEs), one line each.
void PrintWarnings(const json::value& v) {
  for (const auto& w : v.at("warnings").as_array())
    std::printf("warning: %s\n", Str(w.at("message")).c_str());
}

void PrintMatrix(const json::value& v) {
  std::printf("matrix: %s (today %s)\n\n", Str(v.at("origin")).c_str(), Str(v.at("today")).c_str());
  Table t({"BRANCH", "TYPE", "END OF LIFE", "CUDA MAJOR", "STATUS"});
  for (const auto& b : v.at("branches").as_array()) {
    t.Row({Str(b.at("branch")), Str(b.at("type")), b.at("eol").is_null() ? "-" : Str(b.at("eol")),
           Str(b.at("cuda_major")), Str(b.at("status"))});
  }
  t.Print();
  std::printf("\nsource: %s\n", Str(v.at("sources").at("branches")).c_str());
}

// The flags of `rollouts start` and `rollouts plan`, made into the API's request.
struct RolloutFlags {
  std::string file, kind = "driver", target, package;
  std::vector<std::string> clusters, pools, nodes, labels, test_nodes;
  std::string test_pool, canary, confidence, batch_growth, max_unavailable, max_failed, rollback,
      drain_timeout, on_busy, respect_windows, action_timeout, boot_timeout, reason;
  int batch_size = 0;
  bool no_validate = false, approve = false, force = false;

  void Add(CLI::App* c) {
    c->add_option("-f,--filename", file,
                  "the request as JSON (POST /api/v1/rollouts' body); the flags below instead");
    c->add_option("--kind", kind, "driver, gpu-firmware or nic-firmware")
        ->check(CLI::IsMember({"driver", "gpu-firmware", "nic-firmware"}));
    c->add_option("--target", target, "the version to roll out, e.g. 580.95.05");
    c->add_option("--package", package, "passed to the install program with the version");
    c->add_option("--clusters", clusters, "select the nodes of these clusters")->delimiter(',');
    c->add_option("--pools", pools, "select the nodes of these pools")->delimiter(',');
    c->add_option("--nodes", nodes, "select these nodes")->delimiter(',');
    c->add_option("--label", labels, "select pools (or clusters) with label KEY=VALUE");
    c->add_option("--test-nodes", test_nodes, "updated and validated first")->delimiter(',');
    c->add_option("--test-pool", test_pool, "a non-production pool updated first");
    c->add_flag("--no-validate", no_validate, "do not run the validate action on test nodes");
    c->add_option("--canary", canary, "canaries per pool: a count or a share (\"10%\")");
    c->add_option("--confidence", confidence, "how long the canaries are watched, e.g. 10m");
    c->add_option("--batch-size", batch_size, "nodes in the first rolling batch");
    c->add_option("--batch-growth", batch_growth, "fixed, linear or exponential");
    c->add_option("--max-unavailable", max_unavailable,
                  "most nodes out of service per pool and cluster: a count or a share");
    c->add_option("--max-failed-nodes", max_failed, "failures that halt the rollout");
    c->add_option("--rollback", rollback, "automatic or manual");
    c->add_option("--drain-timeout", drain_timeout, "then a node's jobs are requeued");
    c->add_option("--on-busy", on_busy, "drain (wait, then requeue) or skip (come back later)");
    c->add_flag("--approve-between-stages", approve, "wait for `rollouts approve` after stages");
    c->add_option("--respect-windows", respect_windows,
                  "true or false (default: firmware true, drivers false)");
    c->add_option("--action-timeout", action_timeout, "deadline of an install or validation");
    c->add_option("--boot-timeout", boot_timeout, "deadline to come back with the target");
    c->add_flag("--force", force, "an admin overrides failing compatibility rules");
    c->add_option("--reason", reason, "why it is forced (goes to the audit log)");
  }

  // The request body, or nullopt after printing why.
  std::optional<std::string> Body(Globals& g) const {
    if (!file.empty()) return ReadInput(g, file);
    if (target.empty()) {
      std::fprintf(stderr, "error: give --target VERSION (or -f request.json)\n");
      g.exit_code = 2;
      return std::nullopt;
    }
    auto list = [](const std::vector<std::string>& v) {
      json::array a;
      for (const auto& s : v) a.emplace_back(s);
      return a;
    };
    json::object selector;
    if (!clusters.empty()) selector["clusters"] = list(clusters);
    if (!pools.empty()) selector["pools"] = list(pools);
    if (!nodes.empty()) selector["nodes"] = list(nodes);
    if (!labels.empty()) {
      json::object l;
      for (const auto& kv : labels) {
        auto eq = kv.find('=');
        if (eq == std::string::npos) {
          std::fprintf(stderr, "error: --label %s: must be KEY=VALUE\n", kv.c_str());
          g.exit_code = 2;
          return std::nullopt;
        }
        l[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
      selector["labels"] = std::move(l);
    }
    json::object st;
    if (!test_nodes.empty()) st["test_nodes"] = list(test_nodes);
    if (!test_pool.empty()) st["test_pool"] = test_pool;
    if (no_validate) st["validate"] = false;
    for (auto [key, value] :
         {std::pair{"canary", &canary}, std::pair{"confidence", &confidence},
          std::pair{"max_unavailable", &max_unavailable},
          std::pair{"max_failed_nodes", &max_failed}, std::pair{"rollback", &rollback},
          std::pair{"drain_timeout", &drain_timeout}, std::pair{"on_busy", &on_busy},
          std::pair{"action_timeout", &action_timeout}, std::pair{"boot_timeout", &boot_timeout}}) {
      if (!value->empty()) st[key] = *value;
    }
    if (batch_size > 0 || !batch_growth.empty()) {
      json::object b;
      if (batch_size > 0) b["size"] = batch_size;
      if (!batch_growth.empty()) b["growth"] = batch_growth;
      st["batch"] = std::move(b);
    }
    if (approve) st["approve_between_stages"] = true;
    if (!respect_windows.empty()) st["respect_windows"] = respect_windows == "true";
    json::object body{{"kind", kind},
                      {"target", target},
                      {"selector", std::move(selector)},
                      {"strategy", std::move(st)}};
    if (!package.empty()) body["package"] = package;
    if (force) body["force"] = true;
    if (!reason.empty()) body["reason"] = reason;
    return JsonText(body);
  }
};

void PrintRollout(const json::value& r, bool nodes) {
  std::printf("rollout %s: %s %s — %s%s\n", Str(r.at("id")).c_str(), Str(r.at("kind")).c_str(),
              Str(r.at("target")).c_str(), Str(r.at("state")).c_str(),
              Str(r.at("stage")).empty() ? "" : (" (" + Str(r.at("stage")) + ")").c_str());
  std::printf("  %s\n", Str(r.at("reason")).c_str());
  std::string counts;
  for (const auto& [k, v] : r.at("counts").as_object()) {
    if (v.as_int64() > 0)
      counts += (counts.empty() ? "" : ", ") + std::to_string(v.as_int64()) + " " + std::string(k);
  }
  std::printf("  %s node(s): %s\n", Str(r.at("total")).c_str(), counts.c_str());
  if (!nodes) return;
  std::printf("\n");
  Table t({"NODE", "POOL", "STAGE", "STATE", "FROM", "TO", "MESSAGE"});
  for (const auto& n : r.at("nodes").as_array()) {
    t.Row({Str(n.at("node")), Str(n.at("pool")), Str(n.at("stage")), Str(n.at("state")),
           Str(n.at("from")), Str(n.at("to")), Str(n.at("message"))});
  }
  t.Print();
}

std::string Duration(int64_t s) {
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  }
  return buf;
}

void AddRolloutCommands(CLI::App& app, Globals& g) {
  auto* rollouts = app.add_subcommand(
      "rollouts", "Staged rollouts of drivers and firmware (test, canary, batches, rollback)");
  rollouts->require_subcommand(1);
  static RolloutFlags start_flags, plan_flags;
  auto* start = rollouts->add_subcommand("start", "Start a rollout (operator)");
  start_flags.Add(start);
  start->callback([&g] {
    auto body = start_flags.Body(g);
    if (!body) return;
    if (auto v = Call(g, "POST", "/api/v1/rollouts", *body)) {
      Show(g, *v, [](const json::value& r) { PrintRollout(r, false); });
    }
  });
  auto* plan = rollouts->add_subcommand("plan", "A dry run: the stages, batches, windows, time");
  plan_flags.Add(plan);
  plan->callback([&g] {
    auto body = plan_flags.Body(g);
    if (!body) return;
    auto v = Call(g, "POST", "/api/v1/rollouts/plan", *body);
    if (!v) return;
    Show(g, *v, [](const json::value& p) {
      Table t({"STAGE", "NODES", "EXPECTED", "FIRST NODES"});
      for (const auto& s : p.at("stages").as_array()) {
        std::string first;
        const auto& nodes = s.at("nodes").as_array();
        for (size_t i = 0; i < nodes.size() && i < 4; ++i) first += (i ? ", " : "") + Str(nodes[i]);
        if (nodes.size() > 4) first += ", ...";
        t.Row({Str(s.at("name")), Str(s.at("count")), Duration(s.at("expected_s").as_int64()),
               first});
      }
      t.Print();
      for (const auto& w : p.at("windows").as_array()) {
        if (w.at("always").as_bool()) continue;
        std::printf("window of pool %s: %s\n", Str(w.at("pool")).c_str(),
                    w.at("open").as_bool() ? ("open until " + Str(w.at("closes"))).c_str()
                                           : ("closed; opens " + Str(w.at("next_open"))).c_str());
      }
      for (const auto& s : p.at("skipped").as_array()) std::printf("skipped: %s\n", Str(s).c_str());
      for (const auto& f : p.at("failed").as_array()) {
        std::printf("compatibility: pool %s: %s\n", Str(f.at("pool")).c_str(),
                    Str(f.at("reason")).c_str());
      }
      std::printf("\n%s node(s), expected %s (the confidence period included)\n",
                  Str(p.at("nodes")).c_str(), Duration(p.at("expected_s").as_int64()).c_str());
      PrintWarnings(p);
    });
    if (!v->at("failed").as_array().empty()) g.exit_code = 1;
  });
  rollouts->add_subcommand("list", "List rollouts")->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/rollouts?limit=1000");
    if (!v) return;
    Show(g, *v, [](const json::value& list) {
      Table t({"ID", "KIND", "TARGET", "STATE", "STAGE", "NODES", "CREATED", "BY"});
      for (const auto& r : list.at("items").as_array()) {
        t.Row({Str(r.at("id")), Str(r.at("kind")), Str(r.at("target")), Str(r.at("state")),
               Str(r.at("stage")), Str(r.at("total")), Str(r.at("created_at")),
               Str(r.at("created_by"))});
      }
      t.Print();
    });
  });
  static std::string id;
  auto* status = rollouts->add_subcommand("status", "A rollout with every node's state");
  status->add_option("id", id, "rollout id")->required();
  status->callback([&g] {
    if (auto v = Call(g, "GET", "/api/v1/rollouts/" + UrlEncode(id))) {
      Show(g, *v, [](const json::value& r) { PrintRollout(r, true); });
    }
  });
  for (const char* control : {"pause", "resume", "abort", "approve", "rollback"}) {
    auto* c = rollouts->add_subcommand(control, std::string(control) + " a rollout (operator)");
    c->add_option("id", id, "rollout id")->required();
    c->callback([&g, control] {
      auto v = Call(g, "POST", "/api/v1/rollouts/" + UrlEncode(id) + "/" + control, "{}");
      if (v) Show(g, *v, [](const json::value& r) { PrintRollout(r, false); });
    });
  }
}

void AddNodeActionCommands(CLI::App& app, Globals& g) {
  CLI::App* nodes = nullptr;
  try {
    nodes = app.get_subcommand("nodes");
  } catch (const CLI::OptionNotFound&) {
    nodes = app.add_subcommand("nodes", "Nodes and node actions");
  }
  static std::string node, mode;
  static int gpu = 0;
  auto act = [&g](const json::object& body) {
    auto v = Call(g, "POST", "/api/v1/nodes/" + UrlEncode(node) + "/actions", JsonText(body));
    if (!v) return;
    Show(g, *v, [](const json::value& op) {
      std::printf("operation %s: %s %s: %s (%s)\n", Str(op.at("id")).c_str(),
                  Str(op.at("action")).c_str(), Str(op.at("node")).c_str(),
                  Str(op.at("state")).c_str(), Str(op.at("message")).c_str());
      std::printf("follow it with: gpufleet nodes actions %s\n", Str(op.at("node")).c_str());
    });
  };
  auto* reboot = nodes->add_subcommand(
      "reboot", "Drain a node (its jobs end or are requeued), reboot it, put it back");
  reboot->add_option("node", node, "node name")->required();
  reboot->callback([act] { act({{"action", "reboot"}}); });
  auto* reset = nodes->add_subcommand("reset-gpu", "Drain a node and reset one of its GPUs");
  reset->add_option("node", node, "node name")->required();
  reset->add_option("gpu", gpu, "GPU index")->required();
  reset->callback([act] { act({{"action", "reset-gpu"}, {"gpu", gpu}}); });
  auto* maintenance =
      nodes->add_subcommand("maintenance", "Enter (after a drain) or leave maintenance");
  maintenance->add_option("node", node, "node name")->required();
  maintenance->add_option("mode", mode, "enter or leave")
      ->required()
      ->check(CLI::IsMember({"enter", "leave"}));
  maintenance->callback([act] { act({{"action", "maintenance"}, {"mode", mode}}); });
  auto* decommission =
      nodes->add_subcommand("decommission", "Drain a node and decommission it (then delete it)");
  decommission->add_option("node", node, "node name")->required();
  decommission->callback([act] { act({{"action", "decommission"}}); });
  auto* del = nodes->add_subcommand("delete", "Forget a retired node (admin)");
  del->add_option("node", node, "node name")->required();
  del->callback([&g] {
    if (auto v = Call(g, "DELETE", "/api/v1/nodes/" + UrlEncode(node))) {
      Show(g, *v, [](const json::value&) { std::printf("node %s deleted\n", node.c_str()); });
    }
  });
  auto* actions = nodes->add_subcommand("actions", "A node's operations and how they went");
  actions->add_option("node", node, "node name")->required();
  actions->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/nodes/" + UrlEncode(node) + "/actions");
    if (!v) return;
    Show(g, *v, [](const json::value& list) {
      Table t({"ID", "ACTION", "STATE", "BY", "STARTED", "ENDED", "MESSAGE"});
      for (const auto& op : list.at("items").as_array()) {
        t.Row({Str(op.at("id")), Str(op.at("action")), Str(op.at("state")), Str(op.at("actor")),
               Str(op.at("created_at")), Str(op.at("ended_at")), Str(op.at("message"))});
      }
      t.Print();
    });
  });
  auto* versions = nodes->add_subcommand("versions", "What a node runs, and its rollouts");
  versions->add_option("node", node, "node name")->required();
  versions->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/nodes/" + UrlEncode(node) + "/versions");
    if (!v) return;
    Show(g, *v, [](const json::value& h) {
      std::printf("driver %s (CUDA %s), VBIOS %s, NIC firmware %s\n\n", Str(h.at("driver")).c_str(),
                  Str(h.at("cuda_driver")).c_str(), Str(h.at("vbios")).c_str(),
                  Str(h.at("nic_firmware")).empty() ? "-" : Str(h.at("nic_firmware")).c_str());
      Table t({"ROLLOUT", "KIND", "FROM", "TO", "STATE", "ENDED", "MESSAGE"});
      for (const auto& r : h.at("history").as_array()) {
        t.Row({Str(r.at("rollout")), Str(r.at("kind")), Str(r.at("from")), Str(r.at("to")),
               Str(r.at("state")), Str(r.at("ended_at")), Str(r.at("message"))});
      }
      t.Print();
    });
  });
}

}  // namespace

void AddSimFaultyCommand(CLI::App& sim, Globals& g) {
  auto* faulty = sim.add_subcommand(
      "faulty-version", "Mark a version faulty: simulated nodes that install it raise XIDs");
  static std::string kind = "driver", version;
  static bool clear = false;
  faulty->add_option("version", version, "the version, e.g. 580.95.05")->required();
  faulty->add_option("--kind", kind, "driver, gpu-firmware or nic-firmware")
      ->check(CLI::IsMember({"driver", "gpu-firmware", "nic-firmware"}));
  faulty->add_flag("--clear", clear, "no longer faulty");
  faulty->callback([&g] {
    json::object body{{"kind", kind}, {"version", version}, {"faulty", !clear}};
    auto v = Call(g, "POST", "/api/v1/sim/faulty-versions", JsonText(body));
    if (!v) return;
    Show(g, *v, [](const json::value&) {
      std::printf("%s %s is %s on simulated nodes\n", kind.c_str(), version.c_str(),
                  clear ? "no longer faulty" : "faulty");
    });
  });
}

void AddLifecycleCommands(CLI::App& app, Globals& g) {
  AddRolloutCommands(app, g);
  AddNodeActionCommands(app, g);
  auto* compat =
      app.add_subcommand("compat", "The driver / CUDA / GPU / operator compatibility matrix");
  compat->require_subcommand(1);

  auto* check = compat->add_subcommand(
      "check", "Check a driver version against a pool's needs; exits 1 when a rule fails");
  static std::string pool, driver, cuda;
  check->add_option("--pool", pool, "pool whose needs and GPUs are checked")->required();
  check->add_option("--driver", driver, "target driver version, e.g. 580.95.05")->required();
  check->add_option("--cuda", cuda, "a CUDA version to check instead of the pool's requires.cuda");
  check->callback([&g] {
    auto v = Call(
        g, "GET",
        "/api/v1/compat/check" + QueryString({{"pool", pool}, {"driver", driver}, {"cuda", cuda}}));
    if (!v) return;
    Show(g, *v, [](const json::value& r) {
      Table t({"RESULT", "RULE", "REASON"});
      for (const auto& f : r.at("failed").as_array()) {
        t.Row({"FAIL", Str(f.at("rule")), Str(f.at("reason"))});
      }
      for (const auto& p : r.at("passed").as_array()) {
        t.Row({"pass", Str(p.at("rule")), Str(p.at("reason"))});
      }
      t.Print();
      const bool warned = !r.at("warnings").as_array().empty();
      std::printf(
          "\n%s on pool %s: %s\n", Str(r.at("driver")).c_str(), Str(r.at("pool")).c_str(),
          r.at("ok").as_bool()
              ? (warned ? "compatible, with warnings" : "compatible")
              : (std::to_string(r.at("failed").as_array().size()) + " rule(s) failed").c_str());
      PrintWarnings(r);
    });
    if (!v->at("ok").as_bool()) g.exit_code = 1;
  });

  compat->add_subcommand("show", "The branches and their status today")->callback([&g] {
    if (auto v = Call(g, "GET", "/api/v1/compat")) Show(g, *v, PrintMatrix);
  });

  auto* apply = compat->add_subcommand(
      "apply", "Replace the matrix with a file like data/compat.yaml (admin)");
  static std::string file;
  apply->add_option("-f,--filename", file, "matrix YAML file (- for stdin)")->required();
  apply->callback([&g] {
    auto text = ReadInput(g, file);
    if (!text) return;
    auto v =
        Call(g, "PUT", "/api/v1/compat" + QueryString({{"filename", file == "-" ? "stdin" : file}}),
             *text, "application/yaml");
    if (!v) return;
    Show(g, *v, [](const json::value& m) {
      std::printf(
          "compatibility matrix applied: %zu branches, %zu CUDA rows, %zu GPU Operator "
          "releases\n",
          m.at("branches").as_array().size(), m.at("cuda").as_array().size(),
          m.at("gpu_operator").as_array().size());
    });
  });

  compat->add_subcommand("reset", "Go back to the built-in matrix (admin)")->callback([&g] {
    if (auto v = Call(g, "DELETE", "/api/v1/compat")) {
      Show(g, *v,
           [](const json::value&) { std::printf("using the built-in compatibility matrix\n"); });
    }
  });

  compat->add_subcommand("export", "Print the matrix in effect as YAML (a starting point to edit)")
      ->callback([&g] {
        if (auto v = Call(g, "GET", "/api/v1/compat/yaml")) {
          std::fputs(Str(v->at("yaml")).c_str(), stdout);
        }
      });
}

}  // namespace gpufleet::cli
