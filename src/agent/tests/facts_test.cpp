// What the agent reads about its host beside the GPUs: NIC firmware from a sysfs tree.

#include <gtest/gtest.h>

#include <map>

#include "agent/gpu_backend.h"

namespace gpufleet {
namespace {

TEST(Facts, NicsAreReadFromTheSysfsTreeWithUnreadableFilesLeftEmpty) {
  auto nics = ReadNics(std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/sysfs");
  ASSERT_EQ(nics.size(), 2u);
  EXPECT_EQ(nics[0], (Nic{"mlx5_0", "28.41.1000", "MT_0000000834", "MT4129"}));
  EXPECT_EQ(nics[1], (Nic{"mlx5_1", "28.39.1002", "", "MT4129"}));
  EXPECT_TRUE(ReadNics("/nonexistent").empty());
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
  EXPECT_EQ(UpstreamVersion("1.17.3-1"), "1.17.3");
  EXPECT_EQ(UpstreamVersion("1:2.36-9+deb12u14"), "2.36");
  EXPECT_EQ(UpstreamVersion("580.159.03"), "580.159.03");
}

}  // namespace
}  // namespace gpufleet
