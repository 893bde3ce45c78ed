#pragma once
// The long-running subcommands: serve, agent, sim and up; and tls, which makes their files.

#include "apps/gpufleet/process.h"  // Fail

namespace CLI {
class App;
}

namespace gpufleet::cli {
struct Globals;
}

namespace gpufleet::app {

void AddDaemonCommands(CLI::App& app, cli::Globals& globals);
// tls init|issue (tls_commands.cpp)
void AddTlsCommands(CLI::App& app, cli::Globals& globals);

}  // namespace gpufleet::app
