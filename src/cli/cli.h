#pragma once
// The operator CLI: `gpufleet <noun> <verb>` over the REST API. Each command prints a readable
// table (or `-o json`), and on failure one line on stderr and a non-zero exit status.

#include <string>
#include <vector>

namespace CLI {
class App;
}
namespace boost::json {
class value;
}

namespace gpufleet::cli {

// The one line for a command line the parser refused (`what`, its reason): an unknown command
// or verb with the nearest known one, and the help of the command it came under.
std::string UsageError(CLI::App& app, const std::vector<std::string>& args,
                       const std::string& what);

struct Globals {
  std::string server;    // --server, $GPUFLEET_SERVER, <data-dir>/controller.addr, 127.0.0.1:8080
  std::string token;     // --token, $GPUFLEET_TOKEN, <data-dir>/admin.token
  std::string data_dir;  // --data-dir, default DefaultDataDir()
  // For an https:// server: --ca-file, else $GPUFLEET_CA_FILE, else <data-dir>/tls/ca.pem when
  // the server came from <data-dir>/controller.addr, else the system's store.
  std::string ca_file;
  bool insecure_skip_verify = false;  // --insecure-skip-verify
  std::string output = "table";
  int exit_code = 0;
};

void AddFleetCommands(CLI::App& app, Globals& g);     // clusters, pools, nodes, gpus, gpu-models
void AddAdminCommands(CLI::App& app, Globals& g);     // tokens, apply, audit, controllers
void AddMetricsCommands(CLI::App& app, Globals& g);   // metrics query|range, top, scrape targets
void AddSimInjectCommand(CLI::App& sim, Globals& g);  // sim inject (fault injection)
void AddSimDriftCommand(CLI::App& sim, Globals& g);   // sim drift (changed by hand)
void AddSimFaultyCommand(CLI::App& sim, Globals& g);  // sim faulty-version
void AddJobCommands(CLI::App& app, Globals& g);       // jobs submit|list|cancel
void AddSlurmCommands(CLI::App& app, Globals& g);     // slurm status
// pools scale, scaling list|show|events|set|delete (after AddFleetCommands: it adds to `pools`)
void AddScalingCommands(CLI::App& app, Globals& g);
void AddReplayCommand(CLI::App& app, Globals& g);  // replay (trace, scheduler, autoscaler)
// A tune's result (sched::TuneJson, with the pool's fields when it has them) as tables: the
// current setting against the cheapest that meets the objective; with `all`, every setting.
void PrintTune(const boost::json::value& v, bool all);
void AddHealthCommands(CLI::App& app, Globals& g);  // health, xids, alerts, channels, silences
void AddRuleCommands(CLI::App& app, Globals& g);    // rules list|test|delete|metrics
// compat, rollouts, node actions (nodes reboot|reset-gpu|maintenance|decommission|delete)
void AddLifecycleCommands(CLI::App& app, Globals& g);
void AddSecurityCommands(CLI::App& app, Globals& g);        // vulns list|show|fix, bulletins
void AddDriftCommands(CLI::App& app, Globals& g);           // drift list|show|remediate
void AddReportCommands(CLI::App& app, Globals& g);          // reports compliance
void AddTeamCommands(CLI::App& app, Globals& g);            // teams, teams projects
void AddUsageCommands(CLI::App& app, Globals& g);           // usage list (the usage ledger)
void AddRecommendationCommands(CLI::App& app, Globals& g);  // recommendations (advice)
void AddAssetCommands(CLI::App& app, Globals& g);           // assets (the asset register)
void AddPlanCommands(CLI::App& app, Globals& g);            // plan capacity|growth

}  // namespace gpufleet::cli
