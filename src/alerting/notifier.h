#pragma once
// Alert delivery with nothing lost: each evaluation's alert changes are written to the store
// together with one notification per channel (the outbox) before anything is sent; a sender
// thread posts due notifications and removes each only when its receiver answered 2xx, else
// retries it with backoff (1 s doubling to 5 min). Alert states are stored too, so a restart
// neither loses nor repeats a change. Alertmanager channels also get every firing alert again
// each minute, as Prometheus does, so that Alertmanager keeps it active. Thread-safe.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "alerting/engine.h"
#include "common/clock.h"
#include "store/store.h"

namespace gpufleet::alerting {

class Notifier {
 public:
  Notifier(Store& store, std::shared_ptr<Clock> clock, std::string external_url,
           std::vector<Rule> rules = BuiltinRules());
  ~Notifier();
  Status Load();  // alert states of the last run
  // Where generatorURL links point: the controller's own address, known once it listens.
  void set_external_url(std::string url);
  void Start();  // the sender thread
  void Stop();

  // One evaluation over the health model's reports.
  Status Cycle(const std::vector<health::NodeHealth>& nodes);
  std::vector<Alert> Alerts() const;
  const std::vector<Rule>& rules() const { return engine_.rules(); }

  // Sends what is due now; returns how many were acknowledged. Public for tests.
  int Deliver();

  // The request bodies, public for tests.
  static std::string AlertmanagerBody(const std::vector<Alert>& alerts, const std::string& url);
  static std::string WebhookBody(const Alert& alert, const std::string& receiver,
                                 const std::string& url);

 private:
  void Refresh();  // firing alerts to Alertmanager channels again
  void Prune(int64_t now);
  Store& store_;
  std::shared_ptr<Clock> clock_;
  mutable std::mutex mu_;
  std::string external_url_;  // guarded by mu_
  Engine engine_;             // guarded by mu_
  std::thread sender_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  int64_t next_refresh_ms_ = 0;
  int64_t next_prune_ms_ = 0;  // guarded by mu_
};

}  // namespace gpufleet::alerting
