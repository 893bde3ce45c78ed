// jobs submit|list|cancel: GPU requests from the command line.

#include <CLI/CLI.hpp>

#include "cli/cli.h"
#include "cli/output.h"
#include "common/json_text.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

std::string Where(const json::value& job) {
  std::string out;
  for (const auto& p : job.at("placement").as_array()) {
    if (!out.empty()) out += " ";
    out += Str(p.at("node")) + ":";
    std::string gpus;
    for (const auto& g : p.at("gpus").as_array()) gpus += (gpus.empty() ? "" : ",") + Str(g);
    out += gpus;
  }
  return out.empty() ? "-" : out;
}

void JobTable(const json::array& jobs) {
  Table t({"ID", "SOURCE", "TEAM", "PROJECT", "POOL", "GPUS", "PRIO", "STATE", "WAIT", "RUN",
           "GPU-H", "WHERE", "REASON"});
  for (const auto& j : jobs) {
    char wait[32], run[32], hours[32];
    std::snprintf(wait, sizeof wait, "%.0fs", j.at("wait_s").to_number<double>());
    std::snprintf(run, sizeof run, "%.0fs", j.at("run_s").to_number<double>());
    std::snprintf(hours, sizeof hours, "%.3f", j.at("gpu_hours").to_number<double>());
    std::string gpus = Str(j.at("gpus"));
    if (const auto* k = j.as_object().if_contains("gpus_per_node"); k && !k->is_null()) {
      gpus += " (" + Str(*k) + "/node)";
    }
    // Another scheduler's job shows its own id there ("slurm 4132").
    std::string source = Str(j.at("source"));
    if (const auto* ext = j.as_object().if_contains("external_id"); ext && !ext->is_null()) {
      source += " " + Str(*ext);
    }
    t.Row({Str(j.at("id")), source, Str(j.at("team")), Str(j.at("project")), Str(j.at("pool")),
           gpus, Str(j.at("priority")), Str(j.at("state")), wait, run, hours, Where(j),
           Str(j.at("reason"))});
  }
  t.Print();
}

}  // namespace

void AddJobCommands(CLI::App& app, Globals& g) {
  auto* jobs = app.add_subcommand("jobs", "GPU jobs: submit, list, cancel")->require_subcommand(1);

  static std::string team, project, cluster, pool, model, duration, sim_profile;
  static int gpus = 1, priority = 0, per_node = 0;
  static bool movable = false;
  auto* submit = jobs->add_subcommand("submit", "Queue a GPU request; placed when GPUs are free");
  submit->add_option("--team", team, "whose job (fair share is between teams)")->required();
  submit->add_option("--project", project, "one of the team's projects (gpufleet teams show TEAM)")
      ->required();
  submit->add_option("--pool", pool, "the pool to run in");
  submit->add_option("--cluster", cluster, "or a cluster: its pool (with --gpu-model) is chosen");
  submit->add_option("--gpu-model", model, "GPU model id, e.g. H100-SXM5-80GB");
  submit->add_option("--gpus", gpus, "GPUs (up to a node's on one node; more: whole nodes)");
  submit->add_option("--gpus-per-node", per_node,
                     "spread the GPUs over nodes, this many on each (it divides --gpus; default: "
                     "one node, or whole nodes)");
  submit->add_option("--priority", priority, "higher runs first (default 0)");
  submit->add_option("--duration", duration, "expected run time, e.g. 2h (ends the job)");
  submit->add_flag("--movable", movable,
                   "it may be moved to another node (it checkpoints), so that consolidation can "
                   "empty a lightly used node");
  submit->add_option("--sim-profile", sim_profile,
                     "on a simulated pool, how its GPUs behave: training, inference, bursty or "
                     "idle (default training)");
  submit->callback([&g] {
    json::object body{{"team", team}, {"gpus", gpus}, {"priority", priority}};
    if (!project.empty()) body["project"] = project;
    if (!pool.empty()) body["pool"] = pool;
    if (!cluster.empty()) body["cluster"] = cluster;
    if (!model.empty()) body["gpu_model"] = model;
    if (!duration.empty()) body["duration"] = duration;
    if (movable) body["movable"] = true;
    if (!sim_profile.empty()) body["sim_profile"] = sim_profile;
    if (per_node != 0) body["gpus_per_node"] = per_node;
    auto v = Call(g, "POST", "/api/v1/jobs", JsonText(body));
    if (!v) return;
    Show(g, *v, [](const json::value& j) { JobTable(json::array{j}); });
  });

  static std::string state, list_team, list_pool, list_source;
  static int limit = 100;
  auto* list = jobs->add_subcommand("list", "Jobs, newest first");
  list->add_option("--state", state, "queued, running, completed or cancelled");
  list->add_option("--team", list_team, "one team's");
  list->add_option("--pool", list_pool, "one pool's");
  list->add_option("--source", list_source,
                   "gpufleet (its own queue's) or slurm (a Slurm cluster's, followed)");
  list->add_option("--limit", limit, "at most this many (default 100)");
  list->callback([&g] {
    auto v = Call(g, "GET",
                  "/api/v1/jobs" + QueryString({{"state", state},
                                                {"team", list_team},
                                                {"pool", list_pool},
                                                {"source", list_source},
                                                {"limit", std::to_string(limit)}}));
    if (!v) return;
    Show(g, *v, [](const json::value& v) { JobTable(v.at("items").as_array()); });
  });

  static std::string id;
  auto* cancel = jobs->add_subcommand("cancel", "Cancel a job (a running one frees its GPUs)");
  cancel->add_option("id", id, "job id")->required();
  cancel->callback([&g] {
    auto v = Call(g, "DELETE", "/api/v1/jobs/" + UrlEncode(id));
    if (!v) return;
    Show(g, *v, [](const json::value& j) { JobTable(json::array{j}); });
  });
}

}  // namespace gpufleet::cli
