// TLS as the clients see it: net::Send against small servers on loopback with certificates
// from net::InitTls/IssueCert, each failure named in one line, and a credential never written
// to a connection whose certificate did not check out.

#include "net/tls.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <filesystem>
#include <mutex>
#include <thread>

#include "net/certs.h"
#include "net/http_client.h"
#include "tests/support/temp_dir.h"

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace gpufleet::net {
namespace {

// Serves one connection on 127.0.0.1: with `context`, a TLS handshake first; records what it
// read (the request, decrypted, or for a plain server the raw bytes) and answers 200 "ok"; over
// TLS, `requests` of them on the one connection (kept open until the last answer).
class OneShotServer {
 public:
  explicit OneShotServer(TlsContext context, int requests = 1)
      : context_(std::move(context)), requests_(requests) {
    acceptor_.open(tcp::v4());
    acceptor_.bind({asio::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen();
    thread_ = std::thread([this] { Run(); });
  }
  ~OneShotServer() { thread_.join(); }
  std::string url() const {
    return "https://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()) + "/x";
  }
  std::string received() {
    std::lock_guard lock(mu_);
    return received_;
  }

 private:
  void Run() {
    tcp::socket socket(io_);
    acceptor_.accept(socket);
    boost::system::error_code ec;
    std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    asio::streambuf buf;
    if (!context_) {
      size_t n = socket.read_some(buf.prepare(4096), ec);
      buf.commit(n);
      Record(buf);
      asio::write(socket, asio::buffer(answer), ec);
      return;
    }
    ssl::stream<tcp::socket> tls(std::move(socket), *context_);
    tls.handshake(ssl::stream_base::server, ec);
    if (ec) return;  // the client refused the certificate: nothing to read
    for (int i = 1; i <= requests_ && !ec; ++i) {
      asio::read_until(tls, buf, "\r\n\r\n", ec);
      Record(buf);
      buf.consume(buf.size());
      asio::write(tls, asio::buffer(i == requests_ ? answer : kKeepAlive), ec);
    }
    tls.shutdown(ec);
  }
  void Record(asio::streambuf& buf) {
    std::lock_guard lock(mu_);
    received_.append(asio::buffers_begin(buf.data()), asio::buffers_end(buf.data()));
  }

  static constexpr std::string_view kKeepAlive = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  TlsContext context_;
  int requests_ = 1;
  asio::io_context io_;
  tcp::acceptor acceptor_{io_};
  std::mutex mu_;
  std::string received_;
  std::thread thread_;
};

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    auto files = InitTls(dir_, {"localhost", "127.0.0.1"}, false);
    ASSERT_TRUE(files.ok()) << files.error().message;
    files_ = files.value();
  }

  TlsContext Server(const std::string& cert, const std::string& key) {
    auto ctx = MakeServerContext({cert, key, ""});
    EXPECT_TRUE(ctx.ok()) << ctx.error().message;
    return ctx.ok() ? ctx.value() : nullptr;
  }
  TlsContext Client(const std::string& ca, bool skip = false) {
    TlsClientOptions o;
    o.ca_file = ca;
    o.insecure_skip_verify = skip;
    auto ctx = MakeClientContext(o);
    EXPECT_TRUE(ctx.ok()) << ctx.error().message;
    return ctx.ok() ? ctx.value() : nullptr;
  }
  // A request that carries a credential, as the notifier's and the CLI's do.
  Result<HttpResult> Get(const std::string& url, TlsContext ctx) {
    HttpCall call;
    call.url = url;
    call.headers = {{"Authorization", "Bearer gft_secret_never_in_clear"}};
    call.timeout_ms = 5000;
    call.tls = std::move(ctx);
    return Send(call);
  }

  gpufleet::testing::TempDir tmp_{"gpufleet-tls"};
  std::string dir_;
  TlsFiles files_;
};

TEST_F(TlsTest, InitWritesACaAndACertificateForTheHostsWithPrivateKeys) {
  auto info = ReadCert(files_.cert);
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_EQ(info->names, (std::vector<std::string>{"DNS:localhost", "IP:127.0.0.1"}));
  EXPECT_FALSE(info->ca);
  EXPECT_GT(info->not_after_s, std::time(nullptr) + 800LL * 86400);
  EXPECT_TRUE(ReadCert(files_.ca_cert)->ca);
  struct stat st {};
  ASSERT_EQ(stat(files_.key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(files_.ca_key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A second init would replace the CA, so it is refused unless forced.
  auto again = InitTls(dir_, {"localhost"}, false);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("--force"), std::string::npos) << again.error().message;
  EXPECT_TRUE(InitTls(dir_, {"localhost"}, true).ok());
  EXPECT_FALSE(InitTls(dir_, {}, true).ok());
  EXPECT_FALSE(InitTls(dir_, {"a b"}, true).ok());
}

TEST_F(TlsTest, HttpsWithTheRightCaAnswersAndCarriesTheRequest) {
  OneShotServer server(Server(files_.cert, files_.key));
  auto r = Get(server.url(), Client(files_.ca_cert));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ok");
  EXPECT_NE(server.received().find("Bearer gft_secret_never_in_clear"), std::string::npos);
}

// A session (remote write's) keeps its TLS connection: three requests, one handshake. The
// server serves one connection only, so a second would get no answer.
TEST_F(TlsTest, ASessionSendsManyRequestsOverOneTlsConnection) {
  OneShotServer server(Server(files_.cert, files_.key), 3);
  HttpSession session;
  HttpCall call;
  call.url = server.url();
  call.headers = {{"Authorization", "Bearer gft_secret_never_in_clear"}};
  call.timeout_ms = 5000;
  call.tls = Client(files_.ca_cert);
  for (int i = 0; i < 3; ++i) {
    auto r = session.Send(call);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->body, "ok");
  }
  EXPECT_EQ(session.connections(), 1u);
}

// A call given no context (the controller's scraper and notifier) trusts the system's store,
// or what `gpufleet --ca-file F serve` set.
TEST_F(TlsTest, CallsWithoutAContextTrustTheDefaultThatWasSet) {
  {
    OneShotServer server(Server(files_.cert, files_.key));
    auto r = Get(server.url(), nullptr);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("certificate verify failed"), std::string::npos)
        << r.error().message;
  }
  TlsClientOptions trust;
  trust.ca_file = files_.ca_cert;
  ASSERT_TRUE(SetDefaultClientOptions(trust).ok());
  {
    OneShotServer server(Server(files_.cert, files_.key));
    auto r = Get(server.url(), nullptr);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->status, 200);
  }
  trust.ca_file = dir_ + "/missing.pem";
  auto bad = SetDefaultClientOptions(trust);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("missing.pem"), std::string::npos) << bad.error().message;
  ASSERT_TRUE(SetDefaultClientOptions({}).ok());  // the system's store again
}

