// What the agent reads about its host beside the GPUs: NIC firmware from a sysfs tree.

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gpufleet
