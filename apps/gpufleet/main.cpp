// gpufleet: one binary, many subcommands. main() parses and wires; the logic is in src/.

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/gpufleet/daemons.h"
#include "apps/gpufleet/store_commands.h"
#include "cli/cli.h"

int main(int argc, char** argv) {
  // A file that may not grow (RLIMIT_FSIZE) is a failed write, as a full disk is, that the
  // controller reports and survives, not a signal that ends it.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"gpufleet: manage fleets of GPU servers", "gpufleet"};
  app.set_version_flag("--version", GPUFLEET_VERSION);
  app.require_subcommand(1);
  gpufleet::cli::Globals globals;
  app.add_option("--server", globals.server, "controller address (env GPUFLEET_SERVER)");
  app.add_option("--token", globals.token,
                 "API token (env GPUFLEET_TOKEN; default DATA_DIR/admin.token)");
  app.add_option("--data-dir", globals.data_dir,
                 "controller data directory (env GPUFLEET_DATA_DIR)");
  app.add_option("--ca-file", globals.ca_file,
                 "PEM CA bundle that https:// controllers are checked against (env "
                 "GPUFLEET_CA_FILE; default: the system's store)");
  app.add_flag("--insecure-skip-verify", globals.insecure_skip_verify,
               "https://: accept any certificate and host name (never the default)");
  app.add_option("-o,--output", globals.output, "output format: table or json")
      ->check(CLI::IsMember({"table", "json"}));
  app.fallthrough();

  gpufleet::app::AddDaemonCommands(app, globals);
  gpufleet::app::AddTlsCommands(app, globals);
  gpufleet::app::AddStoreCommands(app, globals);
  gpufleet::cli::AddFleetCommands(app, globals);
  gpufleet::cli::AddAdminCommands(app, globals);
  gpufleet::cli::AddMetricsCommands(app, globals);
  gpufleet::cli::AddHealthCommands(app, globals);
  gpufleet::cli::AddRuleCommands(app, globals);
  gpufleet::cli::AddLifecycleCommands(app, globals);
  gpufleet::cli::AddSecurityCommands(app, globals);
  gpufleet::cli::AddDriftCommands(app, globals);
  gpufleet::cli::AddReportCommands(app, globals);
  gpufleet::cli::AddTeamCommands(app, globals);
  gpufleet::cli::AddUsageCommands(app, globals);
  gpufleet::cli::AddRecommendationCommands(app, globals);
  gpufleet::cli::AddAssetCommands(app, globals);
  gpufleet::cli::AddPlanCommands(app, globals);
  gpufleet::cli::AddReplayCommand(app, globals);
  gpufleet::cli::AddJobCommands(app, globals);
  gpufleet::cli::AddSlurmCommands(app, globals);
  gpufleet::cli::AddScalingCommands(app, globals);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    const std::vector<std::string> args(argv + 1, argv + argc);
    std::fprintf(stderr, "error: %s\n", gpufleet::cli::UsageError(app, args, e.what()).c_str());
    return 2;
  }
  return globals.exit_code;
}
