// The agent's record of the node actions it answered: what a command asked again is answered
// with, across a restart (the file), and what it does with a damaged file.

#include "agent/action_record.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "tests/support/temp_dir.h"

namespace gpufleet::agent_internal {
namespace {

proto::CommandResult Answer(int64_t id, std::string action, bool ok, std::string message) {
  proto::CommandResult r;
  r.id = id;
  r.action = std::move(action);
  r.ok = ok;
  r.message = std::move(message);
  r.exit_code = ok ? 0 : 3;
  r.duration_ms = 4200;
  return r;
}

TEST(ActionRecord, AnAnswerIsFoundByItsIdAndActionAndSurvivesARestart) {
  const gpufleet::testing::TempDir dir("gf-answers");
  const std::string path = dir.path() + "/state/answers.jsonl";
  {
    ActionRecord record(path);
    EXPECT_EQ(record.size(), 0u) << "no file yet: empty";
    record.Add(Answer(41, "install-driver", true, "installed 580.95.05\nline two"));
    record.Add(Answer(42, "validate", false, "dcgmi diag: failed"));
    record.Add(Answer(41, "install-driver", false, "a second answer"));  // the first stands
    record.Add(Answer(0, "reboot", true, ""));                           // no id: not kept
    EXPECT_EQ(record.size(), 2u);
  }
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  ActionRecord again(path);  // the agent restarted
  ASSERT_EQ(again.size(), 2u);
  const auto* install = again.Find(41, "install-driver");
  ASSERT_NE(install, nullptr);
  EXPECT_TRUE(install->ok);
  EXPECT_EQ(install->message, "installed 580.95.05\nline two");
  EXPECT_EQ(install->exit_code, 0);
  EXPECT_EQ(install->duration_ms, 4200);
  const auto* validate = again.Find(42, "validate");
  ASSERT_NE(validate, nullptr);
  EXPECT_FALSE(validate->ok);
  EXPECT_EQ(validate->exit_code, 3);
  EXPECT_EQ(again.Find(41, "reboot"), nullptr) << "same id, another action: not this answer";
  EXPECT_EQ(again.Find(43, "install-driver"), nullptr);
  EXPECT_EQ(again.Find(0, "reboot"), nullptr);
}

TEST(ActionRecord, KeepsTheNewestAndSkipsWhatDoesNotDecode) {
  const gpufleet::testing::TempDir dir("gf-answers");
  const std::string path = dir.path() + "/answers.jsonl";
  {
    ActionRecord record(path);
    for (int64_t id = 1; id <= static_cast<int64_t>(ActionRecord::kKept) + 10; ++id) {
      record.Add(Answer(id, "reboot", true, "ok"));
    }
    EXPECT_EQ(record.size(), ActionRecord::kKept);
    EXPECT_EQ(record.Find(10, "reboot"), nullptr) << "the oldest are forgotten";
    EXPECT_NE(record.Find(11, "reboot"), nullptr);
  }
  std::ofstream(path, std::ios::app) << "not json\n{\"type\":\"heartbeat\"}\n";
  ActionRecord damaged(path);
  EXPECT_EQ(damaged.size(), ActionRecord::kKept);
  EXPECT_NE(damaged.Find(ActionRecord::kKept + 10, "reboot"), nullptr);
  ActionRecord memory("");  // no file: memory only
  memory.Add(Answer(7, "validate", true, "ok"));
  EXPECT_NE(memory.Find(7, "validate"), nullptr);
}

}  // namespace
}  // namespace gpufleet::agent_internal
