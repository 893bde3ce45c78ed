// The notifier's alert rules: listed, saved, applied from a rule file, tested.

#include <spdlog/spdlog.h>

#include <boost/json.hpp>

#include "alerting/notifier.h"
#include "common/json_text.h"
#include "common/strings.h"
#include "model/json.h"

namespace json = boost::json;

namespace gpufleet::alerting {

std::vector<RuleView> Notifier::Rules() const {
  std::lock_guard lock(mu_);
  std::vector<RuleView> out;
  std::map<std::string, const Rule*> user;
  for (const auto& r : user_rules_) user[r.name] = &r;
  auto run_of = [&](const Rule& r) -> std::optional<RuleRun> {
    auto it = runs_.find(r.name);
    if (!r.parsed || it == runs_.end()) return std::nullopt;
    return it->second;
  };
  for (const auto& b : base_rules_) {
    auto it = user.find(b.name);
    std::string status = it == user.end()      ? "active"
                         : it->second->enabled ? "overridden"
                                               : "disabled";
    out.push_back({b, status, status == "active" ? run_of(b) : std::nullopt});
  }
  for (const auto& r : user_rules_) {
    out.push_back({r, r.enabled ? "active" : "disabled", run_of(r)});
  }
  return out;
}

Status Notifier::SaveRules(const std::vector<Rule>& upsert,
                           const std::vector<std::string>& remove) {
  int64_t now = clock_->NowMs();
  std::vector<RuleRecord> records;
  for (const auto& r : upsert) records.push_back({r.name, r.group, RuleJson(r), now});
  GF_TRY(store_.SaveRules(records, remove));
  std::lock_guard lock(mu_);
  std::map<std::string, Rule> by_name;
  for (auto& r : user_rules_) by_name[r.name] = std::move(r);
  for (const auto& name : remove) by_name.erase(name);
  for (const auto& r : upsert) by_name[r.name] = r;
  user_rules_.clear();
  for (auto& [_, r] : by_name) user_rules_.push_back(std::move(r));
  engine_.SetRules(MergeRules(base_rules_, user_rules_));
  return {};
}

Result<RuleChanges> Notifier::ApplyRuleFile(const RuleFile& file) {
  std::lock_guard changes(rules_mu_);
  std::map<std::string, Rule> current;
  {
    std::lock_guard lock(mu_);
    for (const auto& r : user_rules_) current[r.name] = r;
  }
  RuleChanges c;
  std::vector<Rule> upsert;
  std::set<std::string> in_file;
  for (const auto& r : file.rules) {
    in_file.insert(r.name);
    auto it = current.find(r.name);
    if (it == current.end()) {
      ++c.created;
    } else if (RuleJson(it->second) == RuleJson(r)) {
      ++c.unchanged;
      continue;
    } else {
      ++c.updated;
    }
    upsert.push_back(r);
  }
  std::vector<std::string> remove;
  std::set<std::string> groups(file.groups.begin(), file.groups.end());
  for (const auto& [name, r] : current) {
    if (groups.count(r.group) && !in_file.count(name)) remove.push_back(name);
  }
  c.deleted = static_cast<int>(remove.size());
  GF_TRY(SaveRules(upsert, remove));
  return c;
}

Status Notifier::PutRule(const Rule& rule) {
  std::lock_guard changes(rules_mu_);
  return SaveRules({rule}, {});
}

Status Notifier::DeleteRule(const std::string& name) {
  std::lock_guard changes(rules_mu_);
  {
    std::lock_guard lock(mu_);
    bool found = std::any_of(user_rules_.begin(), user_rules_.end(),
                             [&](const Rule& r) { return r.name == name; });
    if (!found) {
      bool builtin = std::any_of(base_rules_.begin(), base_rules_.end(),
                                 [&](const Rule& r) { return r.name == name; });
      return MakeError(ErrorCode::kNotFound,
                       builtin ? "'" + name +
                                     "' is a built-in rule: switch it off with a rule of its "
                                     "name and enabled: false"
                               : "no user rule '" + name + "'");
    }
  }
  return SaveRules({}, {name});
}

std::shared_ptr<const Snapshot> Notifier::LastSnapshot() const {
  std::lock_guard lock(mu_);
  return snapshot_;
}

Result<std::vector<RuleTest>> Notifier::TestRules(const std::vector<Rule>& rules,
                                                  SeriesReader& reader) const {
  std::shared_ptr<const Snapshot> snapshot;
  {
    std::lock_guard lock(mu_);
    snapshot = snapshot_;
  }
  if (!snapshot) {
    return MakeError(ErrorCode::kUnavailable,
                     "no evaluation has run yet: try again after the first health cycle");
  }
  // A fresh snapshot time, so that windows end now; the fleet is as the last cycle saw it.
  Snapshot now = *snapshot;
  now.now_ms = clock_->NowMs();
  Evaluator evaluator(now, reader);
  std::vector<RuleTest> out;
  for (const auto& rule : rules) {
    RuleTest t;
    t.rule = rule;
    std::map<std::string, RuleRun> runs;
    auto signals = ExprSignals({rule}, evaluator, &runs);
    t.run = runs[rule.name];
    Engine engine({rule});
    engine.Evaluate(now.now_ms, signals);  // pending, or firing when `for` is 0
    t.alerts = engine.Alerts();
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace gpufleet::alerting
