#include "api/peers.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>

#include "common/url.h"
#include "net/http_client.h"
#include "runtime/leadership.h"

namespace gpufleet::api {

PeerAnswers AskPeers(ApiContext& ctx, const Request& req, const std::string& path,
                     const std::map<std::string, std::string>& set, int64_t timeout_ms) {
  PeerAnswers out;
  if (!ctx.leadership || ctx.leadership->alone() || req.Param("local") == "1") return out;
  auto list = ctx.leadership->Controllers();
  if (!list.ok()) {
    out.missing.push_back("the controllers' list: " + list.error().message);
    return out;
  }
  std::map<std::string, std::string> params = req.query;
  for (const auto& [k, v] : set) params[k] = v;
  params["local"] = "1";
  std::string query;
  for (const auto& [k, v] : params)
    query += (query.empty() ? "" : "&") + PercentEncode(k) + "=" + PercentEncode(v);
  struct Asked {
    std::string id;
    std::future<Result<net::HttpResult>> answer;
  };
  std::vector<Asked> asked;
  for (const auto& c : list.value()) {
    if (!c.live || c.record.id == ctx.leadership->options().id || c.record.url.empty()) continue;
    net::HttpCall call;
    call.url = c.record.url + path + "?" + query;
    call.timeout_ms = timeout_ms;
    call.max_body_bytes = 256 << 20;
    if (!req.authorization.empty()) call.headers.emplace_back("Authorization", req.authorization);
    asked.push_back(
        {c.record.id, std::async(std::launch::async, [call] { return net::Send(call); })});
  }
  for (auto& a : asked) {
    auto r = a.answer.get();
    std::string why;
    if (!r.ok()) {
      why = r.error().message;
    } else if (r->status != 200) {
      why = "HTTP " + std::to_string(r->status);
    } else {
      boost::system::error_code ec;
      auto v = boost::json::parse(r->body, ec);
      if (!ec) {
        out.bodies.push_back(std::move(v));
        continue;
      }
      why = "not JSON";
    }
    spdlog::warn("api: controller {} did not answer {}: {}", a.id, path, why);
    out.missing.push_back(a.id + ": " + why);
  }
  return out;
}

std::optional<Response> AskLeader(ApiContext& ctx, const Request& req, int64_t timeout_ms) {
  if (!ctx.leadership || ctx.leadership->alone() || ctx.leadership->leading()) return std::nullopt;
  auto unavailable = [](const std::string& why) {
    return ErrorResponse(
        MakeError(ErrorCode::kUnavailable,
                  "this controller does not lead and " + why + ": try again in a few seconds"));
  };
  auto list = ctx.leadership->Controllers();
  if (!list.ok()) return unavailable("cannot list the controllers: " + list.error().message);
  const runtime::ControllerView* leader = nullptr;
  for (const auto& c : list.value()) {
    if (c.leader && c.live && c.record.id != ctx.leadership->options().id) leader = &c;
  }
  if (!leader || leader->record.url.empty()) return unavailable("no controller leads now");
  std::string target;  // the path as it came, each segment encoded again, and the query
  for (size_t at = 1, slash; at <= req.path.size(); at = slash + 1) {
    slash = std::min(req.path.find('/', at), req.path.size());
    target += "/" + PercentEncode(std::string_view(req.path).substr(at, slash - at));
  }
  for (const auto& [k, v] : req.query)
    target += (target.find('?') == std::string::npos ? "?" : "&") + PercentEncode(k) + "=" +
              PercentEncode(v);
  net::HttpCall call;
  call.method = req.method;
  call.url = leader->record.url + target;
  call.body = req.body;
  call.timeout_ms = timeout_ms;
  if (!req.content_type.empty()) call.headers.emplace_back("Content-Type", req.content_type);
  if (!req.authorization.empty()) call.headers.emplace_back("Authorization", req.authorization);
  auto answer = net::Send(call);
  if (!answer.ok()) {
    spdlog::warn("api: the leader {} did not answer {} {}: {}", leader->record.id, req.method,
                 req.path, answer.error().message);
    return unavailable("the leader " + leader->record.id + " did not answer (" +
                       answer.error().message + ")");
  }
  Response r;
  r.status = answer->status;
  r.body = std::move(answer->body);
  r.from_leader = true;
  return r;
}

}  // namespace gpufleet::api
