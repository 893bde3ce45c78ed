#pragma once
// CLI output: aligned tables, pretty JSON, and the shared request-and-report step.

#include <boost/json.hpp>
#include <cassert>
#include <functional>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/client.h"

namespace gpufleet::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  // One cell per header: a cell left out would shift the rest under the wrong headers.
  void Row(std::vector<std::string> cells) {
    assert(cells.size() == headers_.size());
    rows_.push_back(std::move(cells));
  }
  void Print() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

std::string PrettyJson(const boost::json::value& v);
// "?k=v&k2=v2" from the non-empty values, percent-encoded; "" when all are empty.
std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params);
std::string Str(const boost::json::value& v);  // a scalar as text; "" for null

// The API token: --token, $GPUFLEET_TOKEN, or <data-dir>/admin.token; empty when none.
std::string ResolveToken(const Globals& g);
// Whom an https:// controller is checked against (Globals::ca_file); `local_controller` when
// the address came from the data directory, whose tls/ca.pem is then trusted.
net::TlsClientOptions ClientTls(const Globals& g, bool local_controller);

// Sends the request with the globals' server and token. On success returns the parsed JSON body;
// on failure prints "error: ..." to stderr, sets g.exit_code and returns nullopt.
std::optional<boost::json::value> Call(Globals& g, const std::string& method,
                                       const std::string& target, const std::string& body = "",
                                       const std::string& content_type = "application/json");

// The same for a reply that is not JSON (GET /api/v1/export's YAML): its body as it came.
std::optional<std::string> CallText(Globals& g, const std::string& method,
                                    const std::string& target, const std::string& body = "",
                                    const std::string& content_type = "application/json");

// A file's contents, or stdin's for "-"; on failure prints "error: cannot read FILE", sets
// g.exit_code and returns nullopt.
std::optional<std::string> ReadInput(Globals& g, const std::string& file);

// --match arguments ("LABEL=VALUE", "!=", "=~", "!~") as Alertmanager's matcher objects; on a bad
// one prints the error, sets g.exit_code and returns nullopt.
std::optional<boost::json::array> MatchArgs(Globals& g, const std::vector<std::string>& args);

// A list command's fleet filters (empty: not given). Each must name something the fleet has:
// otherwise prints "error: no pool 'x' (known: a, b)", sets g.exit_code and returns false.
struct FleetFilter {
  std::string cluster, pool, model, node;
};
bool KnownFilters(Globals& g, const FleetFilter& filter);

// Prints the reply as JSON when -o json, else calls `table`.
void Show(Globals& g, const boost::json::value& v,
          const std::function<void(const boost::json::value&)>& table);

}  // namespace gpufleet::cli
