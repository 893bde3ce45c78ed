// JsonFields: each field type, its message, the path of a nested object, and the bad field kept.

#include "common/json_fields.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace gpufleet {
namespace {

namespace json = boost::json;

json::object Obj(const char* text) { return json::parse(text).as_object(); }

TEST(JsonFields, UnknownFieldsAreNamedWithThePathAndTheKnownOnes) {
  auto o = Obj(R"({"size": 1, "colour": "red"})");
  JsonFields f(o, "strategy.batch");
  auto st = f.Only({"size", "growth"});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(st.error().message, "strategy.batch.colour: unknown field (known: size, growth)");
  EXPECT_EQ(f.field(), "strategy.batch.colour");
  EXPECT_TRUE(JsonFields(o).Only({"size", "colour"}).ok());
}

TEST(JsonFields, EachTypeReadsItsValueAndRefusesAnother) {
  auto o = Obj(R"({"s": "x", "b": true, "n": 2.5, "i": 7, "big": 3000000000, "d": "5m",
                   "secs": 90, "l": ["a", "b"], "dup": ["a", "a"], "empty": ["a", ""]})");
  JsonFields f(o);
  std::string s;
  bool b = false;
  double n = 0, d = 0, secs = 0;
  int i = 0;
  int64_t big = 0;
  std::vector<std::string> l;
  EXPECT_TRUE(f.String("s", s).ok());
  EXPECT_TRUE(f.Bool("b", b).ok());
  EXPECT_TRUE(f.Number("n", n).ok());
  EXPECT_TRUE(f.Int("i", i).ok());
  EXPECT_TRUE(f.Int64("big", big).ok());
  EXPECT_TRUE(f.Seconds("d", d).ok());
  EXPECT_TRUE(f.Seconds("secs", secs).ok());
  EXPECT_TRUE(f.Strings("l", l).ok());
  EXPECT_EQ(s, "x");
  EXPECT_TRUE(b);
  EXPECT_EQ(n, 2.5);
  EXPECT_EQ(i, 7);
  EXPECT_EQ(big, 3'000'000'000);
  EXPECT_EQ(d, 300);
  EXPECT_EQ(secs, 90);
  EXPECT_EQ(l, (std::vector<std::string>{"a", "b"}));

  EXPECT_EQ(f.String("b", s).error().message, "b: must be a string");
  EXPECT_EQ(f.Bool("s", b).error().message, "s: must be true or false");
  EXPECT_EQ(f.Number("s", n).error().message, "s: must be a number");
  EXPECT_EQ(f.Int("n", i).error().message, "n: must be an integer");
  EXPECT_EQ(f.Int("big", i).error().message, "big: must be an integer");
  EXPECT_EQ(f.Int("i", i, 1, 5).error().message, "i: must be an integer from 1 to 5");
  EXPECT_EQ(f.Seconds("s", d).error().message, "s: 'x' is not a duration");
  EXPECT_EQ(f.Seconds("b", d).error().message,
            "b: must be a duration such as \"5m\" or a number of seconds");
  EXPECT_EQ(f.Strings("dup", l).error().message, "dup[1]: 'a' is listed twice");
  EXPECT_TRUE(f.Strings("dup", l, false).ok());
  EXPECT_EQ(f.Strings("empty", l).error().message, "empty[1]: must be a non-empty string");
  EXPECT_EQ(f.field(), "empty[1]");
}

TEST(JsonFields, AnAbsentFieldKeepsItsDefault) {
  auto o = Obj("{}");
  JsonFields f(o);
  int i = 4;
  std::string s = "default";
  EXPECT_TRUE(f.Int("i", i).ok());
  EXPECT_TRUE(f.String("s", s).ok());
  EXPECT_EQ(i, 4);
  EXPECT_EQ(s, "default");
  EXPECT_EQ(f.Get("i"), nullptr);
  EXPECT_EQ(f.field(), "");
}

TEST(JsonFields, ANestedReadersErrorIsKeptByItsParent) {
  auto o = Obj(R"({"projects": [{"name": "a", "owner": "x"}]})");
  JsonFields top(o);
  JsonFields item(o.at("projects").as_array()[0].as_object(), "projects[0]");
  auto st = item.Only({"name"});
  ASSERT_FALSE(st.ok());
  Error e = top.Nested(item, st.error());
  EXPECT_EQ(e.message, "projects[0].owner: unknown field (known: name)");
  EXPECT_EQ(top.field(), "projects[0].owner");
  EXPECT_EQ(item.Path("[2]"), "projects[0][2]");
}

}  // namespace
}  // namespace gpufleet
