#pragma once
// Alert delivery with nothing lost: each evaluation's alert changes are written to the store
// together with one notification per channel (the outbox) before anything is sent; a sender
// thread posts due notifications and removes each only when its receiver answered 2xx, else
// retries it with backoff (1 s doubling to 5 min). Alert states are stored too, so a restart
// neither loses nor repeats a change. Alertmanager channels also get every firing alert again
// each minute, as Prometheus does, so that Alertmanager keeps it active. Thread-safe.

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "alerting/engine.h"
#include "alerting/eval.h"
#include "alerting/rules.h"
#include "common/clock.h"
#include "store/store.h"

namespace gpufleet::alerting {

// How apply changed the user rules.
struct RuleChanges {
  int created = 0, updated = 0, unchanged = 0, deleted = 0;
};

// A rule as listed: its status among the rule set and its last run.
struct RuleView {
  Rule rule;
  std::string status;          // "active", "disabled" (by a user rule) or "overridden" (built-in)
  std::optional<RuleRun> run;  // expression rules that ran
};

// What a rule would give now (rules test): its run, and the alerts, pending, that it would make.
struct RuleTest {
  Rule rule;
  RuleRun run;
  std::vector<Alert> alerts;
};

class Notifier {
 public:
  Notifier(store::AlertStore& store, std::shared_ptr<Clock> clock, std::string external_url,
           std::vector<Rule> rules = BuiltinRules());
  ~Notifier();
  Status Load();       // the user rules and the alert states of the last run
  Status LoadRules();  // the user rules alone (another controller changed them)
  // Where generatorURL links point: the controller's own address, known once it listens.
  void set_external_url(std::string url);
  // The data directory's secret.key: channels' signing keys are stored sealed under it.
  void set_secret_key(std::string key);
  // Where the teams' alerts go (TeamService::Channels): team -> channels. An alert whose `team`
  // label names a team goes to its channels as well as wherever the channels' routes send it;
  // a channel without a route of its own that teams name gets only their alerts.
  void set_team_channels(std::function<std::map<std::string, std::vector<std::string>>()> source);
  // The sender delivers only through `gate` (runtime::Ticker::Gate: runs the work and says
  // true, or says false when this controller does not lead): one controller notifies. Before
  // Start(); none: it always delivers.
  void set_gate(std::function<bool(const std::function<void()>&)> gate);
  void Start();  // the sender thread
  void Stop();

  // One evaluation: health rules over the health model's reports, expression rules over the
  // snapshot made from them and the series `reader` reads.
  Status Cycle(const std::vector<health::NodeHealth>& nodes,
               std::shared_ptr<const Snapshot> snapshot, SeriesReader& reader);
  std::vector<Alert> Alerts() const;
  // The last cycle's snapshot (the fleet as the rules saw it); null before the first cycle.
  std::shared_ptr<const Snapshot> LastSnapshot() const;

  // The rule set. Changes are stored first, then take effect at the next cycle; alerts of
  // rules that leave the set resolve.
  std::vector<RuleView> Rules() const;
  // The file's groups get exactly the file's rules: rules of those groups that the file no
  // longer has are deleted.
  Result<RuleChanges> ApplyRuleFile(const RuleFile& file);
  Status PutRule(const Rule& rule);            // creates or replaces the user rule of its name
  Status DeleteRule(const std::string& name);  // kNotFound when no user rule has the name
  // Evaluates `rules` now against the last cycle's snapshot and the current series, without
  // activating anything; kUnavailable before the first cycle.
  Result<std::vector<RuleTest>> TestRules(const std::vector<Rule>& rules,
                                          SeriesReader& reader) const;

  // Sends what is due now; returns how many were acknowledged. Public for tests.
  int Deliver();

  // The request bodies, public for tests.
  static std::string AlertmanagerBody(const std::vector<Alert>& alerts, const std::string& url);
  // Alertmanager's webhook payload for alerts of one group (`group` is the group's labels; for
  // a channel that does not group, `grouped` false, one alert and its name).
  static std::string WebhookBody(const std::vector<Alert>& alerts, const Labels& group,
                                 bool grouped, const std::string& receiver, const std::string& url);

 private:
  void Refresh();  // firing alerts to Alertmanager channels again
  std::map<std::string, std::set<std::string>> TeamsByChannel() const;
  void Prune(int64_t now);
  Status SaveRules(const std::vector<Rule>& upsert, const std::vector<std::string>& remove);
  store::AlertStore& store_;
  std::shared_ptr<Clock> clock_;
  mutable std::mutex mu_;
  std::string external_url_;  // guarded by mu_
  std::string secret_key_;    // guarded by mu_
  std::function<std::map<std::string, std::vector<std::string>>()> team_channels_;  // mu_
  Engine engine_;  // guarded by mu_
  const std::vector<Rule> base_rules_;
  std::vector<Rule> user_rules_;              // guarded by mu_; by name
  std::map<std::string, RuleRun> runs_;       // guarded by mu_; by rule name
  std::shared_ptr<const Snapshot> snapshot_;  // guarded by mu_; the last cycle's
  std::mutex rules_mu_;                       // one rule change at a time
  std::function<bool(const std::function<void()>&)> gate_;
  std::thread sender_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  int64_t next_refresh_ms_ = 0;
  int64_t next_prune_ms_ = 0;  // guarded by mu_
};

}  // namespace gpufleet::alerting
