#include "runtime/leadership.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

namespace gpufleet::runtime {

namespace {

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Leadership::Leadership(std::shared_ptr<store::Coordination> coordination, LeadershipOptions options,
                       std::function<int64_t()> agents, std::function<void(bool leading)> on_change)
    : co_(std::move(coordination)),
      options_(std::move(options)),
      agents_(std::move(agents)),
      on_change_(std::move(on_change)) {}

Leadership::~Leadership() { Stop(); }

void Leadership::Start() {
  Round();
  thread_ = std::thread([this] { Loop(); });
}

void Leadership::Loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(leading_ ? options_.renew_ms : options_.try_ms));
    if (stopping_) break;
    lock.unlock();
    Round();
    lock.lock();
  }
}

void Leadership::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  bool was_leading;
  {
    std::lock_guard lock(mu_);
    was_leading = leading_;
    leading_ = false;
  }
  // The next controller takes over at its next try instead of when the lease runs out.
  if (was_leading) (void)co_->ReleaseLease(kLease, options_.id);
  (void)co_->ForgetController(options_.id, 0);
}

void Leadership::Round() {
  const int64_t began = SteadyMs();
  auto lease = co_->TakeLease(kLease, options_.id, options_.lease_ms);
  if (options_.sole && lease.ok()) lease->held = true;  // a stale row of a killed one aside
  std::unique_lock lock(mu_);
  if (!lease.ok()) {
    int64_t epoch = epoch_;
    bool was = leading_ && !options_.sole;
    lock.unlock();
    if (was) StepDown(epoch, "the lease could not be renewed: " + lease.error().message);
    if (options_.sole && !was && !leading()) {  // its first round: it leads all the same
      on_change_(true);
      lock.lock();
      leading_ = true;
    }
    spdlog::debug("leadership: {}", lease.error().message);
    return;
  }
  if (!seen_holder_.empty() && (lease->holder != seen_holder_ || lease->epoch != seen_epoch_)) {
    ++changes_;
    spdlog::info("leadership: {} leads at epoch {}", lease->holder, lease->epoch);
  }
  seen_holder_ = lease->holder;
  seen_epoch_ = lease->epoch;
  // A margin for the clocks' rates: 1 s of the default 15.
  const int64_t valid_until = began + options_.lease_ms - options_.lease_ms / 15;
  if (lease->held && leading_ && (epoch_ == lease->epoch || options_.sole)) {
    epoch_ = lease->epoch;
    valid_until_ms_ = valid_until;  // renewed
  } else if (lease->held) {
    // A new term: what the last leader left is loaded before the engines run.
    int64_t old = epoch_;
    bool was = leading_;
    lock.unlock();
    if (was) StepDown(old, "a new epoch");
    on_change_(true);
    lock.lock();
    leading_ = true;
    epoch_ = lease->epoch;
    valid_until_ms_ = valid_until;
    spdlog::info("leadership: this controller ({}) leads at epoch {}", options_.id, epoch_);
  } else if (leading_) {
    int64_t epoch = epoch_;
    lock.unlock();
    StepDown(epoch, "controller " + lease->holder + " holds the lease at epoch " +
                        std::to_string(lease->epoch));
    lock.lock();
  }
  lock.unlock();
  if (SteadyMs() >= next_see_ms_) {
    next_see_ms_ = SteadyMs() + options_.renew_ms;
    See();
  }
}

void Leadership::See() {
  store::ControllerRecord me{options_.id, options_.url, options_.started_ms, 0,
                             agents_ ? agents_() : 0};
  if (auto s = co_->SeeController(me); !s.ok()) {
    spdlog::warn("leadership: recording this controller: {}", s.error().message);
    return;
  }
  auto list = Controllers();
  if (!list.ok()) return;
  bool alone = true;
  for (const auto& c : list.value()) {
    if (c.record.id != options_.id && c.live) alone = false;
  }
  {
    std::lock_guard lock(mu_);
    alone_ = alone;
  }
  if (SteadyMs() >= next_forget_ms_) {  // those gone for a day leave the table
    next_forget_ms_ = SteadyMs() + 3'600'000;
    auto lease = co_->ReadLease(kLease);
    if (lease.ok()) (void)co_->ForgetController("", lease->now_ms - 86'400'000);
  }
}

void Leadership::StepDown(int64_t epoch, const std::string& why) {
  {
    std::lock_guard lock(mu_);
    if (!leading_ || epoch_ != epoch) return;
    leading_ = false;
  }
  spdlog::warn("leadership: this controller ({}) no longer leads (epoch {}): {}", options_.id,
               epoch, why);
  on_change_(false);
}

bool Leadership::Gate(const std::function<void()>& fn) {
  store::Fence fence;
  {
    std::unique_lock lock(mu_);
    if (!leading_) return false;
    if (!options_.sole && SteadyMs() >= valid_until_ms_) {
      int64_t epoch = epoch_;
      lock.unlock();
      StepDown(epoch, "the lease was not renewed in time");
      return false;
    }
    fence.name = kLease;
    fence.holder = options_.id;
    fence.epoch = epoch_;
    fence.on_lost = [this, epoch = epoch_] {
      StepDown(epoch, "a store call found the lease no longer this epoch's");
    };
  }
  store::FenceScope scope(&fence);
  fn();
  return true;
}

bool Leadership::leading() const {
  std::lock_guard lock(mu_);
  return leading_;
}

int64_t Leadership::epoch() const {
  std::lock_guard lock(mu_);
  return leading_ ? epoch_ : seen_epoch_;
}

int64_t Leadership::changes() const {
  std::lock_guard lock(mu_);
  return changes_;
}

bool Leadership::alone() const {
  std::lock_guard lock(mu_);
  return alone_;
}

Result<std::vector<ControllerView>> Leadership::Controllers() const {
  auto lease = co_->ReadLease(kLease);
  if (!lease.ok()) return lease.error();
  auto list = co_->ListControllers();
  if (!list.ok()) return list.error();
  std::vector<ControllerView> out;
  for (auto& r : list.value()) {
    ControllerView v;
    v.leader = r.id == lease->holder && lease->expires_ms > lease->now_ms;
    v.epoch = v.leader ? lease->epoch : 0;
    v.seen_ago_ms = std::max<int64_t>(0, lease->now_ms - r.last_seen_ms);
    v.live = v.seen_ago_ms <= 3 * options_.renew_ms;
    v.record = std::move(r);
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace gpufleet::runtime
