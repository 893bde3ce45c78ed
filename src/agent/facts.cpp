#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
    // ports/N/pkeys/I: the partition key table; 0x0000 entries are empty slots.
    for (const auto& port : std::filesystem::directory_iterator(entry.path() / "ports", ec)) {
      int number = std::atoi(port.path().filename().c_str());
      if (number <= 0) continue;
      std::vector<std::string> keys;
      bool readable = false;
      for (const auto& slot : std::filesystem::directory_iterator(port.path() / "pkeys", ec)) {
        std::string key = FirstLine(slot.path());
        readable |= !key.empty();
        if (!key.empty() && std::strtoul(key.c_str(), nullptr, 16) != 0) keys.push_back(key);
      }
      if (!readable) continue;
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
      n.pkeys[number] = std::move(keys);
    }
    out.push_back(std::move(n));
  }
  std::sort(out.begin(), out.end(), [](const Nic& a, const Nic& b) { return a.name < b.name; });
  return out;
}

std::string ReadImageId(const std::string& root) {
  const std::filesystem::path r(root);
  std::string id = FirstLine(r / "etc" / "gpufleet" / "image-id");
  if (!id.empty()) return id;
  std::string image, version;
  std::ifstream os(r / "etc" / "os-release");
  auto value = [](const std::string& line, size_t from) {
    std::string v = line.substr(from);
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'')) v = v.substr(1, v.size() - 2);
    return v;
  };
  for (std::string line; std::getline(os, line);) {
    if (line.rfind("IMAGE_ID=", 0) == 0) image = value(line, 9);
    if (line.rfind("IMAGE_VERSION=", 0) == 0) version = value(line, 14);
  }
  if (image.empty()) return "";
  return version.empty() ? image : image + ":" + version;
}

std::optional<std::vector<DeviceFile>> ReadDeviceFiles(const std::string& root) {
  const std::filesystem::path dev = std::filesystem::path(root) / "dev";
  std::error_code ec;
  std::filesystem::directory_iterator it(dev, ec);
  if (ec) return std::nullopt;
  // Group names from the root's /etc/group, so a fixture tree names its own.
  std::map<unsigned, std::string> groups;
  std::ifstream group_file(std::filesystem::path(root) / "etc" / "group");
  for (std::string line; std::getline(group_file, line);) {
    size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1),
           c = b == std::string::npos ? b : line.find(':', b + 1);
    if (c == std::string::npos) continue;
    groups[static_cast<unsigned>(std::strtoul(line.c_str() + b + 1, nullptr, 10))] =
        line.substr(0, a);
  }
  std::vector<DeviceFile> out;
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("nvidia", 0) != 0) continue;
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    auto g = groups.find(st.st_gid);
    out.push_back(
        {"/dev/" + name, mode, g != groups.end() ? g->second : std::to_string(st.st_gid)});
  }
  std::sort(out.begin(), out.end(),
            [](const DeviceFile& a, const DeviceFile& b) { return a.path < b.path; });
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

namespace {

// A file's path, size and modification time as text; empty when it is not a regular file.
std::string Stamp(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  return path.string() + ' ' + std::to_string(st.st_size) + ' ' +
         std::to_string(st.st_mtim.tv_sec) + '.' + std::to_string(st.st_mtim.tv_nsec);
}

uint32_t BigEndian32(const unsigned char* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

// An rpm header blob (as rpmdb.sqlite's Packages table keeps it: the index count and data
// length, big-endian, then 16-byte entries {tag, type, offset, count} and the data): the
// package's name and "[EPOCH:]VERSION-RELEASE". Empty name when the blob is not a header.
std::pair<std::string, std::string> RpmHeader(const unsigned char* blob, size_t size) {
  constexpr uint32_t kName = 1000, kVersion = 1001, kRelease = 1002, kEpoch = 1003;
  constexpr uint32_t kInt32 = 4, kString = 6;
  if (size < 8) return {};
  const uint32_t entries = BigEndian32(blob), data_size = BigEndian32(blob + 4);
  const size_t data_at = 8 + size_t{entries} * 16;
  if (entries > 100000 || data_at + data_size > size) return {};
  const unsigned char* data = blob + data_at;
  std::string name, version, release, epoch;
  for (uint32_t i = 0; i < entries; ++i) {
    const unsigned char* e = blob + 8 + size_t{i} * 16;
    const uint32_t tag = BigEndian32(e), type = BigEndian32(e + 4), offset = BigEndian32(e + 8);
    if (offset >= data_size) continue;
    if (type == kString && (tag == kName || tag == kVersion || tag == kRelease)) {
      const char* text = reinterpret_cast<const char*>(data + offset);
      std::string value(text, strnlen(text, data_size - offset));
      (tag == kName ? name : tag == kVersion ? version : release) = std::move(value);
    } else if (type == kInt32 && tag == kEpoch && offset + 4 <= data_size) {
      epoch = std::to_string(BigEndian32(data + offset));
    }
  }
  if (name.empty() || version.empty()) return {};
  return {name,
          (epoch.empty() ? "" : epoch + ":") + version + (release.empty() ? "" : "-" + release)};
}

}  // namespace

std::optional<std::map<std::string, std::string>> ReadRpmPackages(const std::string& root) {
  const auto path = std::filesystem::path(root) / "var" / "lib" / "rpm" / "rpmdb.sqlite";
  if (Stamp(path).empty()) return std::nullopt;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return std::nullopt;
  }
  std::optional<std::map<std::string, std::string>> out;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT blob FROM Packages", -1, &st, nullptr) == SQLITE_OK) {
    out.emplace();
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      auto [name, version] =
          RpmHeader(static_cast<const unsigned char*>(sqlite3_column_blob(st, 0)),
                    static_cast<size_t>(sqlite3_column_bytes(st, 0)));
      if (!name.empty()) (*out)[name] = version;
    }
    if (rc != SQLITE_DONE) out.reset();  // a database it could not read through: unknown
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

std::optional<std::map<std::string, std::string>> PackageDatabase::Read() {
  const auto dpkg = std::filesystem::path(root_) / "var" / "lib" / "dpkg" / "status";
  const auto rpm = std::filesystem::path(root_) / "var" / "lib" / "rpm" / "rpmdb.sqlite";
  std::string stamp = Stamp(dpkg);
  const bool is_dpkg = !stamp.empty();
  // An rpm database in WAL mode takes its changes in the -wal file first.
  if (!is_dpkg) stamp = Stamp(rpm) + '|' + Stamp(rpm.string() + "-wal");
  if (stamp == "|") {  // neither database
    stamp_.clear();
    packages_.reset();
  } else if (stamp != stamp_) {
    packages_ = is_dpkg ? std::optional(ReadDpkgPackages(root_)) : ReadRpmPackages(root_);
    stamp_ = std::move(stamp);
    ++parses_;
  }
  return packages_;
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
