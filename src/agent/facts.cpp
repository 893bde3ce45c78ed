#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
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

namespace {

std::string FirstLine(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line;
}

}  // namespace

std::vector<Nic> ReadNics(const std::string& sysfs_root) {
  std::vector<Nic> out;
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(sysfs_root) / "class" / "infiniband";
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    Nic n;
    n.name = entry.path().filename().string();
    n.fw_version = FirstLine(entry.path() / "fw_ver");
    n.board_id = FirstLine(entry.path() / "board_id");
    n.hca_type = FirstLine(entry.path() / "hca_type");
    out.push_back(std::move(n));
  }
  std::sort(out.begin(), out.end(), [](const Nic& a, const Nic& b) { return a.name < b.name; });
  return out;
}

bool DpkgStatusExists(const std::string& root) {
  std::error_code ec;
  return std::filesystem::is_regular_file(
      std::filesystem::path(root) / "var" / "lib" / "dpkg" / "status", ec);
}

std::map<std::string, std::string> ReadDpkgPackages(const std::string& root) {
  std::map<std::string, std::string> out;
  std::ifstream in(std::filesystem::path(root) / "var" / "lib" / "dpkg" / "status");
  std::string package, version, status;
  auto flush = [&] {
    const std::string_view installed = " installed";
    if (!package.empty() && !version.empty() && status.size() >= installed.size() &&
        status.compare(status.size() - installed.size(), installed.size(), installed) == 0) {
      out[package] = version;
    }
    package.clear();
    version.clear();
    status.clear();
  };
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {
      flush();
    } else if (line.rfind("Package: ", 0) == 0) {
      package = line.substr(9);
    } else if (line.rfind("Version: ", 0) == 0) {
      version = line.substr(9);
    } else if (line.rfind("Status: ", 0) == 0) {
      status = line.substr(8);
    }
  }
  flush();
  return out;
}

std::string UpstreamVersion(std::string_view v) {
  if (auto colon = v.find(':'); colon != std::string_view::npos) v.remove_prefix(colon + 1);
  if (auto dash = v.rfind('-'); dash != std::string_view::npos) v = v.substr(0, dash);
  return std::string(v);
}

std::string ContainerToolkitVersion(const std::map<std::string, std::string>& packages) {
  auto it = packages.find(std::string(kContainerToolkitPackage));
  return it == packages.end() ? std::string() : UpstreamVersion(it->second);
}

}  // namespace gpufleet
