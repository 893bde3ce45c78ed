// slurm status: how the bridge to each Slurm-scheduled cluster is doing (docs/slurm.md).

#include <CLI/CLI.hpp>

#include "cli/cli.h"
#include "cli/output.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

void StatusTables(const json::value& v) {
  const auto& items = v.at("items").as_array();
  if (items.empty()) {
    std::printf("no cluster is scheduled by Slurm (a cluster's `scheduler: {type: slurm}`)\n");
    return;
  }
  Table clusters({"CLUSTER", "STATE", "LAST POLL", "POLL", "RUNNING", "PENDING", "NODES",
                  "UNKNOWN TO SLURM", "ERROR"});
  Table nodes({"CLUSTER", "SLURM NODE", "NODE", "STATE", "FLAGS", "DRAINED BY", "REASON"});
  for (const auto& c : items) {
    char poll[32];
    std::snprintf(poll, sizeof poll, "%.2fs", c.at("poll_duration_s").to_number<double>());
    std::string unknown;
    for (const auto& n : c.at("unknown_nodes").as_array()) {
      unknown += (unknown.empty() ? "" : " ") + Str(n);
    }
    std::string error = Str(c.at("error"));
    if (const auto& e = c.at("last_command_error"); !e.is_null()) {
      error += (error.empty() ? "" : "; ") + Str(e);
    }
    clusters.Row({Str(c.at("cluster")), Str(c.at("state")),
                  c.at("last_poll_at").is_null() ? "-" : Str(c.at("last_poll_at")), poll,
                  Str(c.at("jobs_running")), Str(c.at("jobs_pending")),
                  std::to_string(c.at("nodes").as_array().size()), unknown.empty() ? "-" : unknown,
                  error.empty() ? "-" : error});
    for (const auto& n : c.at("nodes").as_array()) {
      std::string flags;
      for (const auto& f : n.at("flags").as_array()) flags += (flags.empty() ? "" : ",") + Str(f);
      nodes.Row({Str(c.at("cluster")), Str(n.at("slurm_name")),
                 n.at("node").is_null() ? "-" : Str(n.at("node")), Str(n.at("state")),
                 flags.empty() ? "-" : flags,
                 n.at("drained_by").is_null() ? "-" : Str(n.at("drained_by")),
                 Str(n.at("reason")).empty() ? "-" : Str(n.at("reason"))});
    }
  }
  clusters.Print();
  std::printf("\n");
  nodes.Print();
}

void AddSlurmStatusCommand(Globals& g, CLI::App* slurm) {
  auto* status = slurm->add_subcommand(
      "status", "Each Slurm cluster: the last poll, its jobs, Slurm's view of each node");
  status->callback([&g] {
    auto v = Call(g, "GET", "/api/v1/slurm");
    if (!v) return;
    Show(g, *v, StatusTables);
  });
}

}  // namespace

void AddSlurmCommands(CLI::App& app, Globals& g) {
  auto* slurm = app.add_subcommand("slurm", "The bridge to Slurm: status")->require_subcommand(1);
  AddSlurmStatusCommand(g, slurm);
}

}  // namespace gpufleet::cli
