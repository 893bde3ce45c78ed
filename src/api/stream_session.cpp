// The dashboard's live stream. A browser's WebSocket cannot send an Authorization header, and
// a token in the URL would end up in logs and history, so the first message carries it:
// {"token": "..."}. The reply is {"type": "hello", "name", "role"} or
// {"type": "error", "message"} and a close; then every published event, as published.

#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>
#include <chrono>

#include "api/context.h"
#include "api/http_metrics.h"
#include "api/sessions.h"
#include "common/json_text.h"
#include "common/strings.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;

namespace gpufleet::api {

void EventHub::Publish(std::string json) {
  std::lock_guard lock(mu_);
  recent_.emplace_back(++seq_, std::move(json));
  if (recent_.size() > kKeep) recent_.pop_front();
}

uint64_t EventHub::Since(uint64_t seq, std::vector<std::string>& out) const {
  std::lock_guard lock(mu_);
  for (const auto& [s, text] : recent_) {
    if (s > seq) out.push_back(text);
  }
  return seq_;
}

namespace {

// Reads (and drops) what a stream client sends until it closes. A function, not a lambda:
// a coroutine lambda's captures die with the lambda, its parameters live in the frame.
asio::awaitable<void> StreamReader(websocket::stream<net::Stream>& ws, std::shared_ptr<bool> closed,
                                   std::shared_ptr<bool> done) {
  beast::flat_buffer buf;
  for (;;) {
    auto [ec, n] = co_await ws.async_read(buf, asio::as_tuple(asio::use_awaitable));
    if (ec) break;
    buf.consume(buf.size());
  }
  *closed = true;
  *done = true;
}

// Who the first message's token belongs to.
Result<Principal> Hello(const std::string& first, Authenticator& auth) {
  boost::system::error_code jec;
  auto parsed = boost::json::parse(first, jec);
  if (!jec && parsed.is_object()) {
    if (const auto* token = parsed.as_object().if_contains("token"); token && token->is_string()) {
      return auth.Check("Bearer " + std::string(token->as_string()));
    }
  }
  return MakeError(ErrorCode::kUnauthenticated, "the first message must be {\"token\": \"...\"}");
}

}  // namespace

int64_t SignInGate::Failed(const std::string& remote) {
  metrics.CountSignInFailure();
  int64_t wait = limiter.Failed(remote, clock.NowMs());
  if (wait > 0) metrics.CountSignInRefused();
  return wait;
}

std::string SignInGate::Message(const std::string& remote, int64_t wait_s) {
  return "too many failed sign-ins from " + Printable(remote) + ": try again in " +
         std::to_string(wait_s) + " s";
}

UnsignedConnections::Slot UnsignedConnections::Acquire(const std::string& remote) {
  std::lock_guard lock(mu_);
  int& n = open_[remote];
  if (n >= limit_) return Slot();
  ++n;
  return Slot(this, remote);
}

void UnsignedConnections::Slot::Release() {
  if (!owner_) return;
  std::lock_guard lock(owner_->mu_);
  auto it = owner_->open_.find(remote_);
  if (it != owner_->open_.end() && --it->second <= 0) owner_->open_.erase(it);
  owner_ = nullptr;
}

asio::awaitable<void> ServeStream(net::Stream stream, UpgradeRequest req, std::string remote,
                                  Authenticator& auth, const EventHub& hub, SignInGate gate,
                                  UnsignedConnections::Slot slot) {
  websocket::stream<net::Stream> ws(std::move(stream));
  ws.read_message_max(64 * 1024);
  // The upgrade and the first message within the deadline, pings or not; then the idle rule.
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
  Result<Principal> who = Hello(beast::buffers_to_string(buf.data()), auth);
  if (!who.ok() && who.error().code == ErrorCode::kUnauthenticated) {
    if (int64_t wait = gate.Failed(remote); wait > 0) {
      who = MakeError(ErrorCode::kUnauthenticated, SignInGate::Message(remote, wait));
    }
  }
  buf.consume(buf.size());
  std::string out;
  ws.text(true);
  if (!who.ok()) {
    out = JsonText(boost::json::object{{"type", "error"}, {"message", who.error().message}});
    co_await ws.async_write(asio::buffer(out), asio::as_tuple(asio::use_awaitable));
    co_await ws.async_close(websocket::close_code::policy_error,
                            asio::as_tuple(asio::use_awaitable));
    co_return;
  }
  out = JsonText(
      boost::json::object{{"type", "hello"}, {"name", who->name}, {"role", ToString(who->role)}});
  std::vector<std::string> pending;
  uint64_t seq = hub.Since(~uint64_t{0}, pending);
  auto [wec, wn] = co_await ws.async_write(asio::buffer(out), asio::as_tuple(asio::use_awaitable));
  if (wec) co_return;
  // A reader notices the close (and answers pings); the loop below writes what is published.
  auto closed = std::make_shared<bool>(false);
  auto reader_done = std::make_shared<bool>(false);
  auto ex = co_await asio::this_coro::executor;  // named: see Send() in agent.cpp
  asio::co_spawn(ex, StreamReader(ws, closed, reader_done), asio::detached);
  asio::steady_timer tick(ex);
  while (!*closed) {
    pending.clear();
    seq = hub.Since(seq, pending);
    for (const auto& text : pending) {
      ws.text(true);
      auto [ec, n] =
          co_await ws.async_write(asio::buffer(text), asio::as_tuple(asio::use_awaitable));
      if (ec) {
        *closed = true;
        break;
      }
    }
    tick.expires_after(std::chrono::milliseconds(200));
    co_await tick.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  beast::error_code ec;
  beast::get_lowest_layer(ws).socket().close(ec);
  while (!*reader_done) {  // the reader uses `ws`, which lives in this frame
    tick.expires_after(std::chrono::milliseconds(5));
    co_await tick.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

}  // namespace gpufleet::api
