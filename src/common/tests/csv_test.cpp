#include "common/csv.h"

#include <gtest/gtest.h>

namespace gpufleet {
namespace {

std::vector<std::vector<std::string>> Fields(const std::vector<CsvRow>& rows) {
  std::vector<std::vector<std::string>> out;
  for (const auto& r : rows) out.push_back(r.fields);
  return out;
}

TEST(Csv, ReadsQuotedFieldsLineBreaksAndBlankLines) {
  auto rows = ParseCsv(
      "\xEF\xBB\xBF"
      "a,b,c\r\n\r\n1,\"x, \"\"y\"\"\",\n\"two\nlines\",,z\n");
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  EXPECT_EQ(Fields(rows.value()),
            (std::vector<std::vector<std::string>>{
                {"a", "b", "c"}, {"1", "x, \"y\"", ""}, {"two\nlines", "", "z"}}));
  EXPECT_EQ(rows.value()[0].line, 1);
  EXPECT_EQ(rows.value()[1].line, 3);  // the blank line 2 is skipped
  EXPECT_EQ(rows.value()[2].line, 4);
}

TEST(Csv, NamesTheLineOfABadQuote) {
  auto open = ParseCsv("a\n\"b\n");
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.error().message, "line 2: a quoted field is not closed");
  auto inside = ParseCsv("a,b\nx,y\"z\n");
  ASSERT_FALSE(inside.ok());
  EXPECT_NE(inside.error().message.find("line 2: a quote inside an unquoted field"),
            std::string::npos);
  auto after = ParseCsv("\"a\"b\n");
  ASSERT_FALSE(after.ok());
  EXPECT_NE(after.error().message.find("line 1:"), std::string::npos);
}

TEST(Csv, TextThatIsNotUtf8IsRefusedWithItsLine) {
  auto bad = ParseCsv("serial,comments\n1,ok\n2,caf\xe9\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "line 3: the text is not UTF-8");
  EXPECT_TRUE(ParseCsv("serial,comments\n1,caf\xc3\xa9\n").ok());
}

TEST(Csv, WrittenFieldsReadBack) {
  std::vector<std::string> fields = {"plain", "with,comma", "with \"quote\"", "two\nlines", ""};
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) line += ',';
    AppendCsvField(line, fields[i]);
  }
  EXPECT_EQ(line, "plain,\"with,comma\",\"with \"\"quote\"\"\",\"two\nlines\",");
  auto rows = ParseCsv(line + "\n");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ(rows.value()[0].fields, fields);
}

}  // namespace
}  // namespace gpufleet
