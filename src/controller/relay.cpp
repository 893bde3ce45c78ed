#include "controller/relay.h"

#include <spdlog/spdlog.h>

#include "proto/proto.h"
#include "store/lease.h"

namespace gpufleet {

CommandRelay::CommandRelay(std::string self, std::shared_ptr<store::Coordination> db,
                           runtime::CommandBus& bus, std::shared_ptr<Clock> clock, Hooks hooks)
    : self_(std::move(self)),
      db_(std::move(db)),
      bus_(bus),
      clock_(std::move(clock)),
      hooks_(std::move(hooks)) {}

Status CommandRelay::Send(const std::string& node, const proto::Command& command) {
  Status sent = hooks_.local(node, command);
  if (sent.ok() || sent.error().code != ErrorCode::kConflict || hooks_.alone()) return sent;
  store::RelayedCommand c{command.id, node, self_,          proto::Encode(proto::Message(command)),
                          "",         "",   clock_->NowMs()};
  Status posted = db_->PostCommand(c);
  if (!posted.ok()) return posted;
  spdlog::debug("relay: command {} ({}) to {} posted for the controller that has its agent",
                command.id, command.action, node);
  return {};
}

void CommandRelay::OnResult(const std::string& node, const proto::CommandResult& result) {
  Status s = db_->AnswerCommand(result.id, proto::Encode(proto::Message(result)));
  if (!s.ok()) {
    spdlog::warn("relay: {}'s answer to command {} not stored: {}", node, result.id,
                 s.error().message);
  }
}

void CommandRelay::OnUnrouted(const std::string& node, const proto::CommandResult& result) {
  if (!proto::IsNodeAction(result.action) || hooks_.alone() || hooks_.leading()) {
    spdlog::debug("commands: {}'s answer to command {} ({}) is not waited for", node, result.id,
                  result.action);
    return;
  }
  const std::string text = proto::Encode(proto::Message(result));
  Status kept = db_->PostCommand({result.id, node, "", "", self_, text, clock_->NowMs()});
  if (!kept.ok()) kept = db_->AnswerCommand(result.id, text);  // a relayed one: already there
  if (!kept.ok()) {
    spdlog::warn("relay: {}'s answer to command {} not stored: {}", node, result.id,
                 kept.error().message);
  } else {
    spdlog::info("relay: {}'s answer to command {} ({}) kept for the leader", node, result.id,
                 result.action);
  }
}

void CommandRelay::Poll() {
  std::lock_guard lock(poll_mu_);
  const bool leading = hooks_.leading();
  auto rows = db_->RelayedCommands(self_, leading);
  if (!rows.ok()) {
    spdlog::warn("relay: cannot read the relayed commands: {}", rows.error().message);
    return;
  }
  const int64_t now = clock_->NowMs();
  for (const auto& c : rows.value()) {
    auto decoded = proto::Decode(c.result.empty() ? c.command : c.result);
    if (!c.result.empty()) {  // an answer: to whoever waits for it here
      if (c.issuer != self_ && !leading) continue;
      if (auto* r = decoded.ok() ? std::get_if<proto::CommandResult>(&decoded.value()) : nullptr) {
        bus_.OnResult(c.node, *r);
      }
      (void)db_->ForgetCommand(c.id, false);
      continue;
    }
    auto* cmd = decoded.ok() ? std::get_if<proto::Command>(&decoded.value()) : nullptr;
    if (c.taken_by.empty() && cmd && hooks_.has_agent(c.node)) {
      auto took = db_->TakeCommand(c.id, self_);
      if (!took.ok() || !took.value()) continue;  // another controller has it
      bus_.Claim(c.id, this);
      Status sent = hooks_.local(c.node, *cmd);
      if (!sent.ok()) {
        proto::CommandResult failed{c.id, cmd->gpu, cmd->action, false, sent.error().message};
        bus_.OnResult(c.node, failed);
      } else {
        spdlog::debug("relay: sent {}'s command {} ({}) to node {}", c.issuer, c.id, cmd->action,
                      c.node);
      }
      continue;
    }
    if (c.issuer != self_) continue;
    if (c.taken_by.empty() && now - c.created_ms > kTakeMs) {
      proto::CommandResult failed{c.id, cmd ? cmd->gpu : 0, cmd ? cmd->action : "", false,
                                  "no controller has the agent of node " + c.node + " connected"};
      auto withdrawn = db_->ForgetCommand(c.id, true);  // unless taken meanwhile
      if (withdrawn.ok() && withdrawn.value()) bus_.OnResult(c.node, failed);
    } else if (now - c.created_ms > kKeepMs) {
      (void)db_->ForgetCommand(c.id, false);
    }
  }
}

}  // namespace gpufleet
