#include "harness.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/buffers_iterator.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string_view>
#include <thread>

#include "openapi.h"

extern "C" char** environ;

namespace gpufleet::e2e {

namespace {

// Starts args[0] with `env` over this process's environment, stdin from /dev/null, stdout and
// stderr to the files (appended to, or truncated). Everything the child uses is built before
// fork(): the test process has threads, and a child of a threaded process may only make
// async-signal-safe calls until it execs. A lock another thread held at the fork (malloc's,
// the environment's) stays held in the child, which then hangs: a CLI run in a test did, once.
pid_t Spawn(std::vector<std::string> args, const std::map<std::string, std::string>& env,
            const std::string& out_path, const std::string& err_path, bool append) {
  std::vector<std::string> vars;
  for (char** e = environ; *e; ++e) {
    std::string_view kv(*e);
    if (env.count(std::string(kv.substr(0, kv.find('='))))) continue;
    vars.emplace_back(kv);
  }
  for (const auto& [k, v] : env) vars.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  const int flags = O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC);
  const bool one_file = out_path == err_path;
  pid_t pid = ::fork();
  if (pid == 0) {
    int out = ::open(out_path.c_str(), flags, 0644);
    int err = one_file ? out : ::open(err_path.c_str(), flags, 0644);
    if (out >= 0) ::dup2(out, 1);
    if (err >= 0) ::dup2(err, 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

Process::Process(std::vector<std::string> args, std::map<std::string, std::string> env,
                 const std::string& log_path) {
  pid_ = Spawn(std::move(args), env, log_path, log_path, true);
}

Process::~Process() {
  if (running()) {
    Signal(SIGKILL);
    Wait(5000);
  }
}

void Process::Signal(int sig) {
  if (pid_ > 0 && status_ == -1) ::kill(pid_, sig);
}

bool Process::running() {
  if (pid_ <= 0 || status_ != -1) return false;
  int st = 0;
  if (::waitpid(pid_, &st, WNOHANG) == pid_) {
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
  }
  return true;
}

int Process::Wait(int timeout_ms) {
  WaitFor([this] { return !running(); }, timeout_ms, 10);
  return running() ? -1 : status_;
}

bool WaitFor(const std::function<bool()>& condition, int timeout_ms, int poll_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
  return condition();
}

std::string TempDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("gf-e2e-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

RunResult RunGpufleet(std::vector<std::string> args, std::map<std::string, std::string> env) {
  static int counter = 0;
  std::string base = TempDir("run-" + std::to_string(++counter));
  std::string out_path = base + "/out", err_path = base + "/err";
  std::vector<std::string> full{GPUFLEET_BIN};
  full.insert(full.end(), args.begin(), args.end());
  pid_t pid = Spawn(std::move(full), env, out_path, err_path, false);
  RunResult r;
  int st = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (::waitpid(pid, &st, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      r.err = "timed out\n";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = ReadFile(out_path);
  r.err += ReadFile(err_path);
  std::filesystem::remove_all(base);
  return r;
}

ControllerProcess::ControllerProcess(std::string data_dir, std::vector<std::string> extra)
    : data_dir_(std::move(data_dir)), extra_(std::move(extra)) {}

void ControllerProcess::Start() {
  std::string addr_file = data_dir_ + "/controller.addr";
  std::filesystem::remove(addr_file);
  // A restart listens where the first start did, so agents find it again.
  std::string listen = address_.empty() ? "127.0.0.1:0" : address_;
  if (auto scheme = listen.find("://"); scheme != std::string::npos) listen.erase(0, scheme + 3);
  std::vector<std::string> args{GPUFLEET_BIN,
                                "--data-dir",
                                data_dir_,
                                "serve",
                                "--listen",
                                listen,
                                "--heartbeat-interval",
                                "200ms",
                                "--heartbeat-timeout",
                                "1500ms",
                                "--health-interval",
                                "500ms",
                                "--log-level",
                                "warn"};
  args.insert(args.end(), extra_.begin(), extra_.end());
  process_ =
      std::make_unique<Process>(args, std::map<std::string, std::string>{},
                                data_dir_ + "/controller-" + std::to_string(++starts_) + ".log");
  bool up = WaitFor([&] { return std::filesystem::exists(addr_file); }, 20000);
  if (!up)
    throw std::runtime_error(
        "controller did not start: " +
        ReadFile(data_dir_ + "/controller-" + std::to_string(starts_) + ".log"));
  address_ = ReadFile(addr_file);
  while (!address_.empty() && address_.back() == '\n') address_.pop_back();
  admin_token_ = ReadFile(data_dir_ + "/admin.token");
  while (!admin_token_.empty() && admin_token_.back() == '\n') admin_token_.pop_back();
}

void ControllerProcess::Kill() {
  if (!process_) return;
  process_->Signal(SIGKILL);
  process_->Wait(10000);
  process_.reset();
}

void ControllerProcess::Stop() {
  if (!process_) return;
  process_->Signal(SIGTERM);
  int code = process_->Wait(10000);
  if (code < 0) throw std::runtime_error("controller did not stop on SIGTERM");
  process_.reset();
  // A clean stop exits 0; a sanitizer's report on the way out, or a crash, fails the test.
  if (code != 0) {
    std::string log = ReadFile(data_dir_ + "/controller-" + std::to_string(starts_) + ".log");
    throw std::runtime_error("controller exited with " + std::to_string(code) +
                             " on SIGTERM; its log ends:\n" +
                             log.substr(log.size() > 4000 ? log.size() - 4000 : 0));
  }
}

std::pair<int, boost::json::value> ControllerProcess::Call(const std::string& method,
                                                           const std::string& target,
                                                           const std::string& body,
                                                           const std::string* token,
                                                           const std::string& content_type) {
  net::TlsClientOptions tls;
  if (std::filesystem::exists(data_dir_ + "/tls/ca.pem")) tls.ca_file = data_dir_ + "/tls/ca.pem";
  cli::HttpClient client(address_, token ? *token : admin_token_, tls);
  auto reply = client.Send(method, target, body, content_type);
  if (!reply.ok()) return {0, boost::json::value(reply.error().message)};
  boost::system::error_code ec;
  auto v = boost::json::parse(reply->body, ec);
  // Every response an end-to-end test gets is one docs/openapi.yaml describes.
  for (const auto& problem : CheckResponse(method, target, reply->status, ec ? nullptr : &v)) {
    ADD_FAILURE() << "docs/openapi.yaml: " << problem;
  }
  return {reply->status, ec ? boost::json::value(reply->body) : v};
}

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

std::string RawHttp(const std::string& address, const std::string& request) {
  asio::io_context io;
  tcp::socket socket(io);
  const size_t colon = address.rfind(':');
  tcp::resolver resolver(io);
  asio::connect(socket, resolver.resolve(address.substr(0, colon), address.substr(colon + 1)));
  asio::write(socket, asio::buffer(request));
  std::string out;
  boost::system::error_code ec;
  asio::read(socket, asio::dynamic_buffer(out), ec);  // until the server closes
  return out;
}

struct PageServer::Impl {
  std::mutex mu;
  std::string page;  // guarded by mu, like the three below
  int status = 200;
  int requests = 0;
  bool closing = false;
  std::vector<std::string> bodies, heads;
  unsigned short port = 0;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread thread;

  void Serve() {
    while (true) {
      tcp::socket socket(io);
      boost::system::error_code ec;
      acceptor.accept(socket, ec);
      std::string body;
      int code;
      {
        std::lock_guard lock(mu);
        if (closing) return;
        if (ec) continue;
        body = page;
        code = status;
        ++requests;
      }
      asio::streambuf request;
      size_t header_end = asio::read_until(socket, request, "\r\n\r\n", ec);
      std::string head(asio::buffers_begin(request.data()),
                       asio::buffers_begin(request.data()) + (ec ? 0 : header_end));
      request.consume(ec ? 0 : header_end);
      size_t length = 0;
      for (const char* key : {"Content-Length: ", "content-length: "}) {
        if (auto at = head.find(key); at != std::string::npos) {
          length = std::stoul(head.substr(at + std::strlen(key)));
        }
      }
      if (!ec && request.size() < length) {
        asio::read(socket, request, asio::transfer_exactly(length - request.size()), ec);
      }
      {
        std::lock_guard lock(mu);
        heads.push_back(head);
        bodies.emplace_back(asio::buffers_begin(request.data()),
                            asio::buffers_begin(request.data()) + request.size());
      }
      std::string reply = "HTTP/1.1 " + std::to_string(code) + (code == 200 ? " OK" : " Error") +
                          "\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
      asio::write(socket, asio::buffer(reply), ec);
      socket.shutdown(tcp::socket::shutdown_both, ec);
    }
  }
};

PageServer::PageServer(std::string page, unsigned short port) : impl_(std::make_unique<Impl>()) {
  tcp::endpoint at(asio::ip::make_address("127.0.0.1"), port);
  impl_->acceptor.open(at.protocol());
  impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  impl_->acceptor.bind(at);
  impl_->acceptor.listen();
  impl_->port = impl_->acceptor.local_endpoint().port();
  impl_->page = std::move(page);
  impl_->thread = std::thread([this] { impl_->Serve(); });
}

PageServer::~PageServer() { Close(); }

void PageServer::Close() {
  if (!impl_->thread.joinable()) return;
  {
    std::lock_guard lock(impl_->mu);
    impl_->closing = true;
  }
  // Wake the blocking accept with a connection of our own.
  boost::system::error_code ec;
  tcp::socket poke(impl_->io);
  poke.connect(impl_->acceptor.local_endpoint(), ec);
  impl_->thread.join();
  impl_->acceptor.close(ec);
}

void PageServer::Set(std::string page, int status) {
  std::lock_guard lock(impl_->mu);
  impl_->page = std::move(page);
  impl_->status = status;
}

std::string PageServer::url() const {
  return "http://127.0.0.1:" + std::to_string(impl_->port) + "/metrics";
}

std::vector<std::string> PageServer::bodies() {
  std::lock_guard lock(impl_->mu);
  return impl_->bodies;
}

std::vector<std::string> PageServer::heads() {
  std::lock_guard lock(impl_->mu);
  return impl_->heads;
}

unsigned short PageServer::port() const { return impl_->port; }

int PageServer::requests() {
  std::lock_guard lock(impl_->mu);
  return impl_->requests;
}

std::string DcgmPage(const std::string& name) {
  return ReadFile(std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/dcgm/" + name);
}

}  // namespace gpufleet::e2e
