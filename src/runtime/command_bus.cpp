#include "runtime/command_bus.h"

#include <spdlog/spdlog.h>

#include "proto/proto.h"

namespace gpufleet::runtime {

CommandBus::CommandBus(std::shared_ptr<Clock> clock)
    : clock_(std::move(clock)), next_id_(clock_->NowMs() * 4096) {}

void CommandBus::set_transport(Transport transport) {
  std::lock_guard lock(mu_);
  transport_ = std::move(transport);
}

int64_t CommandBus::Issue(CommandOwner* owner) {
  const int64_t now = clock_->NowMs();
  std::lock_guard lock(mu_);
  int64_t id = next_id_++;
  if (owner) {
    routes_[id] = {owner, now};
    Prune(now);
  }
  return id;
}

void CommandBus::Claim(int64_t id, CommandOwner* owner) {
  if (!owner) return;
  const int64_t now = clock_->NowMs();
  std::lock_guard lock(mu_);
  routes_[id] = {owner, now};
  next_id_ = std::max(next_id_, id + 1);
}

Status CommandBus::Send(const std::string& node, const proto::Command& command) {
  Transport transport;
  {
    std::lock_guard lock(mu_);
    transport = transport_;
  }
  if (!transport) return MakeError(ErrorCode::kUnavailable, "no agent connections yet");
  return transport(node, command);
}

Status CommandBus::Send(const std::string& node, proto::Command& command, CommandOwner* owner) {
  command.id = Issue(owner);
  return Send(node, command);
}

void CommandBus::set_unrouted(Unrouted handler) {
  std::lock_guard lock(mu_);
  unrouted_ = std::move(handler);
}

void CommandBus::OnResult(const std::string& node, const proto::CommandResult& result) {
  CommandOwner* owner = nullptr;
  Unrouted unrouted;
  {
    std::lock_guard lock(mu_);
    auto it = routes_.find(result.id);
    if (it != routes_.end()) {
      owner = it->second.owner;
      routes_.erase(it);
    } else {
      unrouted = unrouted_;
    }
  }
  if (!owner && unrouted) return unrouted(node, result);
  if (!owner) {
    spdlog::debug("commands: {}'s answer to command {} ({}) is not waited for", node, result.id,
                  result.action);
    return;
  }
  owner->OnResult(node, result);
}

size_t CommandBus::pending() const {
  std::lock_guard lock(mu_);
  return routes_.size();
}

void CommandBus::Prune(int64_t now_ms) {
  while (!routes_.empty() &&
         (routes_.size() > kMaxPending || routes_.begin()->second.since_ms < now_ms - kPendingMs)) {
    routes_.erase(routes_.begin());
  }
}

}  // namespace gpufleet::runtime
