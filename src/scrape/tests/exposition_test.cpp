#include "scrape/exposition.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

namespace gpufleet::scrape {
namespace {

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(DCGM_FIXTURES) + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Exposition, ReadsADcgmExporterPage) {
  auto samples = ParseExposition(Fixture("a100-2gpu.prom"));
  ASSERT_TRUE(samples.ok()) << samples.error().message;
  ASSERT_EQ(samples->size(), 50u);  // 25 families x 2 GPUs
  const ExpoSample& s = samples->front();
  EXPECT_EQ(s.name, "DCGM_FI_DEV_SM_CLOCK");
  EXPECT_EQ(s.value, 1410);
  EXPECT_EQ(s.Label("UUID"), "GPU-5f1c2a7e-93b4-4c8d-a1e2-7d6c5b4a3f01");
  EXPECT_EQ(s.Label("pod"), "pretrain-7b-0");
  EXPECT_EQ(s.Label("absent"), "");
  EXPECT_FALSE(s.timestamp_ms.has_value());
}

TEST(Exposition, ReadsAnOlderExporterWithSpacesBetweenLabels) {
  auto samples = ParseExposition(Fixture("t4-legacy.prom"));
  ASSERT_TRUE(samples.ok()) << samples.error().message;
  ASSERT_EQ(samples->size(), 8u);
  EXPECT_EQ((*samples)[0].Label("modelName"), "Tesla T4");
  EXPECT_DOUBLE_EQ((*samples)[2].value, 27.562);
}

TEST(Exposition, ValuesTimestampsAndEscapes) {
  auto samples = ParseExposition(
      "a 1\n"
      "b{} -2.5e3 1700000000000\n"
      "c{x=\"q\\\"uote\\\\back\\nline\",} NaN\n"
      "d +Inf\n"
      "e -inf -5\n"
      "  f\t7  \n"
      "# a comment that is neither HELP nor TYPE\n"
      "\n"
      "g 1e400\n");
  ASSERT_TRUE(samples.ok()) << samples.error().message;
  ASSERT_EQ(samples->size(), 7u);
  EXPECT_EQ((*samples)[1].value, -2500);
  EXPECT_EQ((*samples)[1].timestamp_ms, 1700000000000);
  EXPECT_EQ((*samples)[2].Label("x"), "q\"uote\\back\nline");
  EXPECT_TRUE(std::isnan((*samples)[2].value));
  EXPECT_EQ((*samples)[3].value, INFINITY);
  EXPECT_EQ((*samples)[4].value, -INFINITY);
  EXPECT_EQ((*samples)[4].timestamp_ms, -5);
  EXPECT_EQ((*samples)[5].name, "f");
  EXPECT_EQ((*samples)[6].value, INFINITY);
}

TEST(Exposition, RefusesMalformedInputWithTheLineAndReason) {
  struct Case {
    std::string text;
    std::string says;
  } cases[] = {
      {"a 1\nb\n", "line 2: expected a space and a value after b"},
      {"a 1\nb 2", "line 2: the page does not end with a newline"},
      {"a{x=\"1\"} \n", "line 1: '' is not a number"},
      {"a one\n", "line 1: 'one' is not a number"},
      {"a 0x10\n", "'0x10' is not a number"},
      {"a 1 2 3\n", "text after the timestamp"},
      {"a 1 1.5\n", "'1.5' is not a timestamp"},
      {"a{x=1} 1\n", "a label value must be quoted"},
      {"a{x=\"1} 1\n", "not closed"},
      {"a{x=\"\\t\"} 1\n", "unknown escape"},
      {"a{x=\"1\" y=\"2\"} 1\n", "expected ',' or '}' after label x"},
      {"a{x=\"1\",x=\"2\"} 1\n", "label x appears twice"},
      {"a{1x=\"1\"} 1\n", "expected a label name"},
      {"a{x:y=\"1\"} 1\n", "expected '=' after label x"},
      {"a{x=\"1\"\n", "expected ',' or '}'"},
      {"9a 1\n", "expected a metric name"},
      {"{x=\"1\"} 1\n", "expected a metric name"},
      {"a-b 1\n", "expected a space and a value after a"},
      {"a 1\r\n", "carriage return"},
      {std::string("a 1\n\0b 2\n", 10), "line 2: has a NUL byte"},
      {"# TYPE a gauge\n# TYPE a gauge\n", "line 2: a second TYPE line for a"},
      {"# TYPE a speedometer\n", "'speedometer' is not a metric type"},
      {"# TYPE a gauge extra\n", "text after the type"},
      {"# TYPE\n", "needs a metric name"},
      {"# HELP a x\n# HELP a y\n", "a second HELP line"},
      {"a 1\n# TYPE a gauge\n", "the TYPE line for a comes after its samples"},
      {"a{x=\"\xff\"} 1\n", "not valid UTF-8"},
      {"a{x=\"\xc0\xaf\"} 1\n", "not valid UTF-8"},      // an overlong '/'
      {"a{x=\"\xed\xa0\x80\"} 1\n", "not valid UTF-8"},  // a surrogate
  };
  for (const auto& c : cases) {
    auto r = ParseExposition(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.error().message.find(c.says), std::string::npos)
        << c.text << " -> " << r.error().message;
  }
}

TEST(Exposition, Limits) {
  ExpoLimits limits;
  limits.max_samples = 2;
  EXPECT_FALSE(ParseExposition("a 1\nb 2\nc 3\n", limits).ok());
  limits = {};
  limits.max_line_bytes = 10;
  auto r = ParseExposition("a 1\nabcdefghijkl 1\n", limits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("line 2: longer than 10 bytes"), std::string::npos);
  limits = {};
  limits.max_labels = 1;
  EXPECT_FALSE(ParseExposition("a{x=\"1\",y=\"2\"} 1\n", limits).ok());
}

// Property: whatever bytes arrive, the reader answers (a list or a "line N:" error) without
// crashing or reading out of bounds (the test build runs under AddressSanitizer), and a page
// it accepts reads the same again.
TEST(Exposition, MutatedPagesNeverCrash) {
  std::string base = Fixture("a100-2gpu.prom") + Fixture("t4-legacy.prom");
  std::mt19937_64 rng(20261129);
  const std::string alphabet = "{}=\",# \n\\azAZ09_:.+-eE\t\r\xff\xc3";
  size_t accepted = 0, refused = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string text = base.substr(rng() % base.size() / 2, std::string::npos);
    int edits = 1 + rng() % 8;
    for (int e = 0; e < edits && !text.empty(); ++e) {
      size_t at = rng() % text.size();
      switch (rng() % 4) {
        case 0:
          text[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          text.erase(at, 1 + rng() % 16);
          break;
        case 2:
          text.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 3:
          text.resize(at);
          break;
      }
    }
    auto r = ParseExposition(text);
    if (r.ok()) {
      ++accepted;
      auto again = ParseExposition(text);
      ASSERT_TRUE(again.ok());
      ASSERT_EQ(again->size(), r->size());
    } else {
      ++refused;
      ASSERT_EQ(r.error().message.rfind("line ", 0), 0u) << r.error().message;
    }
  }
  // Both outcomes must occur, or the mutations test nothing.
  EXPECT_GT(accepted, 0u);
  EXPECT_GT(refused, 0u);
}

}  // namespace
}  // namespace gpufleet::scrape
