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

// One agent's life: connect, register, heartbeat, reconnect. Runs on its own strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(asio::any_io_executor ex, AgentOptions options, std::unique_ptr<GpuBackend> backend,
          AgentStats& stats, std::atomic<bool>& stopping)
      : ex_(std::move(ex)),
        options_(std::move(options)),
        backend_(std::move(backend)),
        stats_(stats),
        all_stopping_(stopping),
        rng_(std::random_device{}()) {}

  void Start() {
    asio::co_spawn(
        ex_, [self = shared_from_this()] { return self->Loop(); }, asio::detached);
    if (options_.sample_interval_ms > 0) {
      asio::co_spawn(
          ex_, [self = shared_from_this()] { return self->Collect(); }, asio::detached);
    }
  }

  const std::string& hostname() const { return options_.hostname; }
  bool Stopping() const { return all_stopping_ || removed_; }

  // Ends this agent alone (it disconnects and does not reconnect).
  void Remove() {
    removed_ = true;
    Stop();
  }

  void Stop() {
    asio::post(ex_, [self = shared_from_this()] {
      if (self->ws_) {
        beast::error_code ec;
        beast::get_lowest_layer(*self->ws_).socket().close(ec);
      }
      self->timer_.cancel();
      self->sample_timer_.cancel();
    });
  }

 private:
  asio::awaitable<void> Loop() {
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

  // One connection; returns whether it got as far as a welcome.
  asio::awaitable<bool> ConnectOnce() {
    bool welcomed = false;
    bool counted = false;
    try {
      auto parsed = ParseHttpUrl(options_.controller, "8080");
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
        throw TlsFailure(options_.controller + " declined the agent channel: HTTP " +
                         std::to_string(upgrade.result_int()) + " " + upgrade.body());
      }
      if (hec) throw boost::system::system_error(hec);
      beast::get_lowest_layer(*ws_).expires_never();
      // Pings when the controller is silent; a half-open connection is dropped in 90 s.
      ws_->set_option(websocket::stream_base::timeout{std::chrono::seconds(30),
                                                      std::chrono::seconds(90), true});

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
      spdlog::debug("agent {}: registered as {} in pool {}", hello.facts.hostname, welcome->node,
                    welcome->pool);
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
    co_return welcomed;
  }

  // After the welcome: heartbeats on a timer, inventory when it changes, and a read loop that
  // notices the connection closing. Reads run in a child coroutine on the same strand.
  asio::awaitable<void> Serve(int heartbeat_ms) {
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

  // Samples every GPU on the interval grid, whether or not the controller is reachable; the
  // batches wait in pending_ until acknowledged (bounded: the oldest go first when full).
  asio::awaitable<void> Collect() {
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

  // Sends the batches not yet sent on this connection, up to 64 per message.
  asio::awaitable<void> SendSamples() {
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

  // A command from the controller (fault injection on a simulated GPU). The effect shows in
  // the next samples, events and inventory.
  void Run(const proto::Command& cmd) {
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

  // Drift remediation: one GPU setting through the backend (NVML's setter; a simulated GPU's
  // state), reported back and seen in the next inventory. An ECC or MIG mode on a real GPU is
  // pending until the GPU is reset: the agent runs its --reset-gpu-command for it (the
  // controller asks only inside a maintenance window), or says that it has none.
  void ApplySetting(const proto::Command& cmd) {
    proto::CommandResult result{cmd.id, cmd.gpu, cmd.action, false, ""};
    if (cmd.args.size() != 2) {
      result.message = "apply-setting takes a setting and a value";
    } else {
      auto done = backend_->ApplySetting(cmd.gpu, cmd.args[0], cmd.args[1]);
      result.ok = done.ok();
      result.exit_code = done.ok() ? 0 : -1;
      result.message = done.ok() ? done.value() : done.error().message;
      spdlog::info("agent {}: {}", options_.hostname, result.message);
      const bool needs_reset = cmd.args[0] == "ecc_mode" || cmd.args[0] == "mig_mode";
      if (done.ok() && needs_reset && !backend_->Simulated()) {
        if (!options_.reset_gpu_command.empty()) {
          RunInBackground(std::move(result),
                          ExpandCommand(options_.reset_gpu_command, cmd.gpu, GpuUuid(cmd.gpu)));
          return;
        }
        result.message += "; pending until the GPU is reset (the agent has no --reset-gpu-command)";
      }
    }
    results_.push_back(std::move(result));
    inventory_due_ = true;
  }

  std::string GpuUuid(int gpu) const {
    for (const auto& g : last_inventory_) {
      if (g.index == gpu) return g.uuid;
    }
    return "";
  }

  // Runs `command` on a thread of its own (a GPU reset takes seconds) and reports `result` with
  // its outcome after what the message already says; the next inventory shows the effect.
  void RunInBackground(proto::CommandResult result, std::string command) {
    spdlog::warn("agent: {} of GPU {}: running '{}'", result.action, result.gpu, command);
    std::thread([self = shared_from_this(), result = std::move(result),
                 command = std::move(command)]() mutable {
      auto outcome = RunShellCommand(command, self->options_.command_timeout_ms);
      std::string said = result.message.empty() ? "" : result.message + "; " + command + ": ";
      if (!outcome.ok()) {
        result.ok = false;
        result.message = said + outcome.error().message;
      } else {
        result.ok = outcome->exit_code == 0;
        result.exit_code = outcome->exit_code;
        result.message = said + (outcome->timed_out ? "timed out"
                                                    : "exit " + std::to_string(outcome->exit_code) +
                                                          ": " + outcome->output);
      }
      asio::post(self->ex_, [self, result = std::move(result)]() mutable {
        self->results_.push_back(std::move(result));
        self->inventory_due_ = true;
      });
    }).detach();
  }

  // A remediation action: simulated GPUs reset themselves; a real node runs the command its
  // operator configured (on a thread of its own: a reset takes seconds), or refuses.
  void Remediate(const proto::Command& cmd) {
    proto::CommandResult result{cmd.id, cmd.gpu, cmd.action, false, ""};
    if (backend_->Simulated()) {
      auto done = backend_->Remediate(cmd.gpu, cmd.action);
      result.ok = done.ok();
      result.message = done.ok() ? done.value() : done.error().message;
      results_.push_back(std::move(result));
      inventory_due_ = true;
      return;
    }
    const std::string& tmpl =
        cmd.action == "reset_gpu" ? options_.reset_gpu_command : options_.reboot_command;
    if (tmpl.empty()) {
      result.message = "not allowed on this node: the agent has no --" +
                       std::string(cmd.action == "reset_gpu" ? "reset-gpu" : "reboot") + "-command";
      results_.push_back(std::move(result));
      return;
    }
    RunInBackground(std::move(result), ExpandCommand(tmpl, cmd.gpu, GpuUuid(cmd.gpu)));
  }

  // A node action: a simulated backend does it itself (taking its simulated time; a reboot
  // takes the node away); a real node runs the program of its --action-dir, on a thread of its
  // own, with the deadline, and reports the exit code and the end of the output. A missing
  // program is a refusal, never a success.
  void NodeAction(const proto::Command& cmd) {
    proto::CommandResult result{cmd.id, cmd.gpu, cmd.action, false, ""};
    if (backend_->Simulated()) {
      auto sim = backend_->Simulate(cmd);
      if (!sim) {
        result.message = "the simulated node does not do " + cmd.action;
        results_.push_back(std::move(result));
        return;
      }
      Record(cmd);
      result.ok = sim->ok;
      result.exit_code = sim->ok ? 0 : 1;
      result.message = sim->message;
      if (sim->reboot) {  // it answers, then goes away
        results_.push_back(std::move(result));
        reboot_for_ms_ = sim->duration_ms;
        return;
      }
      result.duration_ms = sim->duration_ms;
      asio::co_spawn(
          ex_,
          [self = shared_from_this(), result = std::move(result),
           wait = sim->duration_ms]() mutable -> asio::awaitable<void> {
            asio::steady_timer t(self->ex_, std::chrono::milliseconds(wait));
            co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
            self->results_.push_back(std::move(result));
            self->inventory_due_ = true;
          },
          asio::detached);
      return;
    }
    if (options_.action_dir.empty()) {
      result.message = "not allowed on this node: the agent has no --action-dir";
      results_.push_back(std::move(result));
      return;
    }
    std::string program = options_.action_dir + "/" + cmd.action;
    int64_t timeout = cmd.timeout_ms > 0 ? cmd.timeout_ms : options_.action_timeout_ms;
    Record(cmd);
    spdlog::warn("agent: node action {} (command {}): running {}", cmd.action, cmd.id, program);
    std::thread([self = shared_from_this(), result, program, args = cmd.args, timeout]() mutable {
      auto start = std::chrono::steady_clock::now();
      auto outcome =
          RunProgram(program, args, static_cast<int>(std::min<int64_t>(timeout, INT32_MAX)));
      result.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - start)
                               .count();
      if (!outcome.ok()) {
        result.message = "refused: " + outcome.error().message;
      } else {
        result.exit_code = outcome->exit_code;
        result.ok = outcome->exit_code == 0;
        result.message = outcome->timed_out ? "timed out after " + std::to_string(timeout / 1000) +
                                                  " s: " + outcome->output
                                            : outcome->output;
      }
      asio::post(self->ex_, [self, result = std::move(result)]() mutable {
        self->results_.push_back(std::move(result));
        self->inventory_due_ = true;
      });
    }).detach();
  }

  // The agent's own record of the actions it ran (AgentOptions::action_log).
  void Record(const proto::Command& cmd) {
    if (options_.action_log.empty()) return;
    boost::json::array args;
    for (const auto& a : cmd.args) args.emplace_back(a);
    std::string line = JsonText(boost::json::object{{"time_ms", RealClock()->NowMs()},
                                                    {"node", options_.hostname},
                                                    {"id", cmd.id},
                                                    {"action", cmd.action},
                                                    {"args", std::move(args)}}) +
                       "\n";
    static std::mutex mu;
    std::lock_guard lock(mu);
    if (FILE* f = std::fopen(options_.action_log.c_str(), "a")) {
      std::fwrite(line.data(), 1, line.size(), f);
      std::fclose(f);
    }
  }

  void Acked(int64_t seq) {
    acked_seq_ = std::max(acked_seq_, seq);
    while (!pending_.empty() && pending_.front().seq <= seq) {
      stats_.rows_acked += static_cast<int64_t>(pending_.front().rows.size());
      pending_rows_ -= pending_.front().rows.size();
      pending_.pop_front();
    }
  }

  static bool SameInventory(const std::vector<Gpu>& a, const std::vector<Gpu>& b) {
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

  NodeFacts Facts() {
    NodeFacts f = HostFacts();
    if (!options_.hostname.empty()) f.hostname = options_.hostname;
    f.labels = options_.labels;
    f.backend = backend_->Name();
    auto nics = backend_->Nics();
    f.nics = nics ? std::move(*nics) : ReadNics(options_.sysfs_root);
    // The package database: the backend's own (simulated nodes), else dpkg's status file or
    // the rpm database under the root; neither leaves the list unknown.
    auto packages = backend_->Packages();
    if (!packages) packages = packages_.Read();
    f.container_toolkit = packages ? ContainerToolkitVersion(*packages) : "";
    f.packages = std::move(packages);
    if (auto d = backend_->Driver(); d.ok()) {
      f.driver_version = d->driver_version;
      f.cuda_driver_version = d->cuda_driver_version;
    }
    if (!backend_->Simulated()) {
      f.image_id = ReadImageId(options_.root);
      f.device_files = ReadDeviceFiles(options_.root);
    }
    backend_->AdjustFacts(f);
    return f;
  }

  // Before anything is written: a failed check leaves the token unsent.
  asio::awaitable<void> TlsHandshake(const HttpUrl& ep) {
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

  // Callers pass a named message: GCC 12 mishandles temporaries with destructors inside a
  // co_await expression (a use-after-free that ASan caught here).
  asio::awaitable<void> Send(const proto::Message& m) {
    out_ = proto::Encode(m);
    ws_->text(true);
    co_await ws_->async_write(asio::buffer(out_), asio::use_awaitable);
  }

  asio::awaitable<Result<proto::Message>> Receive() {
    beast::flat_buffer buf;
    beast::get_lowest_layer(*ws_).expires_after(std::chrono::seconds(30));
    co_await ws_->async_read(buf, asio::use_awaitable);
    // Disarm: a deadline left on the stream would cut the connection 30 s later.
    beast::get_lowest_layer(*ws_).expires_never();
    co_return proto::Decode(beast::buffers_to_string(buf.data()));
  }

  asio::any_io_executor ex_;
  AgentOptions options_;
  std::unique_ptr<GpuBackend> backend_;
  AgentStats& stats_;
  std::atomic<bool>& all_stopping_;   // the runner's
  std::atomic<bool> removed_{false};  // this agent's alone (Remove)
  std::mt19937_64 rng_;
  asio::steady_timer timer_{ex_};
  std::unique_ptr<websocket::stream<net::Stream>> ws_;
  std::string last_tls_failure_;
  std::vector<Gpu> last_inventory_;
  NodeFacts last_facts_;                     // as last sent: a change goes with the next inventory
  PackageDatabase packages_{options_.root};  // read again only when it changes
  std::string out_;

  // Telemetry waiting for its ack; touched only on this session's strand.
  struct Batch {
    int64_t seq = 0;
    std::vector<SampleRow> rows;
    std::vector<proto::GpuEvent> events;
  };
  bool inventory_due_ = false;                // a command changed the GPUs: report inventory now
  std::deque<proto::CommandResult> results_;  // remediation and node action outcomes
  int64_t reboot_for_ms_ = 0;  // a simulated reboot asked: the connection ends, off this long
  bool rebooting_ = false;
  asio::steady_timer sample_timer_{ex_};
  std::deque<Batch> pending_;
  size_t pending_rows_ = 0;
  int64_t batch_seq_ = 0;
  int64_t sent_seq_ = 0;   // sent on the current connection
  int64_t acked_seq_ = 0;  // acknowledged (or given up) by the controller
};

}  // namespace

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
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    const std::string tmp = path + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const std::string line = token + "\n";
    bool ok = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
              ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
              ::fsync(fd) == 0;
    if (fd >= 0) ::close(fd);
    if (ok) ok = ::rename(tmp.c_str(), path.c_str()) == 0;
    if (!ok) spdlog::warn("cannot keep the node token in {}: {}", path, std::strerror(errno));
  };
}

}  // namespace gpufleet
