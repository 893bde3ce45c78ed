// The HTTP/WebSocket server: Beast over Asio, one coroutine per connection on its own strand,
// `threads` I/O threads. Handlers run synchronously on the I/O thread that read the request,
// but for the slow ones (Router::AddSlow), which run on a worker thread of their own. The two
// WebSocket sessions it upgrades to, agents' and the dashboard's stream, are in sessions.h.

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>
#include <boost/url/parse.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "api/api.h"
#include "api/context.h"
#include "api/gzip.h"
#include "api/http_io.h"
#include "api/json_util.h"
#include "api/scope.h"
#include "api/sessions.h"
#include "common/json_keys.h"
#include "common/json_text.h"
#include "common/strings.h"
#include "net/stream.h"
#include "proto/proto.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

namespace gpufleet::api {

// How long Stop() waits for the requests under way to be answered.
constexpr int kStopGraceMs = 5000;

// Counts a request from when it is read until its answer is written (or its connection dies).
class InFlight {
 public:
  explicit InFlight(std::atomic<int>& n) : n_(n) { ++n_; }
  ~InFlight() { --n_; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int>& n_;
};

struct ApiServer::Impl {
  ApiOptions options;
  FleetService& fleet;
  store::Stores& store;
  Authenticator auth;  // every request's, and the dashboard stream's
  SignInLimiter sign_ins;
  std::shared_ptr<const GpuCatalog> catalog;
  std::shared_ptr<Clock> clock;
  proto::AgentHandler& agents;
  HttpMetrics http_metrics;
  BufferPool buffers;
  // Requests read and not yet answered; Stop() waits for them. Once stopping, answers say
  // `Connection: close`. Before `io`: a connection's frame, destroyed with it, counts down.
  std::atomic<int> in_flight{0};
  std::atomic<bool> stopping{false};
  // The TLS context new connections get; null for plain HTTP. Replaced by ReloadTls().
  std::mutex tls_mu;
  net::TlsContext tls;
  // WebSockets not signed in yet, per address: a quarter of the connection limit, so those
  // that never send a hello cannot fill the server, while a site's agents behind one address
  // that all reconnect at once are not starved (a cap of 256 kept 62 of 1,250 simulated agents
  // out for minutes on a busy sanitizer build). Before `io`: the sessions that hold its slots
  // are destroyed with it.
  UnsignedConnections unsigned_conns{std::max(options.max_connections / 4, 1)};
  // Before the connections, so that it is destroyed after them: their timers need it.
  asio::io_context io;
  // The acceptor's coroutine runs here, and Stop() closes the acceptor here: an acceptor is not
  // safe to use from two threads at once.
  asio::strand<asio::io_context::executor_type> accept_strand{asio::make_strand(io)};
  AgentRegistry agent_conns;
  ApiContext ctx;
  Router router;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  EventHub hub;
  // The slow routes' worker: one, so they also run one at a time. After `io`, so that it is
  // destroyed (and joined) before it.
  asio::thread_pool slow_pool{1};
  // Agents' hellos, which write to the store (ServeAgent): off the I/O threads.
  asio::thread_pool registrar{2};
  // Agents' every later frame (batches, heartbeats, command results), decoded and stored here:
  // the I/O threads only move bytes and the API is not queued behind 100,000 GPUs' telemetry
  // (issue 49: /healthz took 61 s when both shared them). Its threads (StartIngest) run at a
  // lower CPU priority, so that when CPU is short the API's requests go first and the agents
  // wait, keeping what is not acknowledged yet. After `io`: joined before it.
  asio::io_context ingest_io;
  asio::executor_work_guard<asio::io_context::executor_type> ingest_work{ingest_io.get_executor()};
  std::vector<std::thread> ingest_threads;
  static constexpr int kIngestNice = 5;

