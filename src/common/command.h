#pragma once
// Runs an operator-configured shell command (a remediation: reset a GPU, reboot; a pool's
// provision and deprovision programs) with a deadline, capturing what it prints.

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace gpufleet {

struct CommandOutcome {
  int exit_code = -1;  // -1: killed at the deadline or by a signal
  std::string output;  // stdout and stderr, at most 4 KiB
  bool timed_out = false;
  std::string errors;      // RunProgramOutput: stderr's last 4 KiB
  bool truncated = false;  // RunProgramOutput: stdout was longer than max_output
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

// `path` run directly (no shell), as RunProgram, with `env` added to the controller's
// environment, its whole stdout in `output` (up to `max_output` bytes; `truncated` says when it
// printed more) and its stderr's last 4 KiB in `errors`: a client whose output is a document.
// `cancel`, when given and set while it runs, kills it as the deadline would (a stopping
// controller does not wait for a client of a server that does not answer).
Result<CommandOutcome> RunProgramOutput(const std::string& path,
                                        const std::vector<std::string>& args, int timeout_ms,
                                        const std::vector<std::pair<std::string, std::string>>& env,
                                        size_t max_output,
                                        const std::atomic<bool>* cancel = nullptr);

// "{index}" and "{uuid}" in `tmpl` replaced.
std::string ExpandCommand(std::string tmpl, int index, const std::string& uuid);

}  // namespace gpufleet
