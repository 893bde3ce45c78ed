#pragma once
// Several controllers on one database: each keeps the telemetry of the agents connected to it,
// so a read of telemetry asks the other live controllers for their part (with the caller's own
// credential, over the URL each advertises) and merges. Private to the API library.

#include <boost/json.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/context.h"

namespace gpufleet::api {

struct PeerAnswers {
  std::vector<boost::json::value> bodies;  // of the controllers that answered 200, parsed
  std::vector<std::string> missing;        // the live controllers that did not: "id: why"
};

// GET `path` with the request's query, the parameters in `set` replaced, and `local=1` (the
// peer answers from its own telemetry and asks nobody) from every other live controller, at
// once, each within `timeout_ms`. None when this controller is alone, or the request has
// local=1 itself.
PeerAnswers AskPeers(ApiContext& ctx, const Request& req, const std::string& path,
                     const std::map<std::string, std::string>& set = {},
                     int64_t timeout_ms = 5'000);

// Several controllers: what only the leader does (jobs are submitted, placed and cancelled by
// the leader alone) is handed to it: the request as it came (method, path, query, body, the
// caller's credential), and its answer as it gave it. None when this controller leads or is
// alone; a 503 that says so when no controller leads now or the leader does not answer.
std::optional<Response> AskLeader(ApiContext& ctx, const Request& req, int64_t timeout_ms = 15'000);

}  // namespace gpufleet::api
