#pragma once
// The long-running subcommands: serve, agent, sim and up.

namespace CLI {
class App;
}

namespace gpufleet::cli {
struct Globals;
}

namespace gpufleet::app {

void AddDaemonCommands(CLI::App& app, cli::Globals& globals);

}  // namespace gpufleet::app
