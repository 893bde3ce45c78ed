#pragma once
// One parser for the URLs gpufleet dials: the controller (agent, CLI), dcgm-exporter endpoints
// (scrape mode) and notification receivers.

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gpufleet {

struct HttpUrl {
  std::string scheme;  // "http", "https", "ws" or "wss"; "http" when the text has none
  std::string host;    // without IPv6 brackets
  std::string port;    // digits; the scheme's default when absent
  std::string target;  // path and query, "/" when absent
  bool tls() const { return scheme == "https" || scheme == "wss"; }
};

// Accepts "[scheme://]host[:port][/path]". Errors say what is wrong with the text.
Result<HttpUrl> ParseHttpUrl(std::string_view text, std::string_view default_port);

// "URL1,URL2,...": several controllers, each parsed as ParseHttpUrl does (spaces around the
// commas allowed). An error names the URL that is wrong; an empty list is one.
Result<std::vector<HttpUrl>> ParseHttpUrls(std::string_view list, std::string_view default_port);
// The same list's URLs as written, trimmed, in order.
std::vector<std::string> SplitUrlList(std::string_view list);

// A query parameter's name or value, percent-encoded (all but RFC 3986's unreserved bytes).
std::string PercentEncode(std::string_view value);

}  // namespace gpufleet
