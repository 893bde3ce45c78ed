#pragma once
// Every command the controller sends to an agent goes through one bus: one id space, and each
// answer routed by its id to the component that sent the command.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/result.h"

namespace gpufleet::proto {
struct Command;
struct CommandResult;
}  // namespace gpufleet::proto

namespace gpufleet::runtime {

// A component that sends commands and wants their answers.
class CommandOwner {
 public:
  virtual ~CommandOwner() = default;
  // An agent's answer to a command this owner was issued; called without the bus's lock, on
  // the agent channel's thread.
  virtual void OnResult(const std::string& node, const proto::CommandResult& result) = 0;
};

// Ids start at the start time in milliseconds times 4096 and count up, so that an id is never
// issued twice across restarts (at fewer than 4096 commands a millisecond on average) and an
// answer to a command sent before a restart cannot reach the wrong owner. An owner that keeps
// its commands across a restart claims their ids again (Claim) to get their answers.
// Thread-safe; an owner is never called with the bus's lock held, so it may send from OnResult.
class CommandBus {
 public:
  using Transport = std::function<Status(const std::string& node, const proto::Command&)>;
  explicit CommandBus(std::shared_ptr<Clock> clock);
  // How commands reach agents (the API server's agent connections). Set before anything sends.
  void set_transport(Transport transport);

  // A new id; its answer goes to `owner` (null: nobody waits for it).
  int64_t Issue(CommandOwner* owner);
  // An id issued before a restart whose answer `owner` still waits for.
  void Claim(int64_t id, CommandOwner* owner);
  // Sends a command whose id was issued (kUnavailable without a transport; the transport's
  // error, kConflict, when the node's agent is not connected).
  Status Send(const std::string& node, const proto::Command& command);
  // Issues the command's id and sends it.
  Status Send(const std::string& node, proto::Command& command, CommandOwner* owner);
  // An agent's answer: to the owner of its id, once; an answer nobody here waits for goes to
  // the unrouted handler (another controller may wait for it), else is dropped.
  void OnResult(const std::string& node, const proto::CommandResult& result);
  using Unrouted = std::function<void(const std::string& node, const proto::CommandResult&)>;
  void set_unrouted(Unrouted handler);  // before anything sends

  // Routes kept for commands never answered (an agent gone) are dropped after this long, and
  // the oldest beyond kMaxPending.
  static constexpr int64_t kPendingMs = 7 * 86'400'000LL;
  static constexpr size_t kMaxPending = 1'000'000;
  size_t pending() const;

 private:
  struct Route {
    CommandOwner* owner;
    int64_t since_ms;
  };
  void Prune(int64_t now_ms);  // with mu_ held

  std::shared_ptr<Clock> clock_;
  mutable std::mutex mu_;
  int64_t next_id_;                  // guarded by mu_
  std::map<int64_t, Route> routes_;  // by id; guarded by mu_
  Transport transport_;              // guarded by mu_
  Unrouted unrouted_;                // guarded by mu_
};

}  // namespace gpufleet::runtime
