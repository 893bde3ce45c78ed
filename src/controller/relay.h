#pragma once
// Several controllers on one database: a command to an agent that is connected to another
// controller goes through the database (store::RelayedCommand). The issuer posts it; the
// controller that has the agent takes it, sends it and puts the agent's answer back; the
// issuer reads the answer and hands it to the command's owner on its bus.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/result.h"
#include "runtime/command_bus.h"

namespace gpufleet::store {
class Coordination;
}

namespace gpufleet {

class CommandRelay final : public runtime::CommandOwner {
 public:
  struct Hooks {
    // Sends over this controller's connection to the node's agent (kConflict: not connected).
    std::function<Status(const std::string& node, const proto::Command&)> local;
    std::function<bool(const std::string& node)> has_agent;  // connected here
    std::function<bool()> alone;                             // no other controller is live
    std::function<bool()> leading;  // a leader reads the answers of every issuer
  };
  CommandRelay(std::string self, std::shared_ptr<store::Coordination> db, runtime::CommandBus& bus,
               std::shared_ptr<Clock> clock, Hooks hooks);

  // The bus's transport: the agent's connection here; else, while other controllers are live,
  // the database (an error only when it cannot be written).
  Status Send(const std::string& node, const proto::Command& command);
  // Sends the posted commands whose agents are connected here; hands the answers to this
  // controller's commands (leading: to anyone's) to the bus; fails those that no controller
  // took within kTakeMs; forgets those taken and never answered after kKeepMs.
  void Poll();
  // An answer to a command this controller took for another: into the database.
  void OnResult(const std::string& node, const proto::CommandResult& result) override;
  // An answer to a node action that nobody here waits for (the bus's unrouted handler): its
  // agent moved here from the controller that sent it, which may be gone. On a follower it goes
  // into the database for the leader, which has claimed the commands of its rollouts and node
  // operations; a leader, or a lone controller, drops it.
  void OnUnrouted(const std::string& node, const proto::CommandResult& result);

  static constexpr int64_t kTakeMs = 30'000;
  static constexpr int64_t kKeepMs = 86'400'000;

 private:
  const std::string self_;
  const std::shared_ptr<store::Coordination> db_;
  runtime::CommandBus& bus_;
  const std::shared_ptr<Clock> clock_;
  const Hooks hooks_;
  std::mutex poll_mu_;  // one Poll at a time (the change feed's thread and the ticker's)
};

}  // namespace gpufleet
