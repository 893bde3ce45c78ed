#include "common/url.h"

#include <algorithm>
#include <cctype>

namespace gpufleet {

Result<HttpUrl> ParseHttpUrl(std::string_view text, std::string_view default_port) {
  auto bad = [&](const std::string& why) {
    return MakeError(ErrorCode::kInvalidArgument, "'" + std::string(text) + "' " + why);
  };
  HttpUrl url;
  std::string_view rest = text;
  if (auto sep = rest.find("://"); sep != std::string_view::npos) {
    url.scheme = std::string(rest.substr(0, sep));
    rest.remove_prefix(sep + 3);
    if (url.scheme != "http" && url.scheme != "https" && url.scheme != "ws" &&
        url.scheme != "wss") {
      return bad("has scheme '" + url.scheme + "'; use http or https");
    }
  } else {
    url.scheme = "http";
  }
  auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  url.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (authority.find('@') != std::string_view::npos) return bad("must not carry credentials");
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos) return bad("has an unclosed '[' in its host");
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("has text after its IPv6 host");
      port = after.substr(1);
    }
  } else {
    auto colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (url.host.empty()) return bad("has no host");
  bool host_ok = std::all_of(url.host.begin(), url.host.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == ':';
  });
  if (!host_ok) return bad("has a host with characters a host name cannot have");
  if (port.empty() && authority.back() == ':') return bad("has an empty port");
  if (port.empty()) {
    url.port = url.tls() ? "443" : std::string(default_port);
  } else {
    bool digits = port.size() <= 5 && std::all_of(port.begin(), port.end(),
                                                  [](unsigned char c) { return std::isdigit(c); });
    if (!digits || std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535) {
      return bad("has port '" + std::string(port) + "'; a port is 1 to 65535");
    }
    url.port = std::string(port);
  }
  for (unsigned char c : url.target) {
    if (c <= ' ' || c == 0x7f) return bad("has a space or control character in its path");
  }
  return url;
}

std::vector<std::string> SplitUrlList(std::string_view list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view one = list.substr(start, comma - start);
    while (!one.empty() && one.front() == ' ') one.remove_prefix(1);
    while (!one.empty() && one.back() == ' ') one.remove_suffix(1);
    out.emplace_back(one);
    start = comma + 1;
  }
  return out;
}

Result<std::vector<HttpUrl>> ParseHttpUrls(std::string_view list, std::string_view default_port) {
  std::vector<HttpUrl> out;
  for (const auto& one : SplitUrlList(list)) {
    auto url = ParseHttpUrl(one, default_port);
    if (!url.ok()) return url.error();
    out.push_back(std::move(url).value());
  }
  return out;
}

std::string PercentEncode(std::string_view value) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace gpufleet
