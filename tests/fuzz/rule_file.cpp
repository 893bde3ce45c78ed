// Alert rules: a rule file (POST /api/v1/alert-rules, `gpufleet apply`) and an expression alone
// (a rule test's). Parsing must end without crashing, and an expression it takes has a canonical
// text (its cache key) that parses to the same expression, within the parser's bounds.

#include <string>

#include "alerting/expr.h"
#include "alerting/rules.h"
#include "fuzz.h"

using namespace gpufleet;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::Text(data, size);
  if (auto expr = alerting::ParseExpr(text); expr.ok()) {
    const std::string key = (*expr)->key;
    auto again = alerting::ParseExpr(key);
    if (!again.ok()) {
      // The key brackets every operation, so a long chain (a - b - c ...) may pass the
      // parser's bounds on nesting and length as written and not as its key: nothing else.
      const std::string& why = again.error().message;
      if (why.find("nested too deeply") == std::string::npos &&
          why.find("longer than") == std::string::npos) {
        fuzz::Fail("an expression's canonical text does not parse", why + "\n" + key);
      }
    } else if ((*again)->key != key) {
      fuzz::Fail("an expression's canonical text changes", key);
    }
  }
  if (auto file = alerting::ParseRuleFile(text, "fuzz.yaml"); file.ok()) {
    const std::string written = alerting::WriteRuleFile(file->rules);
    auto again = alerting::ParseRuleFile(written, "written.yaml");
    if (!again.ok()) fuzz::Fail("a written rule file does not parse", again.error().message);
    for (const auto& rule : file->rules) {
      auto back = alerting::RuleFromJson(alerting::RuleJson(rule));
      if (!back.ok()) fuzz::Fail("a rule's JSON does not read back", back.error().message);
    }
  }
  return 0;
}
