#pragma once
// Runs an operator-configured shell command (a remediation: reset a GPU, reboot; a pool's
// provision and deprovision programs) with a deadline, capturing what it prints.

#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace gpufleet {

struct CommandOutcome {
  int exit_code = -1;  // -1: killed at the deadline or by a signal
  std::string output;  // stdout and stderr, at most 4 KiB
  bool timed_out = false;
};

// `/bin/sh -c command` in its own process group, with the controller's environment plus `env`
// (NAME, value pairs); at the deadline the group is killed.
Result<CommandOutcome> RunShellCommand(
    const std::string& command, int timeout_ms,
    const std::vector<std::pair<std::string, std::string>>& env = {});

// `path` run directly (no shell) with `args` as its arguments, in its own process group, with
// a deadline; `output` keeps the last 4 KiB it printed (where a diagnostic's verdict is).
// kNotFound when `path` is not an executable file.
Result<CommandOutcome> RunProgram(const std::string& path, const std::vector<std::string>& args,
                                  int timeout_ms);

// "{index}" and "{uuid}" in `tmpl` replaced.
std::string ExpandCommand(std::string tmpl, int index, const std::string& uuid);

}  // namespace gpufleet
