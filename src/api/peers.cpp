#include "api/peers.h"

#include <spdlog/spdlog.h>

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

}  // namespace gpufleet::api
