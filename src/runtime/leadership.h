#pragma once
// Which controller leads: the one holding the `engines` lease (store/lease.h). Every controller
// runs one: it registers itself in the `controllers` table, takes the lease when it is free or
// expired (a follower tries every `try_ms`), renews it every `renew_ms` while it leads, and
// stops leading on any renewal failure, when another controller holds the lease, when a fenced
// store call finds the epoch over, or when `lease_ms` (less a fifteenth: 1 s of 15) has passed
// since its last renewal began without another one (a stuck database, a paused process), whichever
// is first. The engines run through Gate(): the ticker's leader-only tasks and the notifier's
// sender.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "store/lease.h"

namespace gpufleet::runtime {

struct LeadershipOptions {
  std::string id;   // this controller, unique among those sharing the database
  std::string url;  // where it is reached (--advertise-url)
  int64_t started_ms = 0;
  int64_t lease_ms = 15'000;
  int64_t renew_ms = 5'000;  // a leader renews this often; the controllers row is seen as often
  int64_t try_ms = 1'000;    // a follower tries to take the lease this often
  // The only controller there can be (SQLite, whose file lock keeps out a second one): it leads
  // from its first round and never steps down; the lease row is kept for the record.
  bool sole = false;
};

// A controller as GET /api/v1/controllers lists it.
struct ControllerView {
  store::ControllerRecord record;
  bool leader = false;
  int64_t epoch = 0;  // the lease's epoch when it leads, else 0
  bool live = false;  // seen within three renewals
  int64_t seen_ago_ms = 0;
};

class Leadership {
 public:
  static constexpr const char* kLease = "engines";
  // `agents`: how many agents are connected to this controller now. `on_change(leading)` runs
  // on the leadership thread when this controller starts leading (before any Gate() opens, so
  // it can load what the last leader left) and when it stops.
  Leadership(std::shared_ptr<store::Coordination> coordination, LeadershipOptions options,
             std::function<int64_t()> agents, std::function<void(bool leading)> on_change);
  ~Leadership();
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  void set_url(std::string url) { options_.url = std::move(url); }  // before Start()
  void Start();  // one round now (a lone controller leads from its first tick), then the thread
  void Stop();   // gives the lease up and leaves the controllers table
  void Round();  // one round by hand (tests)

  // Runs fn as the leader, under the fence of this epoch, and says true; or says false at once
  // when this controller does not lead (runtime::Ticker::Gate).
  bool Gate(const std::function<void()>& fn);
  bool leading() const;
  int64_t epoch() const;    // this controller's epoch while it leads; else the last seen leader's
  int64_t changes() const;  // leader changes seen since this controller started
  // No other controller seen live at the last round.
  bool alone() const;
  Result<std::vector<ControllerView>> Controllers() const;
  const LeadershipOptions& options() const { return options_; }

 private:
  void Loop();
  void StepDown(int64_t epoch, const std::string& why);  // when still leading at `epoch`
  void See();

  const std::shared_ptr<store::Coordination> co_;
  LeadershipOptions options_;  // url set before Start()
  const std::function<int64_t()> agents_;
  const std::function<void(bool)> on_change_;

  mutable std::mutex mu_;
  bool leading_ = false;        // guarded by mu_
  int64_t epoch_ = 0;           // guarded by mu_
  int64_t valid_until_ms_ = 0;  // steady clock; guarded by mu_
  std::string seen_holder_;     // guarded by mu_
  int64_t seen_epoch_ = 0;      // guarded by mu_
  int64_t changes_ = 0;         // guarded by mu_
  bool alone_ = true;           // guarded by mu_
  int64_t next_see_ms_ = 0;     // steady clock; the leadership thread's
  int64_t next_forget_ms_ = 0;  // steady clock; the leadership thread's
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace gpufleet::runtime
