#include "common/command.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>

extern char** environ;

namespace gpufleet {

namespace {

constexpr size_t kMaxOutput = 4096;

// Runs `file` with `argv` (argv[0] first), capturing at most kMaxOutput bytes of what it
// prints: the first ones, or the last ones when `keep_tail`.
Result<CommandOutcome> Run(const std::string& file, const std::vector<std::string>& argv_in,
                           int timeout_ms,
                           const std::vector<std::pair<std::string, std::string>>& env,
                           bool keep_tail) {
  // The child's environment is built before the fork: a forked child of a threaded process may
  // only make async-signal-safe calls.
  std::vector<std::string> vars;
  for (char** e = environ; *e; ++e) {
    std::string_view v(*e);
    bool replaced = false;
    for (const auto& [name, value] : env) {
      replaced = replaced || (v.size() > name.size() && v.substr(0, name.size()) == name &&
                              v[name.size()] == '=');
    }
    if (!replaced) vars.emplace_back(v);
  }
  for (const auto& [name, value] : env) vars.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv_in;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (::pipe(fds) != 0) {
    return MakeError(ErrorCode::kInternal, std::string("pipe: ") + std::strerror(errno));
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return MakeError(ErrorCode::kInternal, std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execve(file.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  CommandOutcome out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[1024];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      out.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;  // the command closed its output: it is ending
    if (keep_tail) {
      out.output.append(buf, static_cast<size_t>(n));
      if (out.output.size() > kMaxOutput) out.output.erase(0, out.output.size() - kMaxOutput);
    } else if (out.output.size() < kMaxOutput) {
      out.output.append(buf,
                        static_cast<size_t>(std::min<ssize_t>(n, kMaxOutput - out.output.size())));
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!out.timed_out && WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  return out;
}

}  // namespace

Result<CommandOutcome> RunShellCommand(
    const std::string& command, int timeout_ms,
    const std::vector<std::pair<std::string, std::string>>& env) {
  return Run("/bin/sh", {"sh", "-c", command}, timeout_ms, env, false);
}

Result<CommandOutcome> RunProgram(const std::string& path, const std::vector<std::string>& args,
                                  int timeout_ms) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return MakeError(ErrorCode::kNotFound, path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) {
    return MakeError(ErrorCode::kNotFound, path + ": not an executable file");
  }
  std::vector<std::string> argv{path};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(path, argv, timeout_ms, {}, true);
}

std::string ExpandCommand(std::string tmpl, int index, const std::string& uuid) {
  for (auto [key, value] : {std::pair<std::string, std::string>{"{index}", std::to_string(index)},
                            std::pair<std::string, std::string>{"{uuid}", uuid}}) {
    for (size_t at = tmpl.find(key); at != std::string::npos; at = tmpl.find(key, at)) {
      tmpl.replace(at, key.size(), value);
      at += value.size();
    }
  }
  return tmpl;
}

}  // namespace gpufleet
