#include "common/crypto.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace gpufleet {
namespace {

TEST(SealSecret, OpensWithItsKeyOnlyAndNeverLooksTheSame) {
  const std::string key(64, '1'), other(64, '2');
  std::string a = SealSecret(key, "s3cret"), b = SealSecret(key, "s3cret");
  EXPECT_TRUE(IsSealed(a));
  EXPECT_NE(a, b);  // a fresh nonce each time
  EXPECT_EQ(a.find("s3cret"), std::string::npos);
  EXPECT_EQ(OpenSecret(key, a).value(), "s3cret");
  EXPECT_EQ(OpenSecret(key, SealSecret(key, "")).value(), "");
  auto wrong = OpenSecret(other, a);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("does not open with this secret.key"), std::string::npos);
  std::string altered = a;
  altered[altered.size() - 40] = altered[altered.size() - 40] == '0' ? '1' : '0';
  EXPECT_FALSE(OpenSecret(key, altered).ok());  // GCM's tag catches it
  EXPECT_FALSE(OpenSecret(key, "enc:v1:zz").ok());
  EXPECT_EQ(OpenSecret(key, "plain-from-before").value(), "plain-from-before");
}

TEST(LoadOrCreateKey, MakesAPrivateKeyOnceAndRefusesAnythingElse) {
  const gpufleet::testing::TempDir dir_tmp("gf-key");
  const std::filesystem::path dir = dir_tmp.path();
  std::string path = (dir / "secret.key").string();
  auto made = LoadOrCreateKey(path);
  ASSERT_TRUE(made.ok()) << made.error().message;
  EXPECT_EQ(made->size(), 64u);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(LoadOrCreateKey(path).value(), made.value());
  std::ofstream(path) << "not a key\n";
  auto bad = LoadOrCreateKey(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("is not a key"), std::string::npos);
}

}  // namespace
}  // namespace gpufleet
