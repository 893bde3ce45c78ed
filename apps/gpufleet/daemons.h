#pragma once
// The long-running subcommands: serve, agent, sim and up; and tls, which makes their files.

#include "common/result.h"

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
// Prints "error: MESSAGE" to stderr; returns the exit code 1.
int Fail(const Error& e);

}  // namespace gpufleet::app
