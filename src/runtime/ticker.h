#pragma once
// The controller's periodic work as one table: each task's name, how often it runs, whether
// only the leader runs it, and what it does. One thread runs the table; each task's last run,
// duration and errors are kept for /metrics.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace gpufleet::runtime {

struct Task {
  std::string name;         // a metric label: lower case, '-' between words
  int64_t every_ms = 1000;  // 0: at every tick
  std::function<Status()> fn;
  // Runs only while this controller leads (set_leader); the others run on every controller.
  bool leader_only = false;
  int64_t first_ms = -1;  // the first run this long after Start(); -1: `every_ms`
  // Also runs at a tick where this says so, before `every_ms` is over (a log grown large).
  std::function<bool()> early;
};

struct TaskFigures {
  std::string name;
  int64_t every_ms = 0;
  bool leader_only = false;
  int64_t runs = 0;
  int64_t errors = 0;
  int64_t last_run_ms = 0;  // when the last run began; 0: not yet run
  double last_duration_s = 0;
  double total_duration_s = 0;
  std::string last_error;  // the last failed run's message
};

// Add() the tasks, then Start(). A tick every `tick_ms` runs each due task once, in the order
// added, on the ticker's thread; a task is due when its time has come (or `early` says so).
// A task's error is logged and counted, and the task runs again when next due. Thread-safe.
class Ticker {
 public:
  Ticker(std::shared_ptr<Clock> clock, int64_t tick_ms);
  ~Ticker();
  Ticker(const Ticker&) = delete;
  Ticker& operator=(const Ticker&) = delete;

  void Add(Task task);  // before Start()
  void Start();         // Arm() at the clock's time, and the thread
  // Sets each task's first run from `now` (tests drive RunDue by hand after it).
  void Arm(int64_t now);
  void Stop();  // joins; the task running finishes first
  // Whether leader_only tasks run (true until told otherwise: a lone controller leads).
  void set_leader(bool leader);
  bool leader() const;
  // Runs a leader_only task's fn inside `gate` (the controller's fence on its store calls): the
  // gate runs it and says true, or says false without running it (the lease is over), and the
  // run does not count. Before Start().
  using Gate = std::function<bool(const std::function<void()>&)>;
  void set_leader_gate(Gate gate);
  // One tick at `now`: every due task runs (Start()'s thread calls it; tests call it directly).
  void RunDue(int64_t now);
  std::vector<TaskFigures> Figures() const;

 private:
  struct Entry {
    Task task;
    int64_t next_ms = 0;
    TaskFigures figures;
  };
  void Loop();

  std::shared_ptr<Clock> clock_;
  int64_t tick_ms_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Entry> entries_;  // guarded by mu_ (a task's fn runs without it)
  bool started_ = false;        // guarded by mu_
  bool stopping_ = false;       // guarded by mu_
  bool leader_ = true;          // guarded by mu_
  Gate gate_;                   // set before Start()
  std::thread thread_;
};

}  // namespace gpufleet::runtime
