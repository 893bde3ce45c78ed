#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "net/http_client.h"

namespace gpufleet::net {
namespace {

// An HTTP/1.1 server on loopback that answers each request `200 ok:<n>` (n counts requests)
// and keeps the connection open, or, with `close_after`, closes it after that many answers
// without saying so (as a server closing an idle connection does). Counts connections.
class KeepAliveServer {
 public:
  explicit KeepAliveServer(int close_after = 0) : close_after_(close_after) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(fd_, 16);
    thread_ = std::thread([this] { Serve(); });
  }
  ~KeepAliveServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/w"; }
  int connections() const { return connections_; }

 private:
  void Serve() {
    while (!stop_) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      ++connections_;
      std::string in;
      int answered = 0;
      char buf[4096];
      for (;;) {
        size_t head = in.find("\r\n\r\n");
        if (head != std::string::npos) {
          size_t length = 0;
          if (size_t at = in.find("Content-Length: "); at != std::string::npos && at < head)
            length = std::stoul(in.substr(at + 16));
          if (in.size() >= head + 4 + length) {
            in.erase(0, head + 4 + length);
            const std::string body = "ok:" + std::to_string(++requests_);
            const std::string reply =
                "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
                body;
            (void)::write(c, reply.data(), reply.size());
            if (close_after_ && ++answered == close_after_) break;
            continue;
          }
        }
        ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      ::close(c);
    }
  }
  int fd_ = -1, port_ = 0, close_after_ = 0, requests_ = 0;
  std::atomic<int> connections_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

HttpCall Post(const std::string& url) {
  HttpCall call;
  call.method = "POST";
  call.url = url;
  call.body = std::string(10'000, 'x');
  call.timeout_ms = 5'000;
  return call;
}

TEST(HttpSession, KeepsOneConnectionForManyRequests) {
  KeepAliveServer server;
  HttpSession session;
  for (int i = 1; i <= 20; ++i) {
    auto r = session.Send(Post(server.url()));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "ok:" + std::to_string(i));
  }
  EXPECT_EQ(session.connections(), 1u);
  EXPECT_EQ(server.connections(), 1);
}

// The server closes the connection after every second answer, without a word: the request sent
// on the closed connection goes again on a new one, and each request is answered once.
TEST(HttpSession, SendsAgainOnANewConnectionWhenTheServerClosedTheKeptOne) {
  KeepAliveServer server(2);
  HttpSession session;
  for (int i = 1; i <= 6; ++i) {
    auto r = session.Send(Post(server.url()));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->body, "ok:" + std::to_string(i));
  }
  EXPECT_EQ(server.connections(), 3);
}

TEST(HttpSession, AServerThatIsGoneIsAnErrorThatNamesTheStage) {
  std::string url;
  {
    KeepAliveServer server;
    url = server.url();
  }
  HttpSession session;
  auto r = session.Send(Post(url));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("connect"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace gpufleet::net
