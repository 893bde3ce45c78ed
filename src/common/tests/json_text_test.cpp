// JSON text: numbers as people write them, strings escaped, and the same document read back.

#include "common/json_text.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <limits>

namespace gpufleet {
namespace {

namespace json = boost::json;

TEST(JsonText, NumbersReadAsWrittenAndTheDocumentRoundTrips) {
  json::object o{{"share", 0.8},
                 {"util", 87.5},
                 {"whole", 3.0},
                 {"tiny", 1e-7},
                 {"sum", 0.1 + 0.2},
                 {"count", 42},
                 {"big", uint64_t{18446744073709551615ULL}},
                 {"neg", -7},
                 {"nan", std::numeric_limits<double>::quiet_NaN()},
                 {"list", json::array{1, 2.5, "x", nullptr, true}},
                 {"text", "a \"quote\", a \\ and\na line\tand \x01"}};
  std::string text = JsonText(o);
  EXPECT_EQ(text, R"({"share":0.8,"util":87.5,"whole":3,"tiny":1e-07,"sum":0.30000000000000004,)"
                  R"("count":42,"big":18446744073709551615,"neg":-7,"nan":null,)"
                  R"("list":[1,2.5,"x",null,true],)"
                  R"("text":"a \"quote\", a \\ and\na line\tand \u0001"})");
  // Boost.JSON reads it back to the same values (the NaN, which JSON cannot hold, as null).
  json::value back = json::parse(text);
  EXPECT_EQ(back.at("share").as_double(), 0.8);
  EXPECT_EQ(back.at("sum").as_double(), 0.1 + 0.2);
  EXPECT_EQ(back.at("whole").to_number<double>(), 3.0);
  EXPECT_EQ(back.at("big").as_uint64(), 18446744073709551615ULL);
  EXPECT_TRUE(back.at("nan").is_null());
  EXPECT_EQ(back.at("text").as_string(), o.at("text").as_string());
  EXPECT_EQ(JsonText(json::value(json::array{})), "[]");
  EXPECT_EQ(JsonText(json::array{json::object{}}), "[{}]");
}

}  // namespace
}  // namespace gpufleet
