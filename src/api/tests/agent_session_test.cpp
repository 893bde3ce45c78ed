// An agent's WebSocket (ServeAgent) on a server with one I/O thread: its frames are handled on
// the ingest executor, so the I/O thread stays free for everything else (the API) while a
// frame is being stored, and the reply still goes back in order through the outbox.

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "api/context.h"
#include "api/http_metrics.h"
#include "api/sessions.h"
#include "common/clock.h"

namespace gpufleet::api {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

// Welcomes any hello as node n1; each later message waits in OnMessage until released, then
// is acknowledged with seq 7.
class HeldHandler : public proto::AgentHandler {
 public:
  Result<proto::Welcome> OnHello(const proto::Hello&, const std::string&) override {
    return proto::Welcome{"n1", "c", "p", "", 5000};
  }
  std::optional<proto::Message> OnMessage(const std::string& node, const proto::Message&) override {
    on_thread = std::this_thread::get_id();
    entered.set_value(node);
    release.get_future().wait();
    return proto::Message(proto::Ack{7});
  }
  void OnClosed(const std::string&, uint64_t) override { closed.set_value(); }
  uint64_t OnConnected(const std::string&) override { return 1; }

  std::promise<std::string> entered;
  std::promise<void> release;
  std::promise<void> closed;
  std::thread::id on_thread;
};

class AgentSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    acceptor_.emplace(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    asio::co_spawn(io_, Serve(), asio::detached);
    io_thread_ = std::thread([this] {
      io_id_ = std::this_thread::get_id();
      io_.run();
    });
  }
  void TearDown() override {
    try {
      handler_.release.set_value();  // a test that failed early left a frame held
    } catch (const std::future_error&) {
    }
    io_.stop();
    ingest_.stop();
    registrar_.stop();
    io_thread_.join();
    ingest_.join();
    registrar_.join();
  }

  asio::awaitable<void> Serve() {
    auto socket = co_await acceptor_->async_accept(asio::make_strand(io_), asio::use_awaitable);
    net::Stream stream(beast::tcp_stream(std::move(socket)), nullptr);
    beast::flat_buffer buf;
    UpgradeRequest req;
    co_await http::async_read(stream, buf, req, asio::use_awaitable);
    co_await ServeAgent(std::move(stream), std::move(req), "127.0.0.1", handler_, registry_,
                        SignInGate{limiter_, metrics_, *clock_, 5000}, UnsignedConnections::Slot{},
                        registrar_.get_executor(), ingest_.get_executor());
  }

  // A client that has said hello and read its welcome.
  void Connect(websocket::stream<tcp::socket>& ws) {
    ws.next_layer().connect(acceptor_->local_endpoint());
    ws.handshake("127.0.0.1", "/api/v1/agent");
    ws.write(asio::buffer(proto::Encode(proto::Hello{"gfj_x", "", {}, {}, true})));
    beast::flat_buffer welcome;
    ws.read(welcome);
    auto m = proto::Decode(beast::buffers_to_string(welcome.data()));
    ASSERT_TRUE(m.ok()) << m.error().message;
    ASSERT_TRUE(std::holds_alternative<proto::Welcome>(m.value()));
  }

  asio::io_context io_;  // the server's one I/O thread
  std::optional<tcp::acceptor> acceptor_;
  std::thread io_thread_;
  std::thread::id io_id_;
  asio::thread_pool registrar_{1};
  asio::thread_pool ingest_{1};
  HeldHandler handler_;
  AgentRegistry registry_;
  SignInLimiter limiter_;
  HttpMetrics metrics_;
  std::shared_ptr<Clock> clock_ = RealClock();
};

TEST_F(AgentSessionTest, AFrameIsHandledOffTheIoThreadWhichStaysFree) {
  asio::io_context client_io;
  websocket::stream<tcp::socket> ws(client_io);
  ASSERT_NO_FATAL_FAILURE(Connect(ws));
  ws.write(asio::buffer(proto::Encode(proto::Heartbeat{1, 0})));
  auto entered = handler_.entered.get_future();
  ASSERT_EQ(entered.wait_for(10s), std::future_status::ready) << "the frame never reached it";
  EXPECT_EQ(entered.get(), "n1");
  EXPECT_NE(handler_.on_thread, io_id_);

  // While the frame is held, the I/O thread runs other work (what an API request would be).
  std::promise<void> ran;
  asio::post(io_, [&] { ran.set_value(); });
  EXPECT_EQ(ran.get_future().wait_for(5s), std::future_status::ready)
      << "the I/O thread waited for the frame's handling";
  // And the registry says the node's frame waits (what keeps a node whose heartbeat waits
  // behind others from being declared unreachable).
  EXPECT_TRUE(registry_.FrameWaiting("n1"));
  EXPECT_FALSE(registry_.FrameWaiting("n2"));

  handler_.release.set_value();
  beast::flat_buffer reply;
  ws.read(reply);
  auto m = proto::Decode(beast::buffers_to_string(reply.data()));
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_TRUE(std::holds_alternative<proto::Ack>(m.value()));
  EXPECT_EQ(std::get<proto::Ack>(m.value()).seq, 7);
  EXPECT_FALSE(registry_.FrameWaiting("n1")) << "handled: nothing waits";
  ws.close(websocket::close_code::normal);
  EXPECT_EQ(handler_.closed.get_future().wait_for(10s), std::future_status::ready);
}

TEST_F(AgentSessionTest, AFrameThatIsNoMessageIsAnsweredAndClosed) {
  asio::io_context client_io;
  websocket::stream<tcp::socket> ws(client_io);
  ASSERT_NO_FATAL_FAILURE(Connect(ws));
  ws.write(asio::buffer(std::string("{not a message")));
  beast::flat_buffer reply;
  ws.read(reply);
  auto m = proto::Decode(beast::buffers_to_string(reply.data()));
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_TRUE(std::holds_alternative<proto::ErrorMessage>(m.value()));
  EXPECT_EQ(std::get<proto::ErrorMessage>(m.value()).code, "invalid_argument");
  EXPECT_EQ(handler_.closed.get_future().wait_for(10s), std::future_status::ready)
      << "the connection stayed open";
}

}  // namespace
}  // namespace gpufleet::api
