// Text from outside made printable: nothing it holds can start a new log line or move a
// terminal's cursor, and a long value is cut.

#include "common/strings.h"

#include <gtest/gtest.h>

#include "common/utf8.h"

namespace gpufleet {
namespace {

TEST(Printable, EscapesControlCharactersSoNoLineCanBeForged) {
  EXPECT_EQ(Printable("gpu-a\n2026-12-04 [info] admin token rotated"),
            "gpu-a\\n2026-12-04 [info] admin token rotated");
  EXPECT_EQ(Printable("a\rb\tc\x1b[2Jd\x7f"), "a\\rb\\tc\\x1b[2Jd\\x7f");
  EXPECT_EQ(Printable("plain-name.example"), "plain-name.example");
  EXPECT_EQ(Printable(std::string("a\0b", 3)), "a\\x00b");
  // UTF-8 is left as it is.
  EXPECT_EQ(Printable("n\xc3\xa9ud"), "n\xc3\xa9ud");
}

TEST(Printable, CutsLongValues) {
  std::string cut = Printable(std::string(100'000, 'A'), 50);
  EXPECT_EQ(cut, std::string(50, 'A') + "...");
  EXPECT_EQ(Printable(std::string(50, 'A'), 50), std::string(50, 'A'));
}

TEST(HasControl, FindsEveryControlCharacter) {
  EXPECT_FALSE(HasControl("ok name-1"));
  EXPECT_TRUE(HasControl("line\nbreak"));
  EXPECT_TRUE(HasControl(std::string("nul\0", 4)));
  EXPECT_TRUE(HasControl("del\x7f"));
  EXPECT_FALSE(HasControl("caf\xc3\xa9"));
}

TEST(InvalidUtf8At, FindsTheFirstByteThatIsNotUtf8) {
  const size_t none = std::string_view::npos;
  EXPECT_EQ(InvalidUtf8At("plain ascii"), none);
  EXPECT_EQ(InvalidUtf8At("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"), none);
  EXPECT_EQ(InvalidUtf8At("{\xff $la"), 1u);         // what the rule file fuzzer found
  EXPECT_EQ(InvalidUtf8At("ab\xc3"), 2u);            // cut short
  EXPECT_EQ(InvalidUtf8At("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(InvalidUtf8At("\xe0\x80\xaf"), 0u);      // overlong, three bytes
  EXPECT_EQ(InvalidUtf8At("x\xed\xa0\x80"), 1u);     // a surrogate
  EXPECT_EQ(InvalidUtf8At("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(InvalidUtf8At("\xe2\x82x"), 0u);         // a continuation byte missing
  EXPECT_EQ(ToUtf8("no '\xff' here, caf\xc3\xa9"), "no '\xEF\xBF\xBD' here, caf\xc3\xa9");
  EXPECT_EQ(ToUtf8("\xe2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
}  // namespace gpufleet
