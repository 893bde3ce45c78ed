#pragma once
// One parser for the URLs gpufleet dials: the controller (agent, CLI), dcgm-exporter endpoints
// (scrape mode) and, later, notification receivers.

#include <string>
#include <string_view>

#include "common/result.h"

namespace gpufleet {

struct HttpUrl {
  std::string scheme;  // "http", "https" or "ws"; "http" when the text has none
  std::string host;    // without IPv6 brackets
  std::string port;    // digits; the scheme's default when absent
  std::string target;  // path and query, "/" when absent
};

// Accepts "[scheme://]host[:port][/path]". Errors say what is wrong with the text.
Result<HttpUrl> ParseHttpUrl(std::string_view text, std::string_view default_port);

// ParseHttpUrl for a client that speaks plain HTTP only: an https:// URL is refused before
// anything is dialled, so a token is never sent in clear to a URL that promised TLS (this
// build has no TLS client). For the clients of the controller: agent, sim, CLI (the scraper and
// the notifier take http:// URLs only).
Result<HttpUrl> ParsePlainUrl(std::string_view text, std::string_view default_port);

}  // namespace gpufleet
