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

// How Run keeps what the program prints.
struct Capture {
  bool keep_tail = false;  // the last bytes of the output instead of the first
  size_t max_output = kMaxOutput;
  bool split_stderr = false;                  // stderr apart, its last kMaxOutput bytes in `errors`
  const std::atomic<bool>* cancel = nullptr;  // set: killed as at the deadline
};

// Appends `n` bytes to `to`, keeping at most `max`: the first ones, or the last when `tail`.
void Keep(std::string& to, const char* data, size_t n, size_t max, bool tail, bool& cut) {
  if (tail) {
    to.append(data, n);
    if (to.size() > max) {
      to.erase(0, to.size() - max);
      cut = true;
    }
  } else if (to.size() < max) {
    cut = cut || n > max - to.size();
    to.append(data, std::min(n, max - to.size()));
  } else {
    cut = true;
  }
}

// Runs `file` with `argv` (argv[0] first), capturing what it prints as `capture` says.
Result<CommandOutcome> Run(const std::string& file, const std::vector<std::string>& argv_in,
                           int timeout_ms,
                           const std::vector<std::pair<std::string, std::string>>& env,
                           Capture capture) {
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
  int out_fds[2], err_fds[2] = {-1, -1};
  if (::pipe(out_fds) != 0) {
    return MakeError(ErrorCode::kInternal, std::string("pipe: ") + std::strerror(errno));
  }
  if (capture.split_stderr && ::pipe(err_fds) != 0) {
    ::close(out_fds[0]);
    ::close(out_fds[1]);
    return MakeError(ErrorCode::kInternal, std::string("pipe: ") + std::strerror(errno));
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {out_fds[0], out_fds[1], err_fds[0], err_fds[1]}) {
      if (fd >= 0) ::close(fd);
    }
    return MakeError(ErrorCode::kInternal, std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(out_fds[1], 1);
    ::dup2(capture.split_stderr ? err_fds[1] : out_fds[1], 2);
    for (int fd : {out_fds[0], out_fds[1], err_fds[0], err_fds[1]}) {
      if (fd >= 0) ::close(fd);
    }
    ::execve(file.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out_fds[1]);
  if (err_fds[1] >= 0) ::close(err_fds[1]);
  CommandOutcome out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<char> buf(65536);
  pollfd fds[2] = {{out_fds[0], POLLIN, 0}, {err_fds[0], POLLIN, 0}};
  int open = capture.split_stderr ? 2 : 1;
  while (open > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0 || (capture.cancel && capture.cancel->load())) {
      out.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    const int64_t wait = std::min<int64_t>(left, capture.cancel ? 100 : 1000);
    int r = ::poll(fds, capture.split_stderr ? 2 : 1, static_cast<int>(wait));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fds[i].fd, buf.data(), buf.size());
      if (n <= 0) {  // closed: the command is ending
        fds[i].fd = -1;
        --open;
        continue;
      }
      bool ignored = false;
      if (i == 0) {
        Keep(out.output, buf.data(), static_cast<size_t>(n), capture.max_output, capture.keep_tail,
             out.truncated);
      } else {
        Keep(out.errors, buf.data(), static_cast<size_t>(n), kMaxOutput, true, ignored);
      }
    }
  }
  ::close(out_fds[0]);
  if (err_fds[0] >= 0) ::close(err_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!out.timed_out && WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  return out;
}

// kNotFound when `path` is not an executable file.
Status CheckExecutable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return MakeError(ErrorCode::kNotFound, path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) {
    return MakeError(ErrorCode::kNotFound, path + ": not an executable file");
  }
  return {};
}

}  // namespace

Result<CommandOutcome> RunShellCommand(
    const std::string& command, int timeout_ms,
    const std::vector<std::pair<std::string, std::string>>& env) {
  return Run("/bin/sh", {"sh", "-c", command}, timeout_ms, env, {});
}

Result<CommandOutcome> RunProgram(const std::string& path, const std::vector<std::string>& args,
                                  int timeout_ms) {
  GF_TRY(CheckExecutable(path));
  std::vector<std::string> argv{path};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(path, argv, timeout_ms, {}, {.keep_tail = true});
}

Result<CommandOutcome> RunProgramOutput(const std::string& path,
                                        const std::vector<std::string>& args, int timeout_ms,
                                        const std::vector<std::pair<std::string, std::string>>& env,
                                        size_t max_output, const std::atomic<bool>* cancel) {
  GF_TRY(CheckExecutable(path));
  std::vector<std::string> argv{path};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(path, argv, timeout_ms, env,
             {.max_output = max_output, .split_stderr = true, .cancel = cancel});
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
