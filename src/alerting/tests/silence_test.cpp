#include "alerting/silence.h"

#include <gtest/gtest.h>

namespace gpufleet::alerting {
namespace {

SilenceRecord Record(const std::string& id, const std::string& matchers, int64_t starts,
                     int64_t ends) {
  return {id, matchers, starts, ends, "ops", "maintenance", starts};
}

TEST(Silences, MatchersAsAlertmanager) {
  Labels xid{{"alertname", "GpuXidCritical"}, {"Hostname", "dgx-7"}, {"cluster", "train"}};
  Labels lost{{"alertname", "GpuLost"}, {"Hostname", "dgx-8"}, {"cluster", "train"}};
  ActiveSilences active(
      {Record("a", R"([{"name": "alertname", "value": "GpuLost"}])", 0, 100),
       Record("b", R"([{"name": "Hostname", "value": "dgx-[0-9]", "isRegex": true},
                       {"name": "alertname", "value": "GpuLost", "isEqual": false}])",
              0, 100),
       Record("c", R"([{"name": "team", "value": ""}])", 0, 100),  // absent label: empty
       Record("old", R"([{"name": "cluster", "value": "train"}])", 0, 10),
       Record("later", R"([{"name": "cluster", "value": "train"}])", 80, 100)},
      50);
  EXPECT_EQ(active.Matching(xid), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(active.Matching(lost), (std::vector<std::string>{"a", "c"}));
  EXPECT_TRUE(ActiveSilences({Record("x", "[]", 0, 100)}, 50).Matching(xid).empty());
}

TEST(Silences, BadMatchersSayWhat) {
  struct Case {
    const char* json;
    const char* says;
  } cases[] = {
      {"{}", "must be a list"},
      {"[]", "at least one matcher"},
      {R"([{"value": "x"}])", "matchers[0].name"},
      {R"([{"name": "a"}])", "matchers[0].value"},
      {R"([{"name": "a", "value": "(", "isRegex": true}])", "not a regular expression"},
      {R"([{"name": "a", "value": "b", "isRegex": "yes"}])", "isRegex"},
      {R"([{"name": "a", "value": "b", "colour": 1}])", "matchers[0].colour: unknown field"},
  };
  for (const auto& c : cases) {
    auto r = ParseMatchers(c.json);
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
  }
  auto ok = ParseMatchers(R"([{"name": "a", "value": "b.*", "isRegex": true, "isEqual": false}])");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ParseMatchers(MatchersJson(ok.value()))->at(0).is_equal, false);
}

}  // namespace
}  // namespace gpufleet::alerting
