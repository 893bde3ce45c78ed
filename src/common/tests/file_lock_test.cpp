#include "common/file_lock.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gpufleet {
namespace {

class FileLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gf-lock-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "controller.lock").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(FileLockTest, ASecondHolderIsRefusedWithTheFirstsPid) {
  auto first = FileLock::Take(path_);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_TRUE(first->held());
  auto second = FileLock::Take(path_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, ErrorCode::kConflict);
  EXPECT_EQ(second.error().message, path_ + " is in use by process " + std::to_string(::getpid()));
}

TEST_F(FileLockTest, ReleasedWhenDestroyedOrMoved) {
  {
    auto first = FileLock::Take(path_);
    ASSERT_TRUE(first.ok());
    FileLock moved = std::move(first.value());
    EXPECT_TRUE(moved.held());
    EXPECT_FALSE(first->held());
    EXPECT_FALSE(FileLock::Take(path_).ok());
  }
  EXPECT_TRUE(FileLock::Take(path_).ok());
}

// The kernel drops the lock of a process that dies, however it dies: nothing to clean up
// after a controller killed with -9.
TEST_F(FileLockTest, ADeadHoldersLockIsFree) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto held = FileLock::Take(path_);
    char c = held.ok() ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    ::pause();
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto refused = FileLock::Take(path_);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("process " + std::to_string(child)), std::string::npos)
      << refused.error().message;
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(FileLock::Take(path_).ok());
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_F(FileLockTest, AnUnwritablePlaceIsAnError) {
  auto r = FileLock::Take((dir_ / "missing" / "controller.lock").string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace gpufleet
