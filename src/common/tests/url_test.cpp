#include "common/url.h"

#include <gtest/gtest.h>

#include "common/crypto.h"

namespace gpufleet {
namespace {

TEST(ParseHttpUrl, FullForm) {
  auto u = ParseHttpUrl("http://10.0.0.5:9400/metrics?x=1", "80");
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_EQ(u->scheme, "http");
  EXPECT_EQ(u->host, "10.0.0.5");
  EXPECT_EQ(u->port, "9400");
  EXPECT_EQ(u->target, "/metrics?x=1");
}

TEST(ParseHttpUrl, DefaultsAndBareHost) {
  auto u = ParseHttpUrl("ctl.example.org", "8080");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->scheme, "http");
  EXPECT_EQ(u->host, "ctl.example.org");
  EXPECT_EQ(u->port, "8080");
  EXPECT_EQ(u->target, "/");
  EXPECT_EQ(ParseHttpUrl("https://x", "8080")->port, "443");
  EXPECT_EQ(ParseHttpUrl("ws://x:1/a", "8080")->target, "/a");
}

TEST(ParseHttpUrl, SaysWhetherTheSchemeIsTls) {
  EXPECT_TRUE(ParseHttpUrl("https://ctl.example.org", "8080")->tls());
  EXPECT_TRUE(ParseHttpUrl("wss://ctl:8443", "8080")->tls());
  EXPECT_EQ(ParseHttpUrl("wss://ctl", "8080")->port, "443");
  EXPECT_FALSE(ParseHttpUrl("http://ctl:8080", "8080")->tls());
  EXPECT_FALSE(ParseHttpUrl("ctl", "8080")->tls());
  EXPECT_FALSE(ParseHttpUrl("ftp://x", "8080").ok());
}

TEST(ParseHttpUrl, Ipv6) {
  auto u = ParseHttpUrl("http://[::1]:9400/metrics", "80");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, "9400");
}

TEST(ParseHttpUrl, RefusesWithTheReason) {
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {
      {"ftp://x/", "scheme 'ftp'"},
      {"http://:80/", "no host"},
      {"http://x:0/", "port '0'"},
      {"http://x:99999/", "port '99999'"},
      {"http://x:ab/", "port 'ab'"},
      {"http://x:/", "empty port"},
      {"http://u:p@x/", "credentials"},
      {"http://[::1/", "unclosed"},
      {"http://x y/", "characters"},
      {"http://x/a b", "space"},
      {"", "no host"},
  };
  for (const auto& c : cases) {
    auto u = ParseHttpUrl(c.text, "80");
    ASSERT_FALSE(u.ok()) << c.text;
    EXPECT_NE(u.error().message.find(c.says), std::string::npos)
        << c.text << " -> " << u.error().message;
  }
}

// RFC 4231 test case 2.
TEST(HmacSha256Hex, KnownAnswer) {
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

// RFC 4648 section 10's vectors, and a basic-auth pair.
TEST(Base64Encode, KnownAnswers) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode("gpufleet:s3cret"), "Z3B1ZmxlZXQ6czNjcmV0");
}

TEST(ParseHttpUrls, SeveralControllersInOrderAndTheWrongOneNamed) {
  auto list = ParseHttpUrls("https://ctl-1:8443, http://ctl-2,10.0.0.7:9000", "8080");
  ASSERT_TRUE(list.ok()) << list.error().message;
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].host, "ctl-1");
  EXPECT_TRUE((*list)[0].tls());
  EXPECT_EQ((*list)[1].port, "8080");
  EXPECT_EQ((*list)[2].port, "9000");
  EXPECT_EQ(SplitUrlList("a, b ,c"), (std::vector<std::string>{"a", "b", "c"}));

  auto bad = ParseHttpUrls("http://ctl-1,ftp://ctl-2", "8080");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("ftp://ctl-2"), std::string::npos);
  EXPECT_FALSE(ParseHttpUrls("http://ctl-1,", "8080").ok());  // an empty item
  EXPECT_FALSE(ParseHttpUrls("", "8080").ok());
}

TEST(PercentEncode, KeepsTheUnreservedAndEncodesTheRest) {
  EXPECT_EQ(PercentEncode("gpu_util-1.5~"), "gpu_util-1.5~");
  EXPECT_EQ(PercentEncode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
  EXPECT_EQ(PercentEncode(""), "");
}

}  // namespace
}  // namespace gpufleet
