// slurm status: how the bridge to each Slurm-scheduled cluster is doing; slurm gres-conf: a
// node's gres.conf lines; slurm resume|suspend HOSTLIST: Slurm's ResumeProgram and
// SuspendProgram, through the pools' actuators (docs/slurm.md).

#include <CLI/CLI.hpp>

#include "cli/cli.h"
#include "cli/client.h"
#include "cli/output.h"
#include "common/json_text.h"

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

// The lines as gres.conf takes them, and slurm.conf's Gres= as a comment above them.
void PrintGresConf(const json::value& v) {
  std::printf("# slurm.conf: NodeName=%s Gres=%s\n", Str(v.at("slurm_node")).c_str(),
              Str(v.at("gres")).c_str());
  for (const auto& l : v.at("lines").as_array()) std::printf("%s\n", Str(l).c_str());
}

void AddSlurmGresConfCommand(Globals& g, CLI::App* slurm) {
  auto* gres = slurm->add_subcommand(
      "gres-conf", "A node's gres.conf lines, from the GPUs its agent found (NVML's device files)");
  static std::string node, type;
  gres->add_option("--node", node, "The node (gpufleet's name)")->required();
  gres->add_option("--type", type,
                   "The GRES type for every GPU (default: the GPU's name as Slurm's "
                   "AutoDetect=nvml writes it, nvidia_h100_80gb_hbm3)");
  gres->callback([&g] {
    std::string path = "/api/v1/nodes/" + UrlEncode(node) + "/gres-conf";
    if (!type.empty()) path += "?type=" + UrlEncode(type);
    auto v = Call(g, "GET", path);
    if (!v) return;
    Show(g, *v, PrintGresConf);
  });
}

// resume (start) or suspend (stop) a hostlist: one line of what was done, what already was.
void AddSlurmPowerCommand(Globals& g, CLI::App* slurm, bool resume) {
  auto* cmd = slurm->add_subcommand(
      resume ? "resume" : "suspend",
      resume ? "Start Slurm's nodes through their pool's actuator (slurm.conf's ResumeProgram)"
             : "Stop Slurm's nodes through their pool's actuator (slurm.conf's SuspendProgram)");
  struct Args {
    std::string nodes, cluster, pool;
  };
  static Args args[2];
  Args& a = args[resume ? 0 : 1];
  cmd->add_option("hostlist", a.nodes, "Slurm's node names: gpu[01-04],gpu07")->required();
  cmd->add_option("--cluster", a.cluster,
                  "The cluster (needed when several are scheduled by Slurm)");
  if (resume) {
    cmd->add_option("--pool", a.pool, "The pool a node gpufleet does not know yet starts in");
  }
  cmd->callback([&g, &a, resume] {
    json::object body{{"nodes", a.nodes}};
    if (!a.cluster.empty()) body["cluster"] = a.cluster;
    if (!a.pool.empty()) body["pool"] = a.pool;
    auto v =
        Call(g, "POST", resume ? "/api/v1/slurm/resume" : "/api/v1/slurm/suspend", JsonText(body));
    if (!v) return;
    Show(g, *v, [resume](const json::value& r) {
      auto names = [](const json::value& list) {
        std::string out;
        for (const auto& n : list.as_array()) out += (out.empty() ? "" : " ") + Str(n);
        return out.empty() ? std::string("none") : out;
      };
      std::printf("cluster %s: %s %s; already %s: %s\n", Str(r.at("cluster")).c_str(),
                  resume ? "started" : "stopped",
                  names(r.at(resume ? "started" : "stopped")).c_str(), resume ? "up" : "down",
                  names(r.at("already")).c_str());
    });
  });
}

}  // namespace

void AddSlurmCommands(CLI::App& app, Globals& g) {
  auto* slurm =
      app.add_subcommand("slurm", "The bridge to Slurm: status, gres.conf, resume and suspend")
          ->require_subcommand(1);
  AddSlurmStatusCommand(g, slurm);
  AddSlurmGresConfCommand(g, slurm);
  AddSlurmPowerCommand(g, slurm, true);
  AddSlurmPowerCommand(g, slurm, false);
}

}  // namespace gpufleet::cli
