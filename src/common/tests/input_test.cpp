// Input from outside, bounded: patterns matched in linear time, JSON that names a key once,
// CSV cells that a spreadsheet does not run.

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "common/csv.h"
#include "common/json_keys.h"
#include "common/pattern.h"

namespace gpufleet {
namespace {

TEST(Pattern, MatchesWholeValuesAsPrometheusDoes) {
  auto p = Pattern::Compile("train|infer-.*");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->FullMatch("train"));
  EXPECT_TRUE(p->FullMatch("infer-use1"));
  EXPECT_FALSE(p->FullMatch("training"));
  EXPECT_FALSE(p->FullMatch("x-train"));
  EXPECT_TRUE(Pattern::Compile("").value().FullMatch(""));
}

TEST(Pattern, RefusesWhatWouldExhaustTheControllerWithAMessage) {
  // 200,000 nested groups once took the process down through std::regex's recursion.
  std::string nested = std::string(200'000, '(') + "a" + std::string(200'000, ')');
  auto deep = Pattern::Compile(nested);
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.error().message.find("at most 4096"), std::string::npos) << deep.error().message;
  // Within the size bound, RE2 parses and runs nesting without recursion.
  auto nested_small = Pattern::Compile(std::string(2000, '(') + "a" + std::string(2000, ')'));
  if (nested_small.ok()) EXPECT_TRUE(nested_small->FullMatch("a"));
  auto bad = Pattern::Compile("a(b");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("missing )"), std::string::npos) << bad.error().message;
  // The classic catastrophic backtracking case takes linear time.
  auto evil = Pattern::Compile("(a+)+$");
  ASSERT_TRUE(evil.ok());
  std::string input(100'000, 'a');
  input += '!';
  auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(evil->FullMatch(input));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
}

TEST(JsonKeys, ARepeatedKeyIsRefusedAndNamed) {
  EXPECT_TRUE(CheckJsonKeys(R"({"a": 1, "b": {"a": 2}, "c": [{"a": 1}, {"a": 2}]})").ok());
  auto twice = CheckJsonKeys(R"({"role": "viewer", "name": "x", "role": "admin"})");
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().message, "key 'role' is given twice in one object");
  EXPECT_FALSE(CheckJsonKeys(R"({"a": {"x": 1, "x": 2}})").ok());
  EXPECT_FALSE(CheckJsonKeys(R"([{"k": 1, "k": 1}])").ok());
  EXPECT_TRUE(CheckJsonKeys("{not json").ok());  // the parse proper says what is wrong
}

TEST(Csv, FormulaCellsAreExportedInertAndReadBack) {
  std::string out;
  for (const char* cell :
       {"=HYPERLINK(\"http://x\")", "+1", "@SUM(A1)", "-2+3", "-5", "-0.25", "rack-1", "plain"}) {
    AppendCsvField(out, cell);
    out += ',';
  }
  EXPECT_EQ(out, "\"'=HYPERLINK(\"\"http://x\"\")\",'+1,'@SUM(A1),'-2+3,-5,-0.25,rack-1,plain,");
  EXPECT_EQ(UnguardCsvField("'=1+1"), "=1+1");
  EXPECT_EQ(UnguardCsvField("'-x"), "-x");
  EXPECT_EQ(UnguardCsvField("'quoted"), "'quoted");  // not a guard
  EXPECT_EQ(UnguardCsvField("-5"), "-5");
  // A value that itself starts with ' and a formula character (the asset fuzzer's find: it
  // lost its ' on the way back) gets one more.
  for (const char* cell : {"'=SUM(A1:A2)", "''-5", "'", "''", "'quoted"}) {
    std::string one;
    AppendCsvField(one, cell);
    EXPECT_EQ(UnguardCsvField(one), cell) << one;
  }
  std::string guarded;
  AppendCsvField(guarded, "'=SUM(A1:A2)");
  EXPECT_EQ(guarded, "''=SUM(A1:A2)");
}

}  // namespace
}  // namespace gpufleet
