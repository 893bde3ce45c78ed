#pragma once
// `gpufleet store ...`: commands on the controller's database itself.

namespace CLI {
class App;
}

namespace gpufleet::cli {
struct Globals;
}

namespace gpufleet::app {

void AddStoreCommands(CLI::App& app, cli::Globals& globals);

}  // namespace gpufleet::app