  void StartIngest() {
    int n = options.ingest_threads > 0
                ? options.ingest_threads
                : std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
    for (int i = 0; i < n; ++i) {
      ingest_threads.emplace_back([this] {
        // Linux: a thread's own nice value (raising it needs no privilege).
        if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), kIngestNice) !=
            0) {
          spdlog::debug("api: cannot lower the ingest threads' priority: {}", std::strerror(errno));
        }
        ingest_io.run();
      });
    }
  }

  Impl(ApiOptions o, const runtime::Services& s)
      : options(std::move(o)),
        fleet(s.fleet),
        store(s.store),
        auth(*s.store.tokens, *s.clock),
        catalog(s.catalog),
        clock(s.clock),
        agents(s.agents),
        ctx(s, http_metrics, buffers) {
    fleet.set_frame_waiting([this](const std::string& n) { return agent_conns.FrameWaiting(n); });
    if (!ctx.scrape_targets)
      ctx.scrape_targets = [] { return std::vector<scrape::TargetStatus>(); };
    ctx.flush_token_use = [this] {
      if (auto s = auth.FlushUse(); !s.ok()) {
        spdlog::warn("api: cannot write tokens' last use: {}", s.error().message);
      }
      AuditFailedSignIns();
    };
    AddClusterRoutes(router, ctx);
    AddNodeRoutes(router, ctx);
    AddTokenRoutes(router, ctx);
    AddApplyRoutes(router, ctx);
    AddAuditRoutes(router, ctx);
    AddStaticRoutes(router, ctx);
    AddMetricsRoutes(router, ctx);
    AddEventRoutes(router, ctx);
    AddScrapeRoutes(router, ctx);
    AddHealthRoutes(router, ctx);
    AddAlertRoutes(router, ctx);
    AddRuleRoutes(router, ctx);
    AddDashboardRoutes(router, ctx);
    AddJobRoutes(router, ctx);
    AddSlurmRoutes(router, ctx);
    AddScalingRoutes(router, ctx);
    AddCompatRoutes(router, ctx);
    AddRolloutRoutes(router, ctx);
    AddSecurityRoutes(router, ctx);
    AddDriftRoutes(router, ctx);
    AddReportRoutes(router, ctx);
    AddTeamRoutes(router, ctx);
    AddUsageRoutes(router, ctx);
    AddAssetRoutes(router, ctx);
    AddControllerRoutes(router, ctx);
    // Last, so that it lists every route, itself included.
    router.Add("GET", "/api/v1/routes", Role::kViewer, [this](const Request&, const Principal&) {
      boost::json::array items;
      for (const auto& e : router.Entries()) {
        items.push_back(boost::json::object{{"method", e.method},
                                            {"path", e.pattern},
                                            {"role", ToString(e.min_role)},
                                            {"scope", ToString(e.scope)},
                                            {"public", e.public_route}});
      }
      return ListResponse(std::move(items), Page{5000, 0});
    });
    router.Scoped(Scope::kAny);
  }
  ~Impl() { fleet.set_frame_waiting(nullptr); }

  // The failed sign-ins gathered since the last flush: one audit record per address (and one
  // for the addresses beyond SignInLimiter::kMaxAuditAddresses), with the count.
  void AuditFailedSignIns() {
    for (const auto& c : sign_ins.TakeAuditCounts()) {
      AuditRecord rec;
      rec.time_ms = c.last_ms;
      rec.actor = "unauthenticated";
      rec.action = "sign-in failed";
      rec.target = "sign-in/" + Printable(c.remote, 64);
      rec.status = 401;
      rec.result = JsonText(boost::json::object{
          {"failures", c.count}, {"first_ms", c.first_ms}, {"last_ms", c.last_ms}});
      if (auto s = store.audit->AppendAudit(rec); !s.ok()) {
        spdlog::error("api: audit write failed: {}", s.error().message);
        return;
      }
    }
  }

  // Latency is measured on the steady clock (an interval, not a time of day).
  Response Dispatch(Request& req, Router::Match& match) {
    auto started = std::chrono::steady_clock::now();
    Response r = Handle(req, match);
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
    http_metrics.Observe(req.method, match.handler ? match.pattern : "unmatched", took.count());
    return r;
  }

  asio::awaitable<Response> DispatchOffThread(Request& req, Router::Match& match) {
    co_return Dispatch(req, match);
  }

  Response Handle(Request& req, Router::Match& match) {
    if (!match.handler) {
      if (match.path_known) {
        return ErrorResponse(
            MakeError(ErrorCode::kMethodNotAllowed, req.method + " is not allowed on " + req.path));
      }
      return ErrorResponse(MakeError(ErrorCode::kNotFound, "no route for " + req.path));
    }
    req.params = std::move(match.params);
    Principal principal{"anonymous", Role::kViewer, {}};
    if (!match.public_route) {
      // A valid token always passes; an unknown one counts against its address, and past the
      // limit the answer is a 429 (the failures go to the audit log a minute at a time).
      auto who = auth.Check(AuthorizationFor(req.path, req.authorization));
      if (!who.ok()) {
        if (who.error().code == ErrorCode::kUnauthenticated) {
          SignInGate gate{sign_ins, http_metrics, *clock, options.header_timeout_ms};
          if (int64_t wait = gate.Failed(req.remote); wait > 0) {
            Response r =
                JsonResponse(429, JsonText(boost::json::object{
                                      {"error",
                                       {{"code", "too_many_requests"},
                                        {"message", SignInGate::Message(req.remote, wait)}}}}));
            r.retry_after_s = wait;
            return r;
          }
        }
        return ErrorResponse(who.error());
      }
      principal = who.value();
      if (principal.role < match.min_role) {
        Response r = ErrorResponse(MakeError(
            ErrorCode::kPermissionDenied,
            "this call needs the " + std::string(ToString(match.min_role)) + " role; token '" +
                principal.name + "' has " + std::string(ToString(principal.role))));
        Audit(req, principal, r);
        return r;
      }
    }
    if (!match.public_route) {
      // The scope policy (scope.h): a fleet-wide route needs a fleet-wide token, and the
      // object the path names must be one of the token's clusters.
      Status in_scope =
          match.scope == Scope::kFleet || match.scope == Scope::kUndeclared
              ? ScopeFleet(principal, req.method + " " + match.pattern)
          : match.scope == Scope::kClusters && match.object != ScopeObject::kNone
              ? ScopePathObject(ctx, principal, match.object, PathParam(req, match.object_param))
              : Status{};
      if (!in_scope.ok()) {
        Response r = ErrorResponse(in_scope.error());
        Audit(req, principal, r);
        return r;
      }
    }
    if (Status s = CheckBody(req, match.raw_body); !s.ok()) {
      Response bad = ErrorResponse(s.error());
      if (!match.public_route) Audit(req, principal, bad);
      return bad;
    }
    Response r;
    try {
      r = (*match.handler)(req, principal);
    } catch (const std::exception& e) {  // a bug in a handler must not take the server down
      spdlog::error("api: {} {} threw: {}", req.method, req.path, e.what());
      r = ErrorResponse(MakeError(ErrorCode::kInternal, "internal error"));
    }
    if (!match.public_route) Audit(req, principal, r);
    return r;
  }

  static std::string PathParam(const Request& req, const std::string& key) {
    auto it = req.params.find(key);
    return it == req.params.end() ? std::string() : it->second;
  }

  // Mutating calls are audited (failed sign-ins a minute at a time: AuditFailedSignIns).
  void Audit(const Request& req, const Principal& who, const Response& r) {
    if (req.method == "GET" || req.method == "HEAD" || r.from_leader) return;
    AuditRecord rec;
    rec.time_ms = clock->NowMs();
    rec.actor = who.name;
    rec.action = req.method + " " + req.path;
    rec.target = r.audit_target;
    rec.status = r.status;
    rec.result = r.status < 400 ? "ok" : r.body;
    rec.before = r.audit_before;
    rec.after = r.audit_after;
    if (auto s = store.audit->AppendAudit(rec); !s.ok()) {
      spdlog::error("api: audit write failed: {}", s.error().message);
    }
  }

  Response TooManyUnsigned(const std::string& remote) {
    http_metrics.CountConnectionRefused();
    Response r = JsonResponse(
        429, JsonText(boost::json::object{
                 {"error",
                  {{"code", "too_many_requests"},
                   {"message", std::to_string(unsigned_conns.limit()) + " WebSockets from " +
                                   Printable(remote) +
                                   " have not signed in yet: try again when they have"}}}}));
    r.retry_after_s = 1;
    return r;
  }

  net::TlsContext CurrentTls() {
    std::lock_guard lock(tls_mu);
    return tls;
  }

  // A client that sent plain HTTP to the TLS port gets a plain answer that says so (OpenSSL
  // recognises the request line), so that `curl http://` does not just see a reset.
  asio::awaitable<bool> Handshake(net::Stream& stream, const std::string& remote) {
    auto& tcp_stream = stream.next_layer();
    tcp_stream.expires_after(std::chrono::milliseconds(options.header_timeout_ms));
    auto [ec] = co_await stream.tls_stream().async_handshake(asio::ssl::stream_base::server,
                                                             asio::as_tuple(asio::use_awaitable));
    if (!ec) co_return true;
    if (ec.category() == asio::error::get_ssl_category() &&
        ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_HTTP_REQUEST) {
      static const std::string kBody =
          R"({"error":{"code":"invalid_argument","message":"this port speaks https://, not http://"}})"
          "\n";
      static const std::string kPlain =
          "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\n"
          "Content-Length: " +
          std::to_string(kBody.size()) + "\r\n\r\n" + kBody;
      co_await asio::async_write(tcp_stream, asio::buffer(kPlain),
                                 asio::as_tuple(asio::use_awaitable));
    } else {
      spdlog::debug("api: TLS handshake with {} failed: {}", remote,
                    net::DescribeTlsError(stream, ec));
    }
    beast::error_code ignored;
    tcp_stream.socket().close(ignored);
    co_return false;
  }

  asio::awaitable<void> Serve(tcp::socket socket) {
    InFlight open(http_metrics.open_connections());  // until this connection closes
    beast::error_code ec;
    std::string remote = socket.remote_endpoint(ec).address().to_string();
    net::Stream stream(beast::tcp_stream(std::move(socket)), CurrentTls());
    if (stream.tls() && !co_await Handshake(stream, remote)) co_return;
    beast::flat_buffer buffer;
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(options.max_body_bytes);
      parser.header_limit(64 * 1024);
      // The headers within the header timeout, then the body within its own.
      stream.next_layer().expires_after(std::chrono::milliseconds(options.header_timeout_ms));
      auto [rec, n] = co_await http::async_read_header(stream, buffer, parser,
                                                       asio::as_tuple(asio::use_awaitable));
      if (rec == beast::error::timeout) {
        http_metrics.CountHeaderTimeout();
        break;
      }
      if (!rec && !parser.is_done()) {
        stream.next_layer().expires_after(std::chrono::milliseconds(options.body_timeout_ms));
        std::tie(rec, n) =
            co_await http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
      }
      if (rec == http::error::body_limit) {
        // Named, not a temporary inside co_await: see Send() in agent.cpp (a GCC 12 bug).
        Response too_large = ErrorResponse(
            MakeError(ErrorCode::kTooLarge,
                      "request body exceeds " + std::to_string(options.max_body_bytes) + " bytes"));
        co_await WriteSimple(stream, std::move(too_large), 11, false, false, &buffers);
        co_await DrainAndClose(stream);
        co_return;
      }
      if (rec == http::error::header_limit || rec == http::error::bad_target ||
          rec == http::error::bad_method || rec == http::error::bad_version) {
        Response bad =
            ErrorResponse(MakeError(ErrorCode::kInvalidArgument, "bad request: " + rec.message()));
        co_await WriteSimple(stream, std::move(bad), 11, false, false, &buffers);
        break;
      }
      if (rec) break;
      auto& in = parser.get();
      if (websocket::is_upgrade(in) && in.target() == "/api/v1/agent") {
        if (!options.tls.client_ca.empty() && !net::PeerVerified(stream)) {
          spdlog::warn("agent from {} refused: no client certificate signed by --client-ca",
                       remote);
          Response refused = ErrorResponse(MakeError(
              ErrorCode::kPermissionDenied,
              "this controller requires agents to present a client certificate signed by its "
              "--client-ca"));
          co_await WriteSimple(stream, std::move(refused), in.version(), false, false, &buffers);
          break;
        }
        auto slot = unsigned_conns.Acquire(remote);
        if (!slot) {
          // Named, not a temporary inside co_await: see Send() in agent.cpp (a GCC 12 bug).
          Response too_many = TooManyUnsigned(remote);
          co_await WriteSimple(stream, std::move(too_many), in.version(), false, false, &buffers);
          break;
        }
        auto upgrade = parser.release();
        co_await ServeAgent(std::move(stream), std::move(upgrade), remote, agents, agent_conns,
                            {sign_ins, http_metrics, *clock, options.header_timeout_ms},
                            std::move(slot), registrar.get_executor(), ingest_io.get_executor());
        co_return;
      }
      if (websocket::is_upgrade(in) && in.target() == "/api/v1/stream") {
        auto slot = unsigned_conns.Acquire(remote);
        if (!slot) {
          // Named, not a temporary inside co_await: see Send() in agent.cpp (a GCC 12 bug).
          Response too_many = TooManyUnsigned(remote);
          co_await WriteSimple(stream, std::move(too_many), in.version(), false, false, &buffers);
          break;
        }
        auto upgrade = parser.release();
        co_await ServeStream(std::move(stream), std::move(upgrade), remote, auth, hub,
                             {sign_ins, http_metrics, *clock, options.header_timeout_ms},
                             std::move(slot));
        co_return;
      }
      // Counted from here until its answer is written: a request whose work is done (a job
      // submitted) is not left unanswered by a stop, for its client to retry.
      InFlight counted(in_flight);
      Request req = ToRequest(in, remote);
      auto match = router.Find(req.method, req.path);
      Response r;
      if (match.slow) {
        // On the worker; the coroutine resumes on this connection's strand when it is done.
        auto work = asio::co_spawn(slow_pool, DispatchOffThread(req, match), asio::use_awaitable);
        r = co_await std::move(work);
      } else {
        r = Dispatch(req, match);
      }
      bool keep = in.keep_alive() && !stopping;
      if (r.more) {
        if (!co_await WriteStream(stream, std::move(r), in.version(), keep,
                                  options.body_timeout_ms))
          break;
      } else {
        bool gzip_ok = AcceptsGzip(in[http::field::accept_encoding]);
        co_await WriteSimple(stream, std::move(r), in.version(), keep, gzip_ok, &buffers);
      }
      if (!keep) break;
    }
    if (stream.tls()) {  // close_notify, then the TCP half-close
      stream.next_layer().expires_after(std::chrono::seconds(2));
      co_await stream.tls_stream().async_shutdown(asio::as_tuple(asio::use_awaitable));
    }
    stream.next_layer().socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  asio::awaitable<void> Accept() {
    for (;;) {
      auto [ec, socket] = co_await acceptor->async_accept(asio::make_strand(io),
                                                          asio::as_tuple(asio::use_awaitable));
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor->is_open()) co_return;
        continue;  // e.g. EMFILE: keep serving the connections we have
      }
      if (http_metrics.open_connections().load() >= options.max_connections) {
        http_metrics.CountConnectionRefused();
        beast::error_code ignored;
        socket.close(ignored);
        continue;
      }
      auto ex = socket.get_executor();
      asio::co_spawn(ex, Serve(std::move(socket)), asio::detached);
    }
  }
};

