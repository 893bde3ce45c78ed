// Operator commands (remediations, provision programs): run through /bin/sh with a deadline, output
// captured.

#include "common/command.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace gpufleet {
namespace {

TEST(RunShellCommand, ExitCodeOutputAndDeadline) {
  auto ok = RunShellCommand("echo reset {index}; echo err >&2", 5000);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->exit_code, 0);
  EXPECT_EQ(ok->output, "reset {index}\nerr\n");
  auto failed = RunShellCommand("exit 3", 5000);
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->exit_code, 3);
  auto slow = RunShellCommand("sleep 30", 200);
  ASSERT_TRUE(slow.ok());
  EXPECT_TRUE(slow->timed_out);
  EXPECT_EQ(slow->exit_code, -1);
}

TEST(RunShellCommand, AddsAndReplacesEnvironment) {
  ::setenv("GPUFLEET_TEST_VAR", "old", 1);
  auto r = RunShellCommand("echo \"$GPUFLEET_POOL $GPUFLEET_TEST_VAR $PATH\"", 5000,
                           {{"GPUFLEET_POOL", "h100"}, {"GPUFLEET_TEST_VAR", "new"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->output, "h100 new " + std::string(::getenv("PATH")) + "\n");
}

TEST(ExpandCommand, IndexAndUuid) {
  EXPECT_EQ(ExpandCommand("nvidia-smi --gpu-reset -i {index} # {uuid} {index}", 3, "GPU-1"),
            "nvidia-smi --gpu-reset -i 3 # GPU-1 3");
}

}  // namespace
}  // namespace gpufleet
