#pragma once
// Several controllers on one database: the leader's lease, the controllers that serve, and the
// fence that keeps a controller that lost the lease from writing as the leader.
//
// The lease is a row of the `leader` table, taken and renewed with one autocommit statement on
// the database's own clock, so the controllers' clocks do not matter. Its `epoch` grows with
// each new holder. While a FenceScope is alive on a thread, every store call of that thread
// runs in one transaction that first checks, with a shared lock on the lease row, that the
// lease is still this holder's at this epoch and not expired: a stale leader's call fails
// (kFailedPrecondition) and writes nothing, and a new holder's takeover waits for the calls
// that checked before it. On SQLite (one controller) the check is skipped.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace gpufleet::store {

class Database;

struct Lease {
  std::string holder;      // the controller holding it ("" when nobody ever has)
  int64_t epoch = 0;       // grows with each new holder
  int64_t expires_ms = 0;  // on the database's clock
  int64_t now_ms = 0;      // the database's clock when read
  bool held = false;       // by the holder that asked
};

struct ControllerRecord {
  std::string id;
  std::string url;  // where the others and the agents reach it (--advertise-url)
  int64_t started_ms = 0;
  int64_t last_seen_ms = 0;  // on the database's clock
  int64_t agents = 0;        // agents connected to it when last seen
};

// A command to an agent that is connected to another controller, kept in the database until
// the controller that has the agent has sent it (taken it) and put the agent's answer back
// (controller/relay.h).
struct RelayedCommand {
  int64_t id = 0;  // the command's id (runtime/command_bus.h)
  std::string node;
  std::string issuer;      // the controller that sent it
  std::string command;     // proto::Encode of the Command
  std::string taken_by;    // the controller that sent it to the agent ("" until one has)
  std::string result;      // proto::Encode of the agent's CommandResult ("" until answered)
  int64_t created_ms = 0;  // on the issuer's clock
};

class Coordination {
 public:
  virtual ~Coordination() = default;
  // Takes the lease `name` for `holder` when it is free, expired or already `holder`'s, and
  // renews it for `lease_ms`: one statement. `held` says whether `holder` has it now; the
  // other fields describe whoever does.
  virtual Result<Lease> TakeLease(const std::string& name, const std::string& holder,
                                  int64_t lease_ms) = 0;
  virtual Result<Lease> ReadLease(const std::string& name) = 0;
  // Gives the lease up at once when `holder` has it (a clean stop): the next one need not wait.
  virtual Status ReleaseLease(const std::string& name, const std::string& holder) = 0;
  // Records the controller as seen now (its started_ms and url as given).
  virtual Status SeeController(const ControllerRecord& c) = 0;
  virtual Result<std::vector<ControllerRecord>> ListControllers() = 0;
  // Removes a controller (a clean stop), and those not seen since `before_ms` (db clock).
  virtual Status ForgetController(const std::string& id, int64_t before_ms) = 0;

  // The relayed commands (RelayedCommand): posted by the issuer (or, answered already, by the
  // controller the agent answered when nobody there waited for it); those nobody took yet, and all
  // that `issuer` posted or, when `every_answer`, that anyone posted and that are answered;
  // taken by one controller only (whether `by` did); answered; forgotten by the issuer (only
  // while nobody took it, when `untaken_only`: whether it was).
  virtual Status PostCommand(const RelayedCommand& c) = 0;
  virtual Result<std::vector<RelayedCommand>> RelayedCommands(const std::string& issuer,
                                                              bool every_answer) = 0;
  virtual Result<bool> TakeCommand(int64_t id, const std::string& by) = 0;
  virtual Status AnswerCommand(int64_t id, const std::string& result) = 0;
  virtual Result<bool> ForgetCommand(int64_t id, bool untaken_only) = 0;
};

// The Coordination of an opened database (every store::Open database has one).
std::shared_ptr<Coordination> CoordinationOf(const std::shared_ptr<Database>& db);

// What a leader's store calls are fenced with.
struct Fence {
  std::string name;    // the lease
  std::string holder;  // this controller
  int64_t epoch = 0;   // the epoch this controller took
  // Called (on the calling thread) when a call finds the lease is no longer this epoch's.
  std::function<void()> on_lost;
};

// While alive, the thread's store calls are fenced with `fence` (null: not fenced). Nests.
class FenceScope {
 public:
  explicit FenceScope(const Fence* fence);
  ~FenceScope();
  FenceScope(const FenceScope&) = delete;
  FenceScope& operator=(const FenceScope&) = delete;

 private:
  const Fence* previous_;
};

const Fence* CurrentFence();  // the calling thread's, or null

// Changes that other processes commit to the tables controllers keep in memory (WatchedTables):
// triggers on those tables NOTIFY, and a feed LISTENs on a connection of its own. A change is
// another process's when its connection's application_name is not this store's (each opened
// store gets one of its own), so a controller is not told of its own writes.
class ChangeFeed {
 public:
  virtual ~ChangeFeed() = default;
};
// Gets the names of the tables changed, a batch at a time, on the feed's thread; after the
// feed connects (at start and after losing its connection), every watched table, since what
// changed meanwhile is unknown.
using OnChanges = std::function<void(const std::vector<std::string>& tables)>;
// Null where one controller is all there can be (SQLite).
std::unique_ptr<ChangeFeed> WatchChanges(const std::shared_ptr<Database>& db, OnChanges on_change);
const std::vector<std::string>& WatchedTables();

}  // namespace gpufleet::store
