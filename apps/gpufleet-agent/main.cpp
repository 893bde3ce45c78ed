// gpufleet-agent: the node agent alone, for the portable tarball (cmake/portable-agent.cmake):
// the flags and the run of `gpufleet agent`, without the controller, the CLI and their
// libraries, so that it links against an old glibc and runs on the nodes' distributions.

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>

#include "apps/gpufleet/agent_command.h"
#include "cli/cli.h"

int main(int argc, char** argv) {
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"gpufleet-agent: the gpufleet node agent (as `gpufleet agent`)", "gpufleet-agent"};
  app.set_version_flag("--version", GPUFLEET_VERSION);
  gpufleet::cli::Globals globals;
  app.add_option("--ca-file", globals.ca_file,
                 "PEM CA bundle that an https:// controller is checked against (env "
                 "GPUFLEET_CA_FILE; default: the system's store)");
  app.add_flag("--insecure-skip-verify", globals.insecure_skip_verify,
               "https://: accept any certificate and host name (never the default)");
  gpufleet::app::AgentFlags agent;
  gpufleet::app::AddAgentFlags(&app, agent);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "error: %s\nRun with --help for more information.\n", e.what());
    return 2;
  }
  return gpufleet::app::RunAgent(agent, globals);
}