TEST_F(TlsTest, AWrongCaFailsInOneLineAndTheTokenIsNeverSent) {
  const gpufleet::testing::TempDir other_tmp("gpufleet-tls-other");
  const std::string other = other_tmp.path();
  auto theirs = InitTls(other, {"127.0.0.1"}, false);
  ASSERT_TRUE(theirs.ok());
  OneShotServer server(Server(theirs->cert, theirs->key));
  auto r = Get(server.url(), Client(files_.ca_cert));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("TLS: certificate verify failed: unable to get local issuer "
                                   "certificate"),
            std::string::npos)
      << r.error().message;
  EXPECT_EQ(r.error().message.find('\n'), std::string::npos);
  EXPECT_EQ(server.received(), "");
  std::filesystem::remove_all(other);
}

TEST_F(TlsTest, AnExpiredCertificateIsRefused) {
  CertRequest req;
  req.common_name = "old";
  req.hosts = {"127.0.0.1"};
  req.not_before_s = -10 * 86400;
  req.not_after_s = -86400;
  ASSERT_TRUE(
      IssueCert(files_.ca_cert, files_.ca_key, req, dir_ + "/old.pem", dir_ + "/old.key").ok());
  OneShotServer server(Server(dir_ + "/old.pem", dir_ + "/old.key"));
  auto r = Get(server.url(), Client(files_.ca_cert));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("certificate has expired"), std::string::npos)
      << r.error().message;
  EXPECT_EQ(server.received(), "");
}

TEST_F(TlsTest, AWrongHostNameIsRefused) {
  CertRequest req;
  req.common_name = "elsewhere";
  req.hosts = {"elsewhere.example.org", "10.9.9.9"};
  ASSERT_TRUE(
      IssueCert(files_.ca_cert, files_.ca_key, req, dir_ + "/else.pem", dir_ + "/else.key").ok());
  OneShotServer server(Server(dir_ + "/else.pem", dir_ + "/else.key"));
  auto r = Get(server.url(), Client(files_.ca_cert));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("IP address mismatch"), std::string::npos) << r.error().message;
  EXPECT_EQ(server.received(), "");
}

TEST_F(TlsTest, HttpsToAPlainServerFailsWithoutSendingTheToken) {
  OneShotServer server(nullptr);
  auto r = Get(server.url(), Client(files_.ca_cert));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("does not speak TLS"), std::string::npos) << r.error().message;
  // It got a ClientHello, and nothing of the request.
  EXPECT_FALSE(server.received().empty());
  EXPECT_EQ(server.received().find("gft_secret"), std::string::npos);
  EXPECT_EQ(server.received().find("GET"), std::string::npos);
}

TEST_F(TlsTest, InsecureSkipVerifyAcceptsAnUnknownCaOnlyWhenAsked) {
  const gpufleet::testing::TempDir other_tmp("gpufleet-tls-other");
  const std::string other = other_tmp.path();
  auto theirs = InitTls(other, {"elsewhere.example.org"}, false);
  ASSERT_TRUE(theirs.ok());
  OneShotServer server(Server(theirs->cert, theirs->key));
  auto skip = Client("", true);
  EXPECT_FALSE(Verifies(skip));
  EXPECT_TRUE(Verifies(Client(files_.ca_cert)));
  auto r = Get(server.url(), skip);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200);
  std::filesystem::remove_all(other);
}

TEST_F(TlsTest, BadFilesAreNamed) {
  auto no_key = MakeServerContext({files_.cert, dir_ + "/missing.key", ""});
  ASSERT_FALSE(no_key.ok());
  EXPECT_NE(no_key.error().message.find("missing.key"), std::string::npos);
  // The CA's key does not belong to the controller's certificate.
  auto mismatch = MakeServerContext({files_.cert, files_.ca_key, ""});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.error().message.find("does not match"), std::string::npos)
      << mismatch.error().message;
  TlsClientOptions o;
  o.ca_file = dir_ + "/nope.pem";
  auto client = MakeClientContext(o);
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.error().message.find("nope.pem"), std::string::npos);
  EXPECT_FALSE(MakeServerContext({"", "", ""}).ok());
}

}  // namespace
}  // namespace gpufleet::net
