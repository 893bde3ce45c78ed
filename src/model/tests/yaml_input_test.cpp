// YAML from outside is read event by event before any tree is built: an alias bomb is refused
// at once, and so is a key given twice.

#include "model/yaml_input.h"

#include <gtest/gtest.h>

#include <string>

namespace gpufleet {
namespace {

TEST(YamlInput, AnAliasBombIsRefusedBeforeItExpands) {
  // A few hundred bytes that expand to 9^9 strings when walked.
  std::string bomb = "a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    std::string prev(1, static_cast<char>(c - 1));
    bomb += std::string(1, c) + ": &" + c + " [*" + prev + ",*" + prev + ",*" + prev + ",*" + prev +
            ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + "]\n";
  }
  bomb += "clusters: [*i]\n";
  auto loaded = LoadYamlInput(bomb, "fleet.yaml");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().message,
            "fleet.yaml:2: aliases (*name) are not accepted; write the value out");
}

TEST(YamlInput, AKeyGivenTwiceIsRefusedWithItsLine) {
  auto twice = LoadYamlInput("clusters:\n  - name: a\n    type: edge\n    name: b\n", "f.yaml");
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().message, "f.yaml:4: key 'name' is given twice in this mapping");
  auto flow = LoadYamlInput(R"({"role": "viewer", "role": "admin"})", "body");
  ASSERT_FALSE(flow.ok());
  EXPECT_NE(flow.error().message.find("key 'role' is given twice"), std::string::npos);
}

// A byte that is not UTF-8 would go back out in JSON replies (a rule's annotations), which
// would then not be JSON: the rule file fuzzer's find.
TEST(YamlInput, TextThatIsNotUtf8IsRefusedWithItsLine) {
  auto bad = LoadYamlInput("groups:\n  - name: g\n    summary: \"{\xff $la\"\n", "r.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "r.yaml:3: the text is not UTF-8");
  EXPECT_TRUE(LoadYamlInput("site: \"M\xc3\xbcnchen\"\n", "f.yaml").ok());
}

TEST(YamlInput, OrdinaryYamlLoadsAsBefore) {
  auto ok = LoadYamlInput(
      "clusters:\n  - name: a\n    pools: [{name: p, size: 2}, {name: q, size: 3}]\n"
      "  - name: b\n    labels: {zone: x, name: y}\n",
      "f.yaml");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ((*ok)["clusters"][1]["labels"]["name"].as<std::string>(), "y");
  auto syntax = LoadYamlInput("a: [1, 2\n", "f.yaml");
  ASSERT_FALSE(syntax.ok());
  EXPECT_EQ(syntax.error().message.rfind("f.yaml:", 0), 0u) << syntax.error().message;
}

// The one reader of YAML files' fields: the line of the node at fault and the field's path.
TEST(YamlFields, ErrorsNameTheFileTheLineAndTheField) {
  auto doc = LoadYamlInput("pool:\n  name: a\n  size: [1]\n  colour: red\n  note:\n", "f.yaml");
  ASSERT_TRUE(doc.ok()) << doc.error().message;
  const YAML::Node pool = (*doc)["pool"];
  const YamlFields r("f.yaml");
  auto only = r.Only(pool, "pool", {"name", "size", "note"});
  ASSERT_FALSE(only.ok());
  EXPECT_EQ(only.error().message, "f.yaml:4: pool.colour: unknown field");
  EXPECT_EQ(r.Only(pool["name"], "pool.name", {}).error().message,
            "f.yaml:2: pool.name: must be a mapping");
  EXPECT_TRUE(r.Only(pool["absent"], "pool.absent", {}).ok());  // nothing given: nothing wrong
  EXPECT_EQ(*r.String(pool, "pool", "name", true), "a");
  EXPECT_EQ(r.String(pool, "pool", "size", false).error().message,
            "f.yaml:3: pool.size: must be a string");
  EXPECT_EQ(*r.String(pool, "pool", "note", false), "");  // `note:` is null: not given
  EXPECT_EQ(r.String(pool, "pool", "note", true).error().message,
            "f.yaml:2: pool.note: is required");
  EXPECT_EQ(r.Bad(*doc, "", "the document must be a mapping").message,
            "f.yaml:1: the document must be a mapping");
}

}  // namespace
}  // namespace gpufleet
