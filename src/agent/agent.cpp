#include "agent/agent.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "agent/session.h"
#include "common/clock.h"
#include "common/command.h"
#include "common/json_text.h"
#include "common/url.h"
#include "net/stream.h"
#include "proto/proto.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

namespace gpufleet {
namespace {

// A connection that failed its TLS handshake or was declined by the controller: logged as an
// error (a certificate problem is an operator's to fix), where other failures are the
// network's and logged at debug.
struct TlsFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

namespace agent_internal {

asio::awaitable<void> Session::Loop() {
  int attempt = 0;
  while (!Stopping()) {
    bool welcomed = co_await ConnectOnce();
    if (Stopping()) break;
    if (reboot_for_ms_ > 0) {  // off for the reboot, then up with what was installed
      rebooting_ = true;
      timer_.expires_after(std::chrono::milliseconds(std::exchange(reboot_for_ms_, 0)));
      co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
      backend_->Boot();
      rebooting_ = false;
      attempt = 0;
      continue;
    }
    if (welcomed) attempt = 0;
    stats_.failures += welcomed ? 0 : 1;
    // Full jitter over an exponentially growing, capped window.
    int64_t cap = std::min<int64_t>(options_.backoff_max_ms, int64_t(options_.backoff_initial_ms)
                                                                 << std::min(attempt, 16));
    ++attempt;
    std::uniform_int_distribution<int64_t> jitter(cap / 2, cap);
    timer_.expires_after(std::chrono::milliseconds(jitter(rng_)));
    co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

// What the agent says first: its credentials, facts and GPUs (kept as last sent).
proto::Hello Session::MakeHello() {
  proto::Hello hello;
  hello.node_token = options_.node_token;
  hello.join_token = options_.join_token;
  hello.facts = Facts();
  hello.simulated = backend_->Simulated();
  auto gpus = backend_->Inventory();
  if (!gpus.ok()) {
    spdlog::error("agent: cannot list GPUs: {}", gpus.error().message);
  } else {
    hello.gpus = gpus.value();
  }
  last_inventory_ = hello.gpus;
  last_facts_ = hello.facts;
  return hello;
}

asio::awaitable<bool> Session::ConnectOnce() {
  bool welcomed = false;
  bool counted = false;
  try {
    const std::string& url = controllers_.front();
    auto parsed = ParseHttpUrl(url, "8080");
    if (!parsed.ok()) throw std::invalid_argument(parsed.error().message);
    HttpUrl ep = std::move(parsed).value();
    net::TlsContext tls;
    if (ep.tls()) {
      tls = options_.tls;
      if (!tls) {
        auto fallback = net::DefaultClientContext();
        if (!fallback.ok()) throw std::invalid_argument(fallback.error().message);
        tls = fallback.value();
      }
    }
    tcp::resolver resolver(ex_);
    auto results = co_await resolver.async_resolve(ep.host, ep.port, asio::use_awaitable);
    ws_ = std::make_unique<websocket::stream<net::Stream>>(beast::tcp_stream(ex_), tls);
    beast::get_lowest_layer(*ws_).expires_after(std::chrono::seconds(10));
    co_await beast::get_lowest_layer(*ws_).async_connect(results, asio::use_awaitable);
    if (tls) co_await TlsHandshake(ep);
    websocket::response_type upgrade;
    auto [hec] = co_await ws_->async_handshake(upgrade, ep.host + ":" + ep.port, "/api/v1/agent",
                                               asio::as_tuple(asio::use_awaitable));
    if (hec == websocket::error::upgrade_declined) {  // e.g. 403: no client certificate
      throw TlsFailure(url + " declined the agent channel: HTTP " +
                       std::to_string(upgrade.result_int()) + " " + upgrade.body());
    }
    if (hec) throw boost::system::system_error(hec);
    beast::get_lowest_layer(*ws_).expires_never();
    // Pings when the controller is silent; a half-open connection is dropped in 90 s.
    ws_->set_option(
        websocket::stream_base::timeout{std::chrono::seconds(30), std::chrono::seconds(90), true});

    proto::Hello hello = MakeHello();
    proto::Message hello_msg = hello;
    co_await Send(hello_msg);

    auto reply = co_await Receive();
    if (!reply.ok()) throw std::runtime_error(reply.error().message);
    if (auto* err = std::get_if<proto::ErrorMessage>(&reply.value())) {
      spdlog::error("agent {}: controller refused registration: {} ({})", hello.facts.hostname,
                    err->message, err->code);
      if (err->code == "unauthenticated" && !options_.node_token.empty()) {
        options_.node_token.clear();  // stale credential: fall back to the join token
      }
      co_return false;
    }
    auto* welcome = std::get_if<proto::Welcome>(&reply.value());
    if (!welcome) throw std::runtime_error("expected a welcome");
    welcomed = true;
    ++stats_.welcomes;
    ++stats_.connected;
    counted = true;
    if (!welcome->node_token.empty()) {
      options_.node_token = welcome->node_token;
      if (options_.on_node_token) options_.on_node_token(welcome->node_token);
    }
    spdlog::debug("agent {}: registered as {} in pool {} at {}", hello.facts.hostname,
                  welcome->node, welcome->pool, url);
    co_await Serve(std::max(100, welcome->heartbeat_interval_ms));
  } catch (const TlsFailure& e) {
    // Said once per streak, not on every retry: the same failure comes back until fixed.
    if (!Stopping() && last_tls_failure_ != e.what()) {
      spdlog::error("agent {}: {}", options_.hostname, e.what());
    }
    last_tls_failure_ = e.what();
  } catch (const std::exception& e) {
    if (!Stopping()) spdlog::debug("agent: connection ended: {}", e.what());
  }
  if (counted) --stats_.connected;
  ws_.reset();
  if (controllers_.size() > 1 && !Stopping()) {
    controllers_.push_back(std::move(controllers_.front()));
    controllers_.pop_front();
    ++stats_.failovers;
  }
  co_return welcomed;
}

asio::awaitable<void> Session::Serve(int heartbeat_ms) {
  auto done = std::make_shared<bool>(false);
  asio::co_spawn(
      ex_,
      [self = shared_from_this(), done]() -> asio::awaitable<void> {
        beast::flat_buffer buf;
        for (;;) {
          auto [ec, n] = co_await self->ws_->async_read(buf, asio::as_tuple(asio::use_awaitable));
          if (ec) break;
          auto msg = proto::Decode(beast::buffers_to_string(buf.data()));
          buf.consume(n);
          if (msg.ok()) {
            if (auto* ack = std::get_if<proto::Ack>(&msg.value())) self->Acked(ack->seq);
            if (auto* cmd = std::get_if<proto::Command>(&msg.value())) self->Run(*cmd);
          }
        }
        *done = true;
        self->timer_.cancel();
      },
      asio::detached);
  int64_t seq = 0;
  int64_t next_inventory = RealClock()->NowMs() + options_.inventory_interval_ms;
  int64_t next_heartbeat = RealClock()->NowMs() + heartbeat_ms;
  int tick = options_.sample_interval_ms > 0 ? std::min(heartbeat_ms, options_.sample_interval_ms)
                                             : heartbeat_ms;
  sent_seq_ = acked_seq_;  // a new connection: send everything not yet acknowledged
  auto* ws = ws_.get();
  while (!*done && !Stopping()) {
    co_await SendSamples();
    while (!results_.empty()) {
      proto::Message result = std::move(results_.front());
      results_.pop_front();
      co_await Send(result);
    }
    if (reboot_for_ms_ > 0) break;  // a simulated reboot: the node goes away
    timer_.expires_after(std::chrono::milliseconds(tick));
    co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
    if (*done || Stopping() || ws_.get() != ws) break;
    int64_t now = RealClock()->NowMs();
    if (now >= next_inventory || inventory_due_) {
      inventory_due_ = false;
      next_inventory = now + options_.inventory_interval_ms;
      auto gpus = backend_->Inventory();
      NodeFacts facts = Facts();
      bool gpus_changed = gpus.ok() && !SameInventory(gpus.value(), last_inventory_);
      if (gpus_changed || facts != last_facts_) {
        if (gpus_changed) last_inventory_ = gpus.value();
        proto::Inventory update{last_inventory_, std::nullopt};
        if (facts != last_facts_) update.facts = last_facts_ = std::move(facts);
        proto::Message inventory = std::move(update);
        co_await Send(inventory);
      }
    }
    if (now >= next_heartbeat) {
      next_heartbeat = now + heartbeat_ms;
      proto::Message heartbeat = proto::Heartbeat{++seq, now};
      co_await Send(heartbeat);
    }
  }
  beast::error_code ec;
  beast::get_lowest_layer(*ws_).socket().close(ec);
  while (!*done) {  // let the reader finish before the stream goes away
    timer_.expires_after(std::chrono::milliseconds(5));
    co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

asio::awaitable<void> Session::Collect() {
  int64_t interval = options_.sample_interval_ms;
  size_t gpu_count = 0;
  while (!Stopping()) {
    int64_t now = RealClock()->NowMs();
    int64_t next = (now / interval + 1) * interval;
    sample_timer_.expires_after(std::chrono::milliseconds(next - now));
    co_await sample_timer_.async_wait(asio::as_tuple(asio::use_awaitable));
    if (Stopping()) break;
    if (rebooting_) continue;  // a node that is off samples nothing
    if (gpu_count == 0 || next % 60'000 == 0) {
      auto gpus = backend_->Inventory();
      gpu_count = gpus.ok() ? gpus->size() : 0;
    }
    Batch b;
    b.seq = ++batch_seq_;
    for (size_t i = 0; i < gpu_count; ++i) {
      SampleRow row = backend_->Sample(static_cast<int>(i), next);
      if (row.present) b.rows.push_back(row);
    }
    b.events = backend_->Events(next);
    stats_.rows_sampled += static_cast<int64_t>(b.rows.size());
    pending_rows_ += b.rows.size();
    pending_.push_back(std::move(b));
    size_t max_rows = static_cast<size_t>(options_.buffer_seconds) *
                      std::max<size_t>(gpu_count, 1) * 1000 / static_cast<size_t>(interval);
    while (pending_rows_ > max_rows && !pending_.empty()) {
      stats_.rows_dropped += static_cast<int64_t>(pending_.front().rows.size());
      pending_rows_ -= pending_.front().rows.size();
      acked_seq_ = std::max(acked_seq_, pending_.front().seq);
      pending_.pop_front();
    }
  }
}

asio::awaitable<void> Session::SendSamples() {
  while (ws_) {
    proto::Samples msg;
    for (const Batch& b : pending_) {
      if (b.seq <= sent_seq_) continue;
      msg.rows.insert(msg.rows.end(), b.rows.begin(), b.rows.end());
      msg.events.insert(msg.events.end(), b.events.begin(), b.events.end());
      msg.seq = b.seq;
      if (msg.rows.size() >= 64 * 8) break;
    }
    if (msg.seq == 0) co_return;
    sent_seq_ = msg.seq;
    proto::Message batch = std::move(msg);
    co_await Send(batch);
  }
}

void Session::Run(const proto::Command& cmd) {
  if (proto::IsNodeAction(cmd.action)) {
    NodeAction(cmd);
    return;
  }
  if (cmd.action == proto::kApplySettingAction) {
    ApplySetting(cmd);
    return;
  }
  if (cmd.action == proto::kSimLoadAction) {
    if (Status s = backend_->SetLoads(cmd.loads); !s.ok()) {
      spdlog::warn("agent: command {} refused: {}", cmd.id, s.error().message);
    }
    return;
  }
  if (!cmd.action.empty()) {
    Remediate(cmd);
    return;
  }
  Status s = backend_->Inject(cmd.gpu, cmd.inject);
  if (!s.ok()) {
    spdlog::warn("agent: command {} refused: {}", cmd.id, s.error().message);
    return;
  }
  inventory_due_ = true;
}

void Session::Acked(int64_t seq) {
  acked_seq_ = std::max(acked_seq_, seq);
  while (!pending_.empty() && pending_.front().seq <= seq) {
    stats_.rows_acked += static_cast<int64_t>(pending_.front().rows.size());
    pending_rows_ -= pending_.front().rows.size();
    pending_.pop_front();
  }
}

bool Session::SameInventory(const std::vector<Gpu>& a, const std::vector<Gpu>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].uuid != b[i].uuid || a[i].error != b[i].error || a[i].name != b[i].name ||
        a[i].mig_mode != b[i].mig_mode || a[i].mig_layout != b[i].mig_layout ||
        a[i].settings != b[i].settings || a[i].vbios_version != b[i].vbios_version) {
      return false;
    }
  }
  return true;
}

asio::awaitable<void> Session::TlsHandshake(const HttpUrl& ep) {
  std::string where = "https://" + ep.host + ":" + ep.port;
  net::Stream& stream = ws_->next_layer();
  std::string why;
  if (!net::PrepareClient(stream, ep.host, why)) throw TlsFailure(where + ": TLS: " + why);
  auto [ec] = co_await stream.tls_stream().async_handshake(asio::ssl::stream_base::client,
                                                           asio::as_tuple(asio::use_awaitable));
  if (ec) throw TlsFailure(where + ": TLS: " + net::DescribeTlsError(stream, ec));
  if (!net::Verifies(options_.tls) && options_.tls) {
    spdlog::debug(
        "agent {}: connected to {} without checking its certificate "
        "(--insecure-skip-verify)",
        options_.hostname, where);
  }
  last_tls_failure_.clear();
}

asio::awaitable<void> Session::Send(const proto::Message& m) {
  out_ = proto::Encode(m);
  ws_->text(true);
  co_await ws_->async_write(asio::buffer(out_), asio::use_awaitable);
}

asio::awaitable<Result<proto::Message>> Session::Receive() {
  beast::flat_buffer buf;
  beast::get_lowest_layer(*ws_).expires_after(std::chrono::seconds(30));
  co_await ws_->async_read(buf, asio::use_awaitable);
  // Disarm: a deadline left on the stream would cut the connection 30 s later.
  beast::get_lowest_layer(*ws_).expires_never();
  co_return proto::Decode(beast::buffers_to_string(buf.data()));
}

}  // namespace agent_internal

using agent_internal::Session;

struct AgentRunner::Impl {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::atomic<bool> stopping{false};
  AgentStats stats;
  std::mutex mu;
  std::vector<std::shared_ptr<Session>> sessions;  // guarded by mu
};

AgentRunner::AgentRunner() : impl_(std::make_unique<Impl>()) {}
AgentRunner::~AgentRunner() { Stop(); }

void AgentRunner::Add(AgentOptions options, std::unique_ptr<GpuBackend> backend) {
  auto s = std::make_shared<Session>(asio::make_strand(impl_->io), std::move(options),
                                     std::move(backend), impl_->stats, impl_->stopping);
  {
    std::lock_guard lock(impl_->mu);
    impl_->sessions.push_back(s);
  }
  s->Start();
}

bool AgentRunner::Remove(const std::string& hostname) {
  std::shared_ptr<Session> found;
  {
    std::lock_guard lock(impl_->mu);
    auto it = std::find_if(impl_->sessions.begin(), impl_->sessions.end(),
                           [&](const auto& s) { return s->hostname() == hostname; });
    if (it == impl_->sessions.end()) return false;
    found = *it;
    impl_->sessions.erase(it);
  }
  found->Remove();
  return true;
}

bool AgentRunner::Has(const std::string& hostname) const {
  std::lock_guard lock(impl_->mu);
  return std::any_of(impl_->sessions.begin(), impl_->sessions.end(),
                     [&](const auto& s) { return s->hostname() == hostname; });
}

void AgentRunner::Run(int threads) {
  std::vector<std::thread> extra;
  for (int i = 1; i < threads; ++i) extra.emplace_back([this] { impl_->io.run(); });
  impl_->io.run();
  for (auto& t : extra) t.join();
}

void AgentRunner::Stop() {
  if (impl_->stopping.exchange(true)) return;
  {
    std::lock_guard lock(impl_->mu);
    for (auto& s : impl_->sessions) s->Stop();
  }
  impl_->work.reset();
}

const AgentStats& AgentRunner::stats() const { return impl_->stats; }

void KeepNodeTokenIn(AgentOptions& options, const std::string& path) {
  {
    std::ifstream in(path);
    std::getline(in, options.node_token);
  }
  options.on_node_token = [path](const std::string& token) {
    if (!agent_internal::WriteStateFile(path, token + "\n")) {
      spdlog::warn("cannot keep the node token in {}: {}", path, std::strerror(errno));
    }
  };
}

}  // namespace gpufleet
