// What the agent reads about its host beside the GPUs: NIC firmware from a sysfs tree.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "agent/gpu_backend.h"
#include "tests/support/temp_dir.h"

namespace gpufleet {
namespace {

TEST(Facts, NicsAreReadFromTheSysfsTreeWithUnreadableFilesLeftEmpty) {
  auto nics = ReadNics(std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/sysfs");
  ASSERT_EQ(nics.size(), 2u);
  EXPECT_EQ(nics[0], (Nic{"mlx5_0",
                          "28.41.1000",
                          "MT_0000000834",
                          "MT4129",
                          {{1, {"0x8001", "0xffff"}}}}));  // empty slots (0x0000) left out
  EXPECT_EQ(nics[1], (Nic{"mlx5_1", "28.39.1002", "", "MT4129", {}}));  // no ports: unknown
  EXPECT_TRUE(ReadNics("/nonexistent").empty());
}

TEST(Facts, TheImageIdIsTheBuildersFileElseOsRelease) {
  EXPECT_EQ(ReadImageId(std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/root"),
            "dgx-os-7.1-gpu-node:2026.10.2");
  EXPECT_EQ(ReadImageId(std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/os-release-only"),
            "gpu-base:42");
  EXPECT_EQ(ReadImageId("/nonexistent"), "");  // unknown
}

TEST(Facts, DeviceFilesAreReadWithTheirModeAndGroupUnderTheRoot) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(::testing::TempDir()) / "devroot";
  fs::remove_all(root);
  fs::create_directories(root / "dev" / "nvidia-caps");  // a directory: not a device file
  fs::create_directories(root / "etc");
  std::ofstream(root / "etc" / "group") << "root:x:0:\nvideo:x:44:\n";
  for (const char* name : {"nvidia0", "nvidiactl", "tty0"}) std::ofstream(root / "dev" / name);
  ASSERT_EQ(chmod((root / "dev" / "nvidia0").c_str(), 0666), 0);
  ASSERT_EQ(chmod((root / "dev" / "nvidiactl").c_str(), 0660), 0);
  auto files = ReadDeviceFiles(root.string());
  ASSERT_TRUE(files.has_value());
  ASSERT_EQ(files->size(), 2u);  // not tty0, not the directory
  EXPECT_EQ(files->at(0).path, "/dev/nvidia0");
  EXPECT_EQ(files->at(0).mode, "0666");
  EXPECT_EQ(files->at(1).path, "/dev/nvidiactl");
  EXPECT_EQ(files->at(1).mode, "0660");
  // The group by name from the root's /etc/group (the test's own gid when it is not there).
  const std::string group = files->at(0).group;
  EXPECT_TRUE(group == "root" || group == "video" || group == std::to_string(getgid())) << group;
  EXPECT_FALSE(ReadDeviceFiles("/nonexistent").has_value());  // unknown, not "none"
}

// tests/fixtures/rpmroot/var/lib/rpm/rpmdb.sqlite was written by rpm 4.18 itself (Debian's
// rpm package: rpmbuild of three empty noarch packages, then rpm --root R --dbpath
// /var/lib/rpm -i --justdb with the sqlite backend), so the headers are rpm's own.
TEST(Facts, InstalledPackagesAreReadFromTheRpmDatabaseUnderTheRoot) {
  const std::string root = std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/rpmroot";
  auto pkgs = ReadRpmPackages(root);
  ASSERT_TRUE(pkgs.has_value());
  EXPECT_EQ(*pkgs, (std::map<std::string, std::string>{{"nvidia-container-toolkit", "1.17.8-1"},
                                                       {"nvidia-driver", "3:580.95.05-1.el9"},
                                                       {"xmrig", "6.21.0-2"}}));
  EXPECT_EQ(ContainerToolkitVersion(*pkgs), "1.17.8");
  EXPECT_FALSE(ReadRpmPackages("/nonexistent").has_value());  // unknown, not empty
  // The agent's reader: no dpkg status there, so the rpm database.
  PackageDatabase db(root);
  EXPECT_EQ(db.Read(), pkgs);
  EXPECT_EQ(db.Read(), pkgs);
  EXPECT_EQ(db.parses(), 1);
  EXPECT_FALSE(PackageDatabase("/nonexistent").Read().has_value());
  // A file that is not a database is unknown too.
  const gpufleet::testing::TempDir dir_tmp("gf-rpm");
  const std::filesystem::path dir = dir_tmp.path();
  std::filesystem::create_directories(dir / "var/lib/rpm");
  std::ofstream(dir / "var/lib/rpm/rpmdb.sqlite") << "not a database";
  EXPECT_FALSE(ReadRpmPackages(dir.string()).has_value());
}

TEST(Facts, InstalledPackagesAreReadFromTheDpkgStatusFileUnderTheRoot) {
  auto pkgs = ReadDpkgPackages(std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/root");
  EXPECT_EQ(pkgs, (std::map<std::string, std::string>{{"libc6", "2.36-9+deb12u14"},
                                                      {"nvidia-container-toolkit", "1.17.3-1"},
                                                      {"nvidia-driver", "580.159.03-1"}}));
  // Removed packages (config-files only) are not installed; a root without dpkg has none.
  EXPECT_FALSE(pkgs.count("telnet"));
  EXPECT_TRUE(ReadDpkgPackages("/nonexistent").empty());
  // Whether there is a package database at all: without one the list is unknown, not empty.
  EXPECT_TRUE(DpkgStatusExists(std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/root"));
  EXPECT_FALSE(DpkgStatusExists("/nonexistent"));
  // The agent's reader parses the file again only when it changed.
  const gpufleet::testing::TempDir dir_tmp("gf-dpkg");
  const std::filesystem::path dir = dir_tmp.path();
  std::filesystem::create_directories(dir / "var/lib/dpkg");
  PackageDatabase cached(dir.string());
  EXPECT_FALSE(cached.Read().has_value());  // no status file: unknown
  std::filesystem::copy_file(
      std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/root/var/lib/dpkg/status",
      dir / "var/lib/dpkg/status");
  EXPECT_EQ(cached.Read(), pkgs);
  EXPECT_EQ(cached.Read(), pkgs);
  EXPECT_EQ(cached.parses(), 1);
  std::ofstream(dir / "var/lib/dpkg/status", std::ios::app)
      << "\nPackage: xmrig\nStatus: install ok installed\nVersion: 6.21.0-1\n";
  EXPECT_EQ(cached.Read()->at("xmrig"), "6.21.0-1");
  EXPECT_EQ(cached.parses(), 2);
  EXPECT_EQ(cached.Read()->size(), 4u);
  EXPECT_EQ(cached.parses(), 2);
  EXPECT_EQ(UpstreamVersion("1.17.3-1"), "1.17.3");
  EXPECT_EQ(UpstreamVersion("1:2.36-9+deb12u14"), "2.36");
  EXPECT_EQ(UpstreamVersion("580.159.03"), "580.159.03");
}

}  // namespace
}  // namespace gpufleet
