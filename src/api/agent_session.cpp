// An agent's WebSocket: hello, welcome, then its messages in and what the controller sends it
// out, through an outbox so that writes from other threads keep their order.

#include <spdlog/spdlog.h>

#include <boost/beast/websocket.hpp>
#include <chrono>
#include <optional>

#include "api/sessions.h"
#include "common/strings.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;

namespace gpufleet::api {

// A live agent connection as the rest of the server sees it: messages for the agent go into the
// outbox (on the connection's strand) and its writer sends them in order.
struct AgentConn {
  explicit AgentConn(asio::any_io_executor ex) : strand(ex), wake(ex) {}
  asio::any_io_executor strand;
  asio::steady_timer wake;         // cancelled to wake the writer
  std::deque<std::string> outbox;  // on strand
  bool closing = false;            // on strand
  bool writer_done = false;        // on strand
  // A frame read and not yet handled (it waits behind other agents' frames on the ingest
  // executor, or is being handled): the agent is alive, whatever its last handled heartbeat says.
  std::atomic<bool> frame_waiting{false};
};

bool AgentRegistry::FrameWaiting(const std::string& node) {
  std::lock_guard lock(mu_);
  auto it = conns_.find(node);
  return it != conns_.end() && it->second->frame_waiting.load(std::memory_order_relaxed);
}

bool AgentRegistry::Has(const std::string& node) {
  std::lock_guard lock(mu_);
  return conns_.count(node) > 0;
}

Status AgentRegistry::Send(const std::string& node, const proto::Message& message) {
  std::shared_ptr<AgentConn> conn;
  {
    std::lock_guard lock(mu_);
    auto it = conns_.find(node);
    if (it != conns_.end()) conn = it->second;
  }
  if (!conn) {
    return MakeError(ErrorCode::kConflict, "the agent of node '" + node + "' is not connected");
  }
  asio::post(conn->strand, [conn, text = proto::Encode(message)]() mutable {
    conn->outbox.push_back(std::move(text));
    conn->wake.cancel();
  });
  return {};
}

std::shared_ptr<AgentConn> AgentRegistry::Register(const std::string& node,
                                                   asio::any_io_executor ex) {
  auto conn = std::make_shared<AgentConn>(ex);
  std::lock_guard lock(mu_);
  conns_[node] = conn;
  return conn;
}

void AgentRegistry::Unregister(const std::string& node, const std::shared_ptr<AgentConn>& conn) {
  std::lock_guard lock(mu_);
  auto it = conns_.find(node);
  if (it != conns_.end() && it->second == conn) conns_.erase(it);
}

namespace {

// One frame from an agent, handled on the ingest executor: decoded, handed to the handler (a
// batch stored, a heartbeat noted) and the reply encoded, all off the I/O threads.
struct Frame {
  std::string_view text;  // the connection's read buffer, until the frame is handled
  std::string reply;      // encoded; empty: none
  bool close = false;     // the connection closes once the reply is out
};

void HandleFrame(proto::AgentHandler& agents, const std::string& node, Frame& frame) {
  auto msg = proto::Decode(frame.text);
  if (!msg.ok()) {
    // A frame that is no message: the agent is told why, and the connection closes.
    spdlog::warn("agent {}: bad message, closing: {}", node, Printable(msg.error().message));
    frame.reply = proto::Encode(proto::ErrorMessage{"invalid_argument", msg.error().message});
    frame.close = true;
    return;
  }
  std::optional<proto::Message> reply;
  try {
    reply = agents.OnMessage(node, msg.value());
  } catch (const std::exception& e) {  // a bug must not take the process down with it
    spdlog::error("agent {}: handling a message threw: {}", node, e.what());
    frame.close = true;
    return;
  }
  if (!reply) return;
  // Something the controller could not keep (telemetry while the disk is full): the agent
  // reconnects and sends again what was not acknowledged.
  frame.close = std::holds_alternative<proto::ErrorMessage>(*reply);
  frame.reply = proto::Encode(*reply);
}

// Sends what is queued for one agent, in order, until the connection closes.
asio::awaitable<void> AgentWriter(std::shared_ptr<AgentConn> conn,
                                  websocket::stream<net::Stream>& ws) {
  while (true) {
    while (!conn->outbox.empty()) {
      std::string text = std::move(conn->outbox.front());
      conn->outbox.pop_front();
      ws.text(true);
      auto [ec, n] =
          co_await ws.async_write(asio::buffer(text), asio::as_tuple(asio::use_awaitable));
      if (ec) conn->closing = true;
      if (conn->closing) break;
    }
    if (conn->closing) break;
    conn->wake.expires_at(asio::steady_timer::time_point::max());
    co_await conn->wake.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  conn->writer_done = true;
}

}  // namespace

asio::awaitable<void> ServeAgent(net::Stream stream, UpgradeRequest req, std::string remote,
                                 proto::AgentHandler& agents, AgentRegistry& registry,
                                 SignInGate gate, UnsignedConnections::Slot slot,
                                 asio::any_io_executor registrar, asio::any_io_executor ingest) {
  websocket::stream<net::Stream> ws(std::move(stream));
  ws.read_message_max(1 << 20);
  // The upgrade and the hello within the deadline, whatever else the client sends (pings
  // included): a connection that never says who it is does not stay.
  beast::get_lowest_layer(ws).expires_after(std::chrono::milliseconds(gate.first_message_ms));
  auto [aec] = co_await ws.async_accept(req, asio::as_tuple(asio::use_awaitable));
  if (aec) co_return;
  beast::flat_buffer buf;
  auto [hec, hn] = co_await ws.async_read(buf, asio::as_tuple(asio::use_awaitable));
  if (hec) co_return;
  slot.Release();
  beast::get_lowest_layer(ws).expires_never();
  // A ping after 30 s of silence; closed when nothing, not even the pong, comes in 60 s.
  ws.set_option(
      websocket::stream_base::timeout{std::chrono::seconds(30), std::chrono::seconds(60), true});
  auto first = proto::Decode(beast::buffers_to_string(buf.data()));
  buf.consume(buf.size());
  Result<proto::Welcome> welcome = MakeError(ErrorCode::kInvalidArgument, "");
  if (!first.ok()) {
    welcome = first.error();
  } else if (auto* hello = std::get_if<proto::Hello>(&first.value())) {
    std::optional<Result<proto::Welcome>> done;  // (a Result has no empty state)
    co_await asio::co_spawn(
        registrar,
        [&]() -> asio::awaitable<void> {
          done.emplace(agents.OnHello(*hello, remote));
          co_return;
        },
        asio::use_awaitable);
    welcome = std::move(*done);
  } else {
    welcome = MakeError(ErrorCode::kInvalidArgument, "the first message must be a hello");
  }
  std::string out;
  // Every refusal but the store's own outage counts against the address: a bad token, a
  // message that is no hello, a name that is not the token's to take.
  int64_t wait = 0;
  if (!welcome.ok() && welcome.error().code != ErrorCode::kUnavailable) {
    wait = gate.Failed(remote);
  }
  if (wait > 0) {
    out =
        proto::Encode(proto::ErrorMessage{"too_many_requests", SignInGate::Message(remote, wait)});
    ws.text(true);
    co_await ws.async_write(asio::buffer(out), asio::as_tuple(asio::use_awaitable));
    co_await ws.async_close(websocket::close_code::try_again_later,
                            asio::as_tuple(asio::use_awaitable));
    co_return;
  }
  if (!welcome.ok()) {
    spdlog::warn("agent from {} refused: {}", Printable(remote),
                 Printable(welcome.error().message));
    out = proto::Encode(proto::ErrorMessage{std::string(ErrorCodeName(welcome.error().code)),
                                            welcome.error().message});
    ws.text(true);
    co_await ws.async_write(asio::buffer(out), asio::as_tuple(asio::use_awaitable));
    co_await ws.async_close(websocket::close_code::policy_error,
                            asio::as_tuple(asio::use_awaitable));
    co_return;
  }
  std::string node = welcome->node;
  // Registered before anything else is awaited: the hello has made the node ready, and a
  // message sent to it from then on (an injection, a reset) waits in the outbox for the
  // writer, which starts after the welcome, instead of finding no connection.
  auto ex = co_await asio::this_coro::executor;  // named: see Send() in agent.cpp
  auto conn = registry.Register(node, ex);
  uint64_t connection = agents.OnConnected(node);
  out = proto::Encode(welcome.value());
  ws.text(true);
  auto [wec, wn] = co_await ws.async_write(asio::buffer(out), asio::as_tuple(asio::use_awaitable));
  if (wec) {
    registry.Unregister(node, conn);
    agents.OnClosed(node, connection);
    co_return;
  }
  // From here on, everything the agent is sent goes through its outbox and writer.
  asio::co_spawn(conn->strand, AgentWriter(conn, ws), asio::detached);
  // Each frame is handled on `ingest` while this coroutine waits: the I/O threads only move
  // bytes, so the API answers however many agents stream, and an agent has one frame in hand at
  // a time (the rest wait in its socket: back-pressure rather than a queue that grows).
  // A frame is handled where it was read, not copied: at 12,500 agents the copy each
  // connection kept was a batch's few KiB more apiece (issue 49). (Releasing the read buffer
  // between frames too was tried: the one run with it stored a third of the samples.)
  Frame frame;
  while (!conn->closing) {
    auto [rec, rn] = co_await ws.async_read(buf, asio::as_tuple(asio::use_awaitable));
    if (rec) break;
    auto data = buf.cdata();
    frame.text = std::string_view(static_cast<const char*>(data.data()), data.size());
    frame.reply.clear();
    frame.close = false;
    conn->frame_waiting.store(true, std::memory_order_relaxed);
    co_await asio::co_spawn(
        ingest,
        [&]() -> asio::awaitable<void> {
          HandleFrame(agents, node, frame);
          co_return;
        },
        asio::use_awaitable);
    conn->frame_waiting.store(false, std::memory_order_relaxed);
    frame.text = {};
    buf.consume(buf.size());
    if (!frame.reply.empty()) {
      conn->outbox.push_back(std::move(frame.reply));
      conn->wake.cancel();
    }
    if (frame.close) break;
  }
  // What was queued (the reason for a close above) goes out first, for a moment at most.
  asio::steady_timer flush(conn->strand);
  for (int i = 0; i < 100 && !conn->outbox.empty() && !conn->writer_done; ++i) {
    flush.expires_after(std::chrono::milliseconds(10));
    co_await flush.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  registry.Unregister(node, conn);
  conn->closing = true;
  conn->wake.cancel();
  beast::error_code ec;
  beast::get_lowest_layer(ws).socket().close(ec);
  asio::steady_timer poll(conn->strand);
  while (!conn->writer_done) {  // the writer uses `ws`, which lives in this frame
    poll.expires_after(std::chrono::milliseconds(5));
    co_await poll.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  agents.OnClosed(node, connection);
}

}  // namespace gpufleet::api
