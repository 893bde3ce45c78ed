#include "common/field_table.h"

#include <gtest/gtest.h>

namespace gpufleet {
namespace {

struct Thing {
  std::string name;
  int64_t since_ms = 0;
  int count = -1;
  bool on = false;
  std::string note = "none";
};

const FieldOf<Thing> kThingFields[] = {{"name", &Thing::name},
                                       {"since_ms", &Thing::since_ms},
                                       {"count", &Thing::count},
                                       {"on", &Thing::on},
                                       {"note", &Thing::note}};

TEST(FieldTable, WritesEveryFieldByItsNameAndReadsItBack) {
  Thing t{"gpu-7", 1'800'000'000'123, 3, true, "moved"};
  boost::json::object o;
  WriteFields(t, kThingFields, o);
  EXPECT_EQ(boost::json::serialize(o),
            R"({"name":"gpu-7","since_ms":1800000000123,"count":3,"on":true,"note":"moved"})");
  Thing back;
  ReadFields(o, kThingFields, back);
  EXPECT_EQ(back.name, "gpu-7");
  EXPECT_EQ(back.since_ms, 1'800'000'000'123);
  EXPECT_EQ(back.count, 3);
  EXPECT_TRUE(back.on);
  EXPECT_EQ(back.note, "moved");
}

// A document written before a field existed, or with a field of another type, reads as the
// struct's defaults there and keeps the rest.
TEST(FieldTable, AnAbsentOrMistypedFieldKeepsItsDefault) {
  auto o = boost::json::parse(R"({"name": "n", "count": "three", "on": 1})").as_object();
  Thing t;
  ReadFields(o, kThingFields, t);
  EXPECT_EQ(t.name, "n");
  EXPECT_EQ(t.count, -1);
  EXPECT_FALSE(t.on);
  EXPECT_EQ(t.since_ms, 0);
  EXPECT_EQ(t.note, "none");
}

}  // namespace
}  // namespace gpufleet
