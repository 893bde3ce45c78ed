#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "api/api.h"
#include "api/context.h"
#include "common/crypto.h"

namespace gpufleet::api {
namespace {

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gf-auth-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    store_ = std::move(OpenStore("sqlite:" + (dir_ / "db").string()).value());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  std::unique_ptr<Store> store_;
  ManualClock clock_;
};

TEST_F(AuthTest, BootstrapWritesAnAdminTokenOnceWithMode0600) {
  std::string path = (dir_ / "admin.token").string();
  auto wrote = BootstrapAdminToken(*store_, clock_, path);
  ASSERT_TRUE(wrote.ok());
  EXPECT_TRUE(wrote.value());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  std::string secret;
  std::getline(std::ifstream(path), secret);
  auto who = Authenticate(*store_, clock_, "Bearer " + secret);
  ASSERT_TRUE(who.ok()) << who.error().message;
  EXPECT_EQ(who->role, Role::kAdmin);
  // Stored hashed: the secret itself is nowhere in the token table.
  for (const auto& t : store_->ListApiTokens().value()) {
    EXPECT_EQ(t.hash, Sha256Hex(secret));
    EXPECT_NE(t.hash, secret);
  }
  EXPECT_FALSE(BootstrapAdminToken(*store_, clock_, path).value());  // not again
}

TEST_F(AuthTest, RefusesMissingMalformedUnknownExpiredAndRevokedTokens) {
  ApiToken t;
  t.id = "tok-1";
  t.name = "viewer";
  t.role = Role::kViewer;
  t.hash = Sha256Hex("secret");
  t.expires_ms = clock_.NowMs() + 1000;
  ASSERT_TRUE(store_->CreateApiToken(t).ok());
  EXPECT_TRUE(Authenticate(*store_, clock_, "Bearer secret").ok());
  EXPECT_EQ(Authenticate(*store_, clock_, "").error().code, ErrorCode::kUnauthenticated);
  EXPECT_EQ(Authenticate(*store_, clock_, "Basic abc").error().code, ErrorCode::kUnauthenticated);
  EXPECT_EQ(Authenticate(*store_, clock_, "Bearer other").error().message, "invalid token");
  clock_.Advance(2000);
  EXPECT_EQ(Authenticate(*store_, clock_, "Bearer secret").error().message, "token has expired");
  ApiToken r = t;
  r.id = "tok-2";
  r.hash = Sha256Hex("secret2");
  r.expires_ms = 0;
  ASSERT_TRUE(store_->CreateApiToken(r).ok());
  ASSERT_TRUE(store_->RevokeApiToken("tok-2").ok());
  EXPECT_EQ(Authenticate(*store_, clock_, "Bearer secret2").error().message,
            "token has been revoked");
}

TEST(Paging, ParsesAndBoundsLimitAndOffset) {
  Request req;
  EXPECT_EQ(ParsePage(req)->limit, 500u);
  req.query["limit"] = "10";
  req.query["offset"] = "20";
  EXPECT_EQ(ParsePage(req)->limit, 10u);
  EXPECT_EQ(ParsePage(req)->offset, 20u);
  req.query["limit"] = "-1";
  EXPECT_EQ(ParsePage(req).error().code, ErrorCode::kInvalidArgument);
  req.query["limit"] = "999999";
  EXPECT_EQ(ParsePage(req).error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpufleet::api