ApiServer::ApiServer(ApiOptions options, const runtime::Services& services)
    : impl_(std::make_unique<Impl>(std::move(options), services)) {}

ApiServer::~ApiServer() { Stop(); }

double ApiServer::TakeRecentP99() { return impl_->http_metrics.TakeRecentQuantile(0.99); }

void ApiServer::Publish(std::string json) { impl_->hub.Publish(std::move(json)); }

Status ApiServer::SendToAgent(const std::string& node, const proto::Command& command) {
  return impl_->agent_conns.Send(node, proto::Message(command));
}

bool ApiServer::HasAgent(const std::string& node) { return impl_->agent_conns.Has(node); }

Result<std::string> ApiServer::Start() {
  const std::string& listen = impl_->options.listen;
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--listen must be HOST:PORT, got '" + listen + "'");
  }
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  std::string port = listen.substr(colon + 1);
  if (impl_->options.tls.enabled()) {
    auto tls = net::MakeServerContext(impl_->options.tls);
    if (!tls.ok()) return tls.error();
    impl_->tls = tls.value();
  }
  try {
    tcp::resolver resolver(impl_->io);
    auto results = resolver.resolve(host, port);
    tcp::endpoint ep = results.begin()->endpoint();
    if (!impl_->tls && !ep.address().is_loopback() && !impl_->options.insecure_plaintext) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "refusing plain HTTP on " + listen +
                           ", which is not loopback: give --tls-cert and --tls-key (gpufleet tls "
                           "init makes them), or --insecure-plaintext to accept tokens in clear");
    }
    impl_->acceptor.emplace(impl_->io);
    impl_->acceptor->open(ep.protocol());
    impl_->acceptor->set_option(asio::socket_base::reuse_address(true));
    impl_->acceptor->bind(ep);
    impl_->acceptor->listen(asio::socket_base::max_listen_connections);
    auto bound = impl_->acceptor->local_endpoint();
    impl_->StartIngest();
    asio::co_spawn(impl_->accept_strand, impl_->Accept(), asio::detached);
    for (int i = 0; i < std::max(1, impl_->options.threads); ++i) {
      impl_->threads.emplace_back([this] { impl_->io.run(); });
    }
    std::string addr = bound.address().to_string();
    if (bound.address().is_v6()) addr = "[" + addr + "]";
    return addr + ":" + std::to_string(bound.port());
  } catch (const boost::system::system_error& e) {
    return MakeError(ErrorCode::kUnavailable,
                     "cannot listen on " + listen + ": " + e.code().message());
  }
}

