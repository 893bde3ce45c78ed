// Text from outside made printable: nothing it holds can start a new log line or move a
// terminal's cursor, and a long value is cut.

#include "common/strings.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gpufleet
