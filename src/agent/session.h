// The agent's session with its controller, private to src/agent: the connection, telemetry and
// heartbeats (agent.cpp), and the commands it runs and the facts it reports
// (session_commands.cpp).
#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "agent/action_record.h"
#include "agent/agent.h"
#include "common/url.h"
#include "net/stream.h"
#include "proto/proto.h"

namespace gpufleet::agent_internal {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;

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
        rng_(std::random_device{}()) {
    for (auto& url : SplitUrlList(options_.controller)) controllers_.push_back(std::move(url));
  }

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
  asio::awaitable<void> Loop();

  // One connection; returns whether it got as far as a welcome.
  asio::awaitable<bool> ConnectOnce();
  proto::Hello MakeHello();

  // After the welcome: heartbeats on a timer, inventory when it changes, and a read loop that
  // notices the connection closing. Reads run in a child coroutine on the same strand.
  asio::awaitable<void> Serve(int heartbeat_ms);

  // Samples every GPU on the interval grid, whether or not the controller is reachable; the
  // batches wait in pending_ until acknowledged (bounded: the oldest go first when full).
  asio::awaitable<void> Collect();

  // Sends the batches not yet sent on this connection, up to 64 per message.
  asio::awaitable<void> SendSamples();

  // A command from the controller (fault injection on a simulated GPU). The effect shows in
  // the next samples, events and inventory.
  void Run(const proto::Command& cmd);

  // Drift remediation: one GPU setting through the backend (NVML's setter; a simulated GPU's
  // state), reported back and seen in the next inventory. An ECC or MIG mode on a real GPU is
  // pending until the GPU is reset: the agent runs its --reset-gpu-command for it (the
  // controller asks only inside a maintenance window), or says that it has none.
  void ApplySetting(const proto::Command& cmd);

  std::string GpuUuid(int gpu) const;

  // Runs `command` on a thread of its own (a GPU reset takes seconds) and reports `result` with
  // its outcome after what the message already says; the next inventory shows the effect.
  void RunInBackground(proto::CommandResult result, std::string command);

  // A remediation action: simulated GPUs reset themselves; a real node runs the command its
  // operator configured (on a thread of its own: a reset takes seconds), or refuses.
  void Remediate(const proto::Command& cmd);

  // A node action: a simulated backend does it itself (taking its simulated time; a reboot
  // takes the node away); a real node runs the program of its --action-dir, on a thread of its
  // own, with the deadline, and reports the exit code and the end of the output. A missing
  // program is a refusal, never a success.
  void NodeAction(const proto::Command& cmd);

  // The agent's own record of the actions it ran (AgentOptions::action_log).
  void Record(const proto::Command& cmd);
  // A node action's answer: sent, and remembered by its command id.
  void ActionAnswered(proto::CommandResult result);

  void Acked(int64_t seq);

  static bool SameInventory(const std::vector<Gpu>& a, const std::vector<Gpu>& b);

  NodeFacts Facts();

  // Before anything is written: a failed check leaves the token unsent.
  asio::awaitable<void> TlsHandshake(const HttpUrl& ep);

  // Callers pass a named message: GCC 12 mishandles temporaries with destructors inside a
  // co_await expression (a use-after-free that ASan caught here).
  asio::awaitable<void> Send(const proto::Message& m);

  asio::awaitable<Result<proto::Message>> Receive();

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
  // The controllers to try (AgentOptions::controller's list), the next one first: one that
  // failed, or whose connection ended, goes to the back.
  std::deque<std::string> controllers_;
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
  // Node actions by command id: those running, and the answers given (AgentOptions::
  // answers_file), so that a command asked again (a new leader whose predecessor's connection
  // took the answer away) is answered without running twice.
  std::set<int64_t> actions_running_;
  ActionRecord actions_answered_{options_.answers_file};
  int64_t reboot_for_ms_ = 0;  // a simulated reboot asked: the connection ends, off this long
  bool rebooting_ = false;
  asio::steady_timer sample_timer_{ex_};
  std::deque<Batch> pending_;
  size_t pending_rows_ = 0;
  int64_t batch_seq_ = 0;
  int64_t sent_seq_ = 0;   // sent on the current connection
  int64_t acked_seq_ = 0;  // acknowledged (or given up) by the controller
};

}  // namespace gpufleet::agent_internal