void ApiServer::FlushTokenUse() { impl_->ctx.flush_token_use(); }

Status ApiServer::ReloadTls() {
  if (!impl_->options.tls.enabled()) {
    return MakeError(ErrorCode::kInvalidArgument, "this controller serves plain HTTP");
  }
  auto tls = net::MakeServerContext(impl_->options.tls);
  if (!tls.ok()) return tls.error();
  std::lock_guard lock(impl_->tls_mu);
  impl_->tls = tls.value();
  return {};
}

bool ApiServer::tls() const { return impl_->options.tls.enabled(); }

void ApiServer::Stop() {
  // First no new connections, then the requests under way are answered (for at most
  // kStopGraceMs), then the I/O threads stop. Idle keep-alive connections and agents' and
  // streams' WebSockets are not closed one by one: they close with the process, and an agent
  // closed here would be recorded as disconnected by a controller that is only restarting.
  if (!impl_->threads.empty() && !impl_->stopping.exchange(true)) {
    asio::post(impl_->accept_strand, [impl = impl_.get()] {
      beast::error_code ec;
      if (impl->acceptor) impl->acceptor->close(ec);
    });
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kStopGraceMs);
    while (impl_->in_flight.load() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  impl_->io.stop();
  for (auto& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
  impl_->threads.clear();
  // With no thread left running handlers, the listening socket closes here, so that a client
  // is refused at once rather than left in the kernel's backlog until the process exits.
  if (impl_->acceptor) {
    beast::error_code ec;
    impl_->acceptor->close(ec);
  }
  impl_->slow_pool.stop();  // a slow call under way is finished
  impl_->slow_pool.join();
  impl_->registrar.stop();
  impl_->registrar.join();
  // A frame under way is finished; its agent sends again whatever was not acknowledged.
  impl_->ingest_work.reset();
  impl_->ingest_io.stop();
  for (auto& t : impl_->ingest_threads) {
    if (t.joinable()) t.join();
  }
  impl_->ingest_threads.clear();
}

}  // namespace gpufleet::api
