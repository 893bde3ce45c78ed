#include "receiver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <snappy.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "remote.pb.h"

namespace gpufleet::remote::testing {

Receiver::Receiver() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::listen(listen_fd_, 64);
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { Serve(); });
}

Receiver::~Receiver() {
  stop_ = true;
  thread_.join();
  ::close(listen_fd_);
}

std::string Receiver::url() const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/api/v1/write";
}

void Receiver::Script(std::vector<int> codes) {
  std::lock_guard lock(mu_);
  script_.assign(codes.begin(), codes.end());
}

std::vector<Received> Receiver::Taken() {
  std::lock_guard lock(mu_);
  return taken_;
}

std::vector<std::string> Receiver::Problems() {
  std::lock_guard lock(mu_);
  return problems_;
}

std::string Receiver::last_authorization() {
  std::lock_guard lock(mu_);
  return authorization_;
}

void Receiver::Serve() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd >= 0) Handle(fd);
  }
}

void Receiver::Handle(int fd) {
  std::string in;
  char buf[65536];
  size_t header_end = std::string::npos, length = 0;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) break;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
    if (header_end == std::string::npos) {
      header_end = in.find("\r\n\r\n");
      if (header_end == std::string::npos) continue;
      std::string lower = in.substr(0, header_end);
      for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      auto cl = lower.find("content-length:");
      if (cl != std::string::npos) length = std::stoul(lower.substr(cl + 15));
    }
    if (in.size() >= header_end + 4 + length) break;
  }
  ++requests_;
  std::string head = in.substr(0, header_end == std::string::npos ? 0 : header_end);
  std::string lower = head;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string problem;
  for (const char* h : {"content-encoding: snappy", "content-type: application/x-protobuf",
                        "x-prometheus-remote-write-version: 0.1.0"}) {
    if (lower.find(h) == std::string::npos) problem += std::string("missing ") + h + "; ";
  }
  if (head.rfind("POST ", 0) != 0) problem += "not a POST; ";
  std::string raw;
  prometheus::WriteRequest req;
  std::string body = header_end == std::string::npos ? "" : in.substr(header_end + 4);
  if (!snappy::Uncompress(body.data(), body.size(), &raw)) {
    problem += "body is not snappy; ";
  } else if (!req.ParseFromString(raw)) {
    problem += "body is not a WriteRequest; ";
  }
  int code = 204;
  {
    std::lock_guard lock(mu_);
    if (!script_.empty()) {
      code = script_.front();
      script_.pop_front();
    }
    if (auto a = lower.find("authorization: "); a != std::string::npos) {
      authorization_ = head.substr(a + 15, head.find("\r\n", a) - a - 15);
    }
    problems_.push_back(problem);
    if (code / 100 == 2) {
      for (const auto& ts : req.timeseries()) {
        std::map<std::string, std::string> labels;
        std::string previous;
        for (const auto& l : ts.labels()) {
          if (!previous.empty() && l.name() <= previous) {
            problems_.back() += "labels not sorted; ";
          }
          previous = l.name();
          labels[l.name()] = l.value();
        }
        for (const auto& s : ts.samples()) taken_.push_back({labels, s.timestamp(), s.value()});
      }
    }
  }
  std::string reply = "HTTP/1.1 " + std::to_string(code) +
                      " X\r\nContent-Length: " + std::string(code / 100 == 2 ? "0" : "6") +
                      "\r\nConnection: close\r\n\r\n" + (code / 100 == 2 ? "" : "failed");
  (void)::write(fd, reply.data(), reply.size());
  ::close(fd);
}

}  // namespace gpufleet::remote::testing
