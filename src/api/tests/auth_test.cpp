#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "api/api.h"
#include "api/context.h"
#include "common/crypto.h"
#include "tests/support/temp_dir.h"

namespace gpufleet::api {
namespace {

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override { store_ = store::Open("sqlite:" + (dir_ / "db").string()).value(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  testing::TempDir tmp_{"gf-auth"};  // removed with everything in it after the test
  std::filesystem::path dir_ = tmp_.path();
  store::Stores store_;
  ManualClock clock_;
};

TEST_F(AuthTest, BootstrapWritesAnAdminTokenOnceWithMode0600) {
  std::string path = (dir_ / "admin.token").string();
  auto wrote = BootstrapAdminToken(*store_.tokens, clock_, path);
  ASSERT_TRUE(wrote.ok());
  EXPECT_TRUE(wrote.value());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  std::string secret;
  std::getline(std::ifstream(path), secret);
  auto who = Authenticate(*store_.tokens, clock_, "Bearer " + secret);
  ASSERT_TRUE(who.ok()) << who.error().message;
  EXPECT_EQ(who->role, Role::kAdmin);
  // Stored hashed: the secret itself is nowhere in the token table.
  for (const auto& t : store_.tokens->ListApiTokens().value()) {
    EXPECT_EQ(t.hash, Sha256Hex(secret));
    EXPECT_NE(t.hash, secret);
  }
  EXPECT_FALSE(BootstrapAdminToken(*store_.tokens, clock_, path).value());  // not again
}

TEST_F(AuthTest, RefusesMissingMalformedUnknownExpiredAndRevokedTokens) {
  ApiToken t;
  t.id = "tok-1";
  t.name = "viewer";
  t.role = Role::kViewer;
  t.hash = Sha256Hex("secret");
  t.expires_ms = clock_.NowMs() + 1000;
  ASSERT_TRUE(store_.tokens->CreateApiToken(t).ok());
  EXPECT_TRUE(Authenticate(*store_.tokens, clock_, "Bearer secret").ok());
  EXPECT_EQ(Authenticate(*store_.tokens, clock_, "").error().code, ErrorCode::kUnauthenticated);
  EXPECT_EQ(Authenticate(*store_.tokens, clock_, "Basic abc").error().code,
            ErrorCode::kUnauthenticated);
  EXPECT_EQ(Authenticate(*store_.tokens, clock_, "Bearer other").error().message, "invalid token");
  clock_.Advance(2000);
  EXPECT_EQ(Authenticate(*store_.tokens, clock_, "Bearer secret").error().message,
            "token has expired");
  ApiToken r = t;
  r.id = "tok-2";
  r.hash = Sha256Hex("secret2");
  r.expires_ms = 0;
  ASSERT_TRUE(store_.tokens->CreateApiToken(r).ok());
  ASSERT_TRUE(store_.tokens->RevokeApiToken("tok-2").ok());
  EXPECT_EQ(Authenticate(*store_.tokens, clock_, "Bearer secret2").error().message,
            "token has been revoked");
}

// The SQLite store's tokens behind a switch that makes the database unavailable.
class SwitchedTokens : public store::TokenStore {
 public:
  explicit SwitchedTokens(store::TokenStore& real) : real_(real) {}
  bool down = false;
  Status CreateJoinToken(const JoinToken& t) override { return real_.CreateJoinToken(t); }
  Result<std::vector<JoinToken>> ListJoinTokens() override { return real_.ListJoinTokens(); }
  Result<JoinToken> FindJoinToken(const std::string& h) override { return real_.FindJoinToken(h); }
  Status RevokeJoinToken(const std::string& id) override { return real_.RevokeJoinToken(id); }
  Status CreateApiToken(const ApiToken& t) override { return real_.CreateApiToken(t); }
  Result<std::vector<ApiToken>> ListApiTokens() override { return real_.ListApiTokens(); }
  Result<ApiToken> FindApiToken(const std::string& hash) override {
    if (down) return MakeError(ErrorCode::kUnavailable, "store: the database is away");
    return real_.FindApiToken(hash);
  }
  Status RevokeApiToken(const std::string& id) override { return real_.RevokeApiToken(id); }
  Status RotateApiToken(const std::string& id, const std::string& hash, const std::string& prefix,
                        int64_t until) override {
    return real_.RotateApiToken(id, hash, prefix, until);
  }
  Status TouchApiTokens(const std::map<std::string, int64_t>& used) override {
    ++touches;
    if (down) return MakeError(ErrorCode::kUnavailable, "store: the database is away");
    return real_.TouchApiTokens(used);
  }
  int touches = 0;

 private:
  store::TokenStore& real_;
};

TEST_F(AuthTest, RotationKeepsTheOldSecretForTheGraceOnlyAndLastUseIsWrittenInBatches) {
  SwitchedTokens tokens(*store_.tokens);
  Authenticator auth(tokens, clock_);
  ApiToken t;
  t.id = "tok-r";
  t.name = "ci";
  t.role = Role::kOperator;
  t.hash = Sha256Hex("old-secret");
  t.prefix = SecretPrefix("old-secret");
  ASSERT_TRUE(tokens.CreateApiToken(t).ok());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(auth.Check("Bearer old-secret").ok());
  EXPECT_EQ(tokens.touches, 0);  // no write per request
  EXPECT_EQ(tokens.ListApiTokens()->at(0).last_used_ms, 0);
  ASSERT_TRUE(auth.FlushUse().ok());
  EXPECT_EQ(tokens.touches, 1);
  EXPECT_EQ(tokens.ListApiTokens()->at(0).last_used_ms, clock_.NowMs());
  EXPECT_EQ(tokens.ListApiTokens()->at(0).prefix, "old-secr");
  // A failed write keeps the times for the next flush.
  clock_.Advance(1000);
  ASSERT_TRUE(auth.Check("Bearer old-secret").ok());
  tokens.down = true;
  EXPECT_FALSE(auth.FlushUse().ok());
  tokens.down = false;
  ASSERT_TRUE(auth.FlushUse().ok());
  EXPECT_EQ(tokens.ListApiTokens()->at(0).last_used_ms, clock_.NowMs());

  // Rotated with a minute's grace: both secrets work, then only the new one.
  ASSERT_TRUE(tokens
                  .RotateApiToken("tok-r", Sha256Hex("new-secret"), SecretPrefix("new-secret"),
                                  clock_.NowMs() + 60'000)
                  .ok());
  EXPECT_EQ(auth.Check("Bearer new-secret")->name, "ci");
  EXPECT_EQ(auth.Check("Bearer old-secret")->name, "ci");
  clock_.Advance(60'001);
  EXPECT_EQ(auth.Check("Bearer old-secret").error().message,
            "token 'ci' was rotated; its old secret is no longer valid");
  EXPECT_TRUE(auth.Check("Bearer new-secret").ok());
  // Without grace the old secret stops at once; a revoked token cannot be rotated.
  ASSERT_TRUE(tokens.RotateApiToken("tok-r", Sha256Hex("third"), "third", 0).ok());
  EXPECT_FALSE(auth.Check("Bearer new-secret").ok());
  ASSERT_TRUE(tokens.RevokeApiToken("tok-r").ok());
  EXPECT_EQ(tokens.RotateApiToken("tok-r", Sha256Hex("x"), "x", 0).error().code,
            ErrorCode::kConflict);
  EXPECT_EQ(tokens.RotateApiToken("tok-none", Sha256Hex("x"), "x", 0).error().code,
            ErrorCode::kNotFound);
}

TEST_F(AuthTest, AnOutageIsBridgedByTheLastLookupAndARevocationStillCounts) {
  SwitchedTokens tokens(*store_.tokens);
  Authenticator auth(tokens, clock_);
  for (const char* id : {"tok-a", "tok-b"}) {
    ApiToken t;
    t.id = id;
    t.name = id;
    t.role = Role::kOperator;
    t.hash = Sha256Hex(std::string("secret-") + id);
    ASSERT_TRUE(tokens.CreateApiToken(t).ok());
  }
  ASSERT_TRUE(auth.Check("Bearer secret-tok-a").ok());
  ASSERT_TRUE(auth.Check("Bearer secret-tok-b").ok());
  tokens.down = true;
  auto bridged = auth.Check("Bearer secret-tok-a");
  ASSERT_TRUE(bridged.ok());
  EXPECT_EQ(bridged->role, Role::kOperator);
  // A token it has not seen is not let in on trust: the caller is told the store is away.
  EXPECT_EQ(auth.Check("Bearer never-seen").error().code, ErrorCode::kUnavailable);
  // Back up: a revocation counts on the next request, and stays counted through the next outage.
  tokens.down = false;
  ASSERT_TRUE(tokens.RevokeApiToken("tok-b").ok());
  EXPECT_EQ(auth.Check("Bearer secret-tok-b").error().message, "token has been revoked");
  tokens.down = true;
  EXPECT_EQ(auth.Check("Bearer secret-tok-b").error().message, "token has been revoked");
  // An expiry passes during an outage too.
  tokens.down = false;
  ApiToken e;
  e.id = "tok-e";
  e.name = "e";
  e.hash = Sha256Hex("secret-e");
  e.expires_ms = clock_.NowMs() + 1000;
  ASSERT_TRUE(tokens.CreateApiToken(e).ok());
  ASSERT_TRUE(auth.Check("Bearer secret-e").ok());
  tokens.down = true;
  clock_.Advance(2000);
  EXPECT_EQ(auth.Check("Bearer secret-e").error().message, "token has expired");
}

// Twenty failures from one address within a minute, and its further failures are answered
// with the seconds left in that minute (the caller then says 429); other addresses, and the
// next minute, start afresh. The failures are gathered for the audit log, one entry per
// address with its count.
TEST(SignInLimiter, RefusesAnAddressAfterTwentyFailuresForTheRestOfTheMinute) {
  SignInLimiter limiter;
  const int64_t t0 = 1'000'000;
  for (int i = 0; i < SignInLimiter::kMaxFailures; ++i) {
    EXPECT_EQ(limiter.Failed("10.0.0.9", t0 + i), 0) << i;  // the twentieth still a 401
  }
  EXPECT_EQ(limiter.Failed("10.0.0.9", t0 + 1000), 59);   // the window began at t0
  EXPECT_EQ(limiter.Failed("10.0.0.8", t0 + 1000), 0);    // another address is not refused
  EXPECT_EQ(limiter.Failed("10.0.0.9", t0 + 60'000), 0);  // the minute is over: a new one
  auto counts = limiter.TakeAuditCounts();
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts[0].remote, "10.0.0.9");
  EXPECT_EQ(counts[0].count, 22);
  EXPECT_EQ(counts[0].first_ms, t0);
  EXPECT_EQ(counts[0].last_ms, t0 + 60'000);
  EXPECT_EQ(counts[1].remote, "10.0.0.8");
  EXPECT_EQ(counts[1].count, 1);
  EXPECT_TRUE(limiter.TakeAuditCounts().empty());  // taken
}

// A flood from many addresses writes a bounded number of audit records: past
// kMaxAuditAddresses, the rest are summed in one.
TEST(SignInLimiter, AFloodOfAddressesIsAuditedInBoundedRecords) {
  SignInLimiter limiter;
  for (int i = 0; i < 5000; ++i) limiter.Failed("10.1." + std::to_string(i), 1000 + i);
  auto counts = limiter.TakeAuditCounts();
  ASSERT_EQ(counts.size(), SignInLimiter::kMaxAuditAddresses + 1);
  EXPECT_EQ(counts.back().remote, "other addresses");
  EXPECT_EQ(counts.back().count, 5000 - static_cast<int64_t>(SignInLimiter::kMaxAuditAddresses));
}

// The scheme of the Authorization header is case-insensitive; the token itself is not.
TEST_F(AuthTest, TheBearerSchemeIsCaseInsensitive) {
  Authenticator auth(*store_.tokens, clock_);
  ApiToken t;
  t.id = "tok-c";
  t.name = "c";
  t.hash = Sha256Hex("secret-c");
  t.prefix = "secret-c";
  ASSERT_TRUE(store_.tokens->CreateApiToken(t).ok());
  for (const char* h :
       {"Bearer secret-c", "bearer secret-c", "BEARER   secret-c", "Bearer\tsecret-c"}) {
    EXPECT_TRUE(auth.Check(h).ok()) << h;
  }
  for (const char* h :
       {"Bearer SECRET-C", "Basic secret-c", "Bearersecret-c", "bearer ", "secret-c"}) {
    EXPECT_FALSE(auth.Check(h).ok()) << h;
  }
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
