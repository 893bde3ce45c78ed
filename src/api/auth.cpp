#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <optional>

#include "api/api.h"
#include "api/context.h"
#include "common/crypto.h"
#include "common/strings.h"

namespace gpufleet::api {

Result<Principal> Authenticate(store::TokenStore& store, Clock& clock,
                               const std::string& authorization) {
  return Authenticator(store, clock).Check(authorization);
}

namespace {

// RFC 4648 base64, padding optional; nullopt on any other character.
std::optional<std::string> Base64Decode(std::string_view in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = c >= 'A' && c <= 'Z'   ? c - 'A'
            : c >= 'a' && c <= 'z' ? c - 'a' + 26
            : c >= '0' && c <= '9' ? c - '0' + 52
            : c == '+'             ? 62
            : c == '/'             ? 63
                                   : -1;
    if (c == '=') break;
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

}  // namespace

std::string AuthorizationFor(const std::string& path, const std::string& authorization) {
  std::string_view rest(authorization);
  constexpr std::string_view kScheme = "basic ";
  if (path.rfind("/prometheus/", 0) != 0 || rest.size() <= kScheme.size() ||
      ToLower(rest.substr(0, kScheme.size())) != kScheme) {
    return authorization;
  }
  rest.remove_prefix(kScheme.size());
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  auto decoded = Base64Decode(rest);
  if (!decoded || rest.size() > 4096) return authorization;
  auto colon = decoded->find(':');
  if (colon == std::string::npos || colon + 1 == decoded->size()) return authorization;
  return "Bearer " + decoded->substr(colon + 1);
}

Result<Principal> Authenticator::Check(const std::string& authorization) {
  if (authorization.empty()) {
    return MakeError(ErrorCode::kUnauthenticated, "missing 'Authorization: Bearer <token>' header");
  }
  // The scheme is case-insensitive (RFC 9110 11.1), followed by one or more spaces.
  std::string_view rest(authorization);
  constexpr std::string_view kScheme = "bearer";
  const bool bearer = rest.size() > kScheme.size() &&
                      ToLower(rest.substr(0, kScheme.size())) == kScheme &&
                      (rest[kScheme.size()] == ' ' || rest[kScheme.size()] == '\t');
  if (bearer) rest.remove_prefix(kScheme.size());
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
  if (!bearer || rest.empty()) {
    return MakeError(ErrorCode::kUnauthenticated,
                     "the Authorization header must be 'Bearer <token>'");
  }
  std::string hash = Sha256Hex(rest);
  auto token = store_.FindApiToken(hash);
  if (token.ok()) {
    std::lock_guard lock(mu_);
    // Bounded: a flood of distinct valid tokens cannot grow it without end.
    if (known_.size() >= 10'000 && !known_.count(hash)) known_.clear();
    known_[hash] = token.value();
  } else if (token.error().code == ErrorCode::kNotFound) {
    std::lock_guard lock(mu_);
    known_.erase(hash);
    return MakeError(ErrorCode::kUnauthenticated, "invalid token");
  } else if (token.error().code == ErrorCode::kUnavailable) {
    std::lock_guard lock(mu_);
    auto it = known_.find(hash);
    if (it == known_.end()) return token.error();
    token = it->second;
  } else {
    return token.error();
  }
  if (token->revoked) return MakeError(ErrorCode::kUnauthenticated, "token has been revoked");
  const int64_t now = clock_.NowMs();
  if (token->expires_ms && token->expires_ms < now) {
    return MakeError(ErrorCode::kUnauthenticated, "token has expired");
  }
  if (token->hash != hash && token->previous_expires_ms <= now) {
    return MakeError(ErrorCode::kUnauthenticated,
                     "token '" + token->name + "' was rotated; its old secret is no longer valid");
  }
  {
    std::lock_guard lock(mu_);
    used_[token->id] = now;
  }
  return Principal{token->name, token->role, token->clusters};
}

Status Authenticator::FlushUse() {
  std::map<std::string, int64_t> used;
  {
    std::lock_guard lock(mu_);
    used.swap(used_);
  }
  auto s = store_.TouchApiTokens(used);
  if (!s.ok()) {
    std::lock_guard lock(mu_);
    for (const auto& [id, ms] : used) used_.emplace(id, ms);  // newer entries win
  }
  return s;
}

int64_t SignInLimiter::Failed(const std::string& remote, int64_t now_ms) {
  std::lock_guard lock(mu_);
  if (auto it = for_audit_.find(remote); it != for_audit_.end()) {
    it->second.last_ms = now_ms;
    ++it->second.count;
  } else if (for_audit_.size() < kMaxAuditAddresses) {
    for_audit_.emplace(remote, AuditCount{remote, now_ms, now_ms, 1});
  } else {
    if (others_.count++ == 0) others_.first_ms = now_ms;
    others_.last_ms = now_ms;
  }
  if (by_address_.size() >= kMaxAddresses && !by_address_.count(remote)) {
    std::erase_if(by_address_,
                  [&](const auto& e) { return e.second.start_ms + kWindowMs <= now_ms; });
    if (by_address_.size() >= kMaxAddresses) by_address_.clear();  // a flood of addresses
  }
  Window& w = by_address_[remote];
  if (w.start_ms + kWindowMs <= now_ms) w = Window{now_ms, 0};
  if (++w.failures == kMaxFailures) {
    spdlog::warn(
        "api: {} failed sign-ins from {} within a minute: refusing its unknown tokens for the "
        "rest of the minute",
        kMaxFailures, Printable(remote));
  }
  if (w.failures <= kMaxFailures) return 0;
  return std::max<int64_t>(1, (w.start_ms + kWindowMs - now_ms + 999) / 1000);
}

std::vector<SignInLimiter::AuditCount> SignInLimiter::TakeAuditCounts() {
  std::lock_guard lock(mu_);
  std::vector<AuditCount> out;
  out.reserve(for_audit_.size() + 1);
  for (auto& [_, c] : for_audit_) out.push_back(std::move(c));
  for_audit_.clear();
  std::sort(out.begin(), out.end(),
            [](const AuditCount& a, const AuditCount& b) { return a.first_ms < b.first_ms; });
  if (others_.count > 0) out.push_back(others_);
  others_ = AuditCount{"other addresses"};
  return out;
}

Result<bool> BootstrapAdminToken(store::TokenStore& store, Clock& clock, const std::string& path) {
  auto tokens = store.ListApiTokens();
  if (!tokens.ok()) return tokens.error();
  if (!tokens->empty()) return false;
  std::string secret = "gfa_" + RandomHex(24);
  ApiToken t;
  t.id = "tok-" + RandomHex(6);
  t.name = "bootstrap-admin";
  t.role = Role::kAdmin;
  t.hash = Sha256Hex(secret);
  t.prefix = SecretPrefix(secret);
  t.created_ms = clock.NowMs();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return MakeError(ErrorCode::kUnavailable, "cannot write " + path);
  ::fchmod(fd, 0600);
  std::string line = secret + "\n";
  bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!written) return MakeError(ErrorCode::kUnavailable, "cannot write " + path);
  GF_TRY(store.CreateApiToken(t));
  return true;
}

Status RequireFleetWide(const Principal& who) {
  if (who.clusters.empty()) return {};
  return MakeError(
      ErrorCode::kPermissionDenied,
      "token '" + who.name + "' is limited to some clusters; alert rules cover the whole fleet");
}

Result<int64_t> TimeParam(const Request& req, const char* key, int64_t now, int64_t fallback) {
  auto it = req.query.find(key);
  if (it == req.query.end() || it->second.empty()) return fallback;
  const std::string& v = it->second;
  auto bad = [&] {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string("'") + key +
                         "' must be milliseconds since the epoch, -DURATION or an RFC 3339 time "
                         "such as 2026-12-01T00:00:00Z");
  };
  if (v[0] == '-') {
    int64_t ago = ParseDurationMs(v.substr(1));
    if (ago < 0) return bad();
    return now - ago;
  }
  if (v.find_first_not_of("0123456789") == std::string::npos) {
    if (v.size() > 15) return bad();
    return std::stoll(v);
  }
  std::tm tm{};
  int ms = 0;
  char zone = 0;
  int fields = 0;
  if (v.size() == 20) {
    fields = std::sscanf(v.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon,
                         &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &zone);
    if (fields != 7) return bad();
  } else if (v.size() == 24) {
    fields = std::sscanf(v.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &tm.tm_year, &tm.tm_mon,
                         &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms, &zone);
    if (fields != 8) return bad();
  } else {
    return bad();
  }
  if (zone != 'Z' || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
      tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60) {
    return bad();
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm)) * 1000 + ms;
}

Result<Page> ParsePage(const Request& req) {
  Page page;
  auto number = [&](const char* key, size_t& out, size_t max) -> Status {
    auto it = req.query.find(key);
    if (it == req.query.end()) return {};
    const std::string& v = it->second;
    if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos) {
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string("'") + key + "' must be a non-negative integer");
    }
    out = std::stoul(v);
    if (out > max) {
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string("'") + key + "' must be at most " + std::to_string(max));
    }
    return {};
  };
  GF_TRY(number("limit", page.limit, 5000));
  GF_TRY(number("offset", page.offset, 1'000'000'000));
  if (page.limit == 0) page.limit = 500;
  return page;
}

}  // namespace gpufleet::api
