#include "model/team.h"

#include <gtest/gtest.h>

namespace gpufleet {
namespace {

TEST(Team, ParsesEveryFieldAndWritesItBack) {
  std::string field;
  auto t = ParseTeam(R"({"name": "vision", "contacts": ["oncall@example.com"],
                         "channels": ["vision-pager"], "budget_monthly": 120000,
                         "projects": ["detector", {"name": "segmenter", "description": "cams"}]})",
                     &field);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->name, "vision");
  EXPECT_EQ(t->contacts, std::vector<std::string>{"oncall@example.com"});
  EXPECT_EQ(t->channels, std::vector<std::string>{"vision-pager"});
  EXPECT_EQ(t->budget_monthly, 120000);
  ASSERT_EQ(t->projects.size(), 2u);
  EXPECT_EQ(t->FindProject("segmenter")->description, "cams");
  EXPECT_EQ(t->FindProject("nope"), nullptr);
  // The file's form leaves the times out and writes a project without a description by name;
  // whole amounts are integers.
  EXPECT_EQ(TeamJson(t.value(), true),
            R"({"name":"vision","contacts":["oncall@example.com"],"channels":["vision-pager"],)"
            R"("budget_monthly":120000,"projects":["detector",{"name":"segmenter",)"
            R"("description":"cams"}]})");
  // The stored form reads back the same, times included.
  Team stored = t.value();
  stored.created_ms = 5;
  stored.projects[0].created_ms = 6;
  auto again = ParseTeam(TeamJson(stored));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again.value(), stored);
  EXPECT_EQ(again->created_ms, 5);
  EXPECT_EQ(again->projects[0].created_ms, 6);
}

TEST(Team, ABadFieldIsNamed) {
  auto bad = [](const std::string& json) {
    std::string field;
    auto t = ParseTeam(json, &field);
    EXPECT_FALSE(t.ok()) << json;
    return t.ok() ? std::string() : field + " | " + t.error().message;
  };
  EXPECT_EQ(bad(R"({"contacts": []})"), "name | name: is required");
  EXPECT_EQ(bad(R"({"name": "Vision"})"),
            "name | name: 'Vision' must be lower-case letters, digits, '-' or '.', at most 63");
  EXPECT_EQ(bad(R"({"name": "v", "budget_monthly": -1})"),
            "budget_monthly | budget_monthly: must not be negative");
  EXPECT_EQ(bad(R"({"name": "v", "channels": ["a", "a"]})"),
            "channels[1] | channels[1]: 'a' is listed twice");
  EXPECT_EQ(bad(R"({"name": "v", "projects": ["a", {"name": "a"}]})"),
            "projects[1] | projects[1]: duplicate project 'a'");
  EXPECT_EQ(bad(R"({"name": "v", "projects": [{"name": "a", "owner": "x"}]})"),
            "projects[0].owner | projects[0].owner: unknown field (known: name, description, "
            "created_ms)");
  EXPECT_EQ(bad(R"({"name": "v", "budget": 1})"),
            "budget | budget: unknown field (known: name, contacts, channels, budget_monthly, "
            "projects, slurm_accounts, created_ms, updated_ms)");
  EXPECT_FALSE(ParseTeam("[1]").ok());
  EXPECT_FALSE(ParseProject(R"({"description": "x"})").ok());
  EXPECT_EQ(ParseProject(R"({"name": "p", "description": "x"})")->description, "x");
}

}  // namespace
}  // namespace gpufleet
