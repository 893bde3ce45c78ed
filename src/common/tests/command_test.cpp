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

// An agent's action programs: run without a shell (an argument with spaces or ';' stays one
// argument), the end of a long output kept, a missing or non-executable program refused.
TEST(RunProgram, PassesArgumentsAsTheyAreAndKeepsTheEndOfTheOutput) {
  auto echo = RunProgram("/bin/echo", {"580.95.05", "a b; rm -rf /"}, 5000);
  ASSERT_TRUE(echo.ok()) << echo.error().message;
  EXPECT_EQ(echo->exit_code, 0);
  EXPECT_EQ(echo->output, "580.95.05 a b; rm -rf /\n");
  auto longer = RunProgram("/bin/sh", {"-c", "seq 1 5000; exit 4"}, 5000);
  ASSERT_TRUE(longer.ok());
  EXPECT_EQ(longer->exit_code, 4);
  EXPECT_EQ(longer->output.size(), 4096u);
  EXPECT_EQ(longer->output.substr(longer->output.size() - 5), "5000\n");
  auto slow = RunProgram("/bin/sleep", {"30"}, 200);
  ASSERT_TRUE(slow.ok());
  EXPECT_TRUE(slow->timed_out);
  auto missing = RunProgram("/nonexistent/install-driver", {}, 1000);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("/nonexistent/install-driver"), std::string::npos);
  auto dir = RunProgram("/tmp", {}, 1000);
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.error().message.find("not an executable file"), std::string::npos);
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

// A client whose output is a document (squeue --json): stdout whole and apart from stderr, the
// environment given, a longer output than allowed said so.
TEST(RunProgramOutput, KeepsStdoutWholeAndApartFromStderr) {
  auto both = RunProgramOutput("/bin/sh", {"-c", "seq 1 20000; echo warn >&2; echo $GF_X"}, 5000,
                               {{"GF_X", "given"}}, 1 << 20);
  ASSERT_TRUE(both.ok()) << both.error().message;
  EXPECT_EQ(both->exit_code, 0);
  EXPECT_FALSE(both->truncated);
  EXPECT_EQ(both->output.substr(0, 4), "1\n2\n");
  EXPECT_EQ(both->output.substr(both->output.size() - 12), "20000\ngiven\n");
  EXPECT_EQ(both->errors, "warn\n");
  auto cut = RunProgramOutput("/bin/sh", {"-c", "seq 1 20000"}, 5000, {}, 100);
  ASSERT_TRUE(cut.ok());
  EXPECT_TRUE(cut->truncated);
  EXPECT_EQ(cut->output.size(), 100u);
  auto slow = RunProgramOutput("/bin/sleep", {"30"}, 200, {}, 100);
  ASSERT_TRUE(slow.ok());
  EXPECT_TRUE(slow->timed_out);
  EXPECT_FALSE(RunProgramOutput("/nonexistent/squeue", {}, 1000, {}, 100).ok());
}

}  // namespace
}  // namespace gpufleet
