#include "runtime/ticker.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

namespace gpufleet::runtime {

Ticker::Ticker(std::shared_ptr<Clock> clock, int64_t tick_ms)
    : clock_(std::move(clock)), tick_ms_(std::max<int64_t>(tick_ms, 1)) {}

Ticker::~Ticker() { Stop(); }

void Ticker::Add(Task task) {
  std::lock_guard lock(mu_);
  Entry e;
  e.figures.name = task.name;
  e.figures.every_ms = task.every_ms;
  e.figures.leader_only = task.leader_only;
  e.task = std::move(task);
  entries_.push_back(std::move(e));
}

void Ticker::Arm(int64_t now) {
  std::lock_guard lock(mu_);
  for (auto& e : entries_) {
    e.next_ms = now + (e.task.first_ms >= 0 ? e.task.first_ms : e.task.every_ms);
  }
}

void Ticker::Start() {
  Arm(clock_->NowMs());
  std::lock_guard lock(mu_);
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void Ticker::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Ticker::set_leader(bool leader) {
  std::lock_guard lock(mu_);
  leader_ = leader;
}

void Ticker::set_leader_gate(Gate gate) { gate_ = std::move(gate); }

bool Ticker::leader() const {
  std::lock_guard lock(mu_);
  return leader_;
}

void Ticker::Loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(tick_ms_));
    if (stopping_) break;
    lock.unlock();
    RunDue(clock_->NowMs());
    lock.lock();
  }
}

void Ticker::RunDue(int64_t now) {
  // Entries are only added before Start(), so an index stays valid while a task runs unlocked.
  size_t count;
  {
    std::lock_guard lock(mu_);
    count = entries_.size();
  }
  for (size_t i = 0; i < count; ++i) {
    std::function<Status()> fn;
    bool leader_only = false;
    {
      std::lock_guard lock(mu_);
      Entry& e = entries_[i];
      if (e.task.leader_only && !leader_) continue;
      bool due = now >= e.next_ms || (e.task.early && e.task.early());
      if (!due) continue;
      e.next_ms = now + e.task.every_ms;
      fn = e.task.fn;
      leader_only = e.task.leader_only;
    }
    auto begin = std::chrono::steady_clock::now();
    Status s;
    if (leader_only && gate_) {
      if (!gate_([&] { s = fn ? fn() : Status{}; })) continue;
    } else {
      s = fn ? fn() : Status{};
    }
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    std::lock_guard lock(mu_);
    TaskFigures& f = entries_[i].figures;
    f.runs++;
    f.last_run_ms = now;
    f.last_duration_s = took;
    f.total_duration_s += took;
    if (!s.ok()) {
      f.errors++;
      f.last_error = s.error().message;
      spdlog::error("{}: {}", f.name, s.error().message);
    }
  }
}

std::vector<TaskFigures> Ticker::Figures() const {
  std::lock_guard lock(mu_);
  std::vector<TaskFigures> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(e.figures);
  return out;
}

}  // namespace gpufleet::runtime
