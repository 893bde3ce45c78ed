#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "agent/gpu_backend.h"

namespace gpufleet {

NodeFacts HostFacts() {
  NodeFacts f;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) f.hostname = host;
  utsname u{};
  if (uname(&u) == 0) f.kernel = std::string(u.release);
  std::ifstream os("/etc/os-release");
  for (std::string line; std::getline(os, line);) {
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      f.os = line.substr(12);
      if (f.os.size() >= 2 && f.os.front() == '"') f.os = f.os.substr(1, f.os.size() - 2);
    }
  }
  f.agent_version = GPUFLEET_VERSION;
  return f;
}

}  // namespace gpufleet
