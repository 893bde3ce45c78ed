// The `remote_write:` list of a controller configuration file.
#include "remote/config.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>

#include "common/clock.h"
#include "common/url.h"
#include "remote/filter.h"

namespace gpufleet::remote {

namespace {

Result<std::string> ReadSecret(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) return MakeError(ErrorCode::kInvalidArgument, what + ": cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  std::string v = s.str();
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r' || v.back() == ' ')) v.pop_back();
  if (v.empty()) return MakeError(ErrorCode::kInvalidArgument, what + ": " + path + " is empty");
  return v;
}

Status Unknown(const YAML::Node& map, const std::set<std::string>& known,
               const std::string& where) {
  for (const auto& kv : map) {
    auto key = kv.first.as<std::string>();
    if (!known.count(key)) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return MakeError(ErrorCode::kInvalidArgument,
                       where + ": unknown key '" + key + "' (known: " + list + ")");
    }
  }
  return {};
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace

Status Validate(ReceiverConfig& r) {
  auto fail = [&](const std::string& why) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "remote_write " + (r.name.empty() ? r.url : r.name) + ": " + why);
  };
  auto url = ParseHttpUrl(r.url, "80");
  if (!url.ok() || r.url.find("://") == std::string::npos ||
      (url->scheme != "http" && url->scheme != "https")) {
    return fail("url must be http://HOST[:PORT]/PATH or https://...");
  }
  const size_t authority = r.url.find("://") + 3;
  if (r.url.substr(authority, r.url.find('/', authority) - authority).find('@') !=
      std::string::npos) {
    return fail("put credentials in bearer_token or basic_auth, not in the URL");
  }
  bool credentials = !r.bearer_token.empty() || !r.basic_user.empty() || !r.basic_password.empty();
  if (credentials && !url->tls() && !IsLoopback(url->host)) {
    return fail("credentials are sent only over https:// (or plain http to loopback)");
  }
  if (!r.bearer_token.empty() && (!r.basic_user.empty() || !r.basic_password.empty())) {
    return fail("bearer_token and basic_auth are exclusive");
  }
  if (r.shards < 1 || r.shards > 64) return fail("shards must be 1 to 64");
  if (r.max_samples_per_send < 1 || r.max_samples_per_send > 100'000) {
    return fail("max_samples_per_send must be 1 to 100000");
  }
  if (r.timeout_ms < 100) return fail("timeout must be at least 100 ms");
  for (const auto& m : r.match) {
    if (auto f = CompileFilter(m); !f.ok()) return fail("match: " + f.error().message);
  }
  if (r.name.empty()) {
    r.name = url->host + (url->port == (url->tls() ? "443" : "80") ? "" : ":" + url->port) +
             url->target.substr(0, url->target.find('?'));
  }
  for (char c : r.name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == '"' || c == '\\') {
      return fail("name may not hold quotes, backslashes or control characters");
    }
  }
  return {};
}

Result<ReceiverConfig> ReceiverFromUrl(const std::string& url) {
  ReceiverConfig r;
  r.url = url;
  GF_TRY(Validate(r));
  return r;
}

Result<std::vector<ReceiverConfig>> ParseReceivers(const std::string& yaml,
                                                   const std::string& filename) {
  std::vector<ReceiverConfig> out;
  try {
    YAML::Node root = YAML::Load(yaml);
    if (!root || root.IsNull()) return out;
    if (!root.IsMap()) {
      return MakeError(ErrorCode::kInvalidArgument, filename + ": expected a mapping");
    }
    GF_TRY(Unknown(root, {"remote_write"}, filename));
    YAML::Node list = root["remote_write"];
    if (!list) return out;
    if (!list.IsSequence()) {
      return MakeError(ErrorCode::kInvalidArgument, filename + ": remote_write must be a list");
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const YAML::Node& n = list[i];
      const std::string where = filename + ": remote_write[" + std::to_string(i) + "]";
      if (!n.IsMap()) return MakeError(ErrorCode::kInvalidArgument, where + ": expected a mapping");
      GF_TRY(Unknown(n,
                     {"url", "name", "bearer_token", "bearer_token_file", "basic_auth", "ca_file",
                      "match", "shards", "max_samples_per_send", "timeout"},
                     where));
      ReceiverConfig r;
      if (!n["url"]) return MakeError(ErrorCode::kInvalidArgument, where + ": url is required");
      r.url = n["url"].as<std::string>();
      if (n["name"]) r.name = n["name"].as<std::string>();
      if (n["bearer_token"]) r.bearer_token = n["bearer_token"].as<std::string>();
      if (n["bearer_token_file"]) {
        GF_TRY_ASSIGN(r.bearer_token, ReadSecret(n["bearer_token_file"].as<std::string>(),
                                                 where + ".bearer_token_file"));
      }
      if (const auto& b = n["basic_auth"]) {
        if (!b.IsMap()) {
          return MakeError(ErrorCode::kInvalidArgument, where + ".basic_auth: expected a mapping");
        }
        GF_TRY(Unknown(b, {"username", "password", "password_file"}, where + ".basic_auth"));
        if (b["username"]) r.basic_user = b["username"].as<std::string>();
        if (b["password"]) r.basic_password = b["password"].as<std::string>();
        if (b["password_file"]) {
          GF_TRY_ASSIGN(r.basic_password, ReadSecret(b["password_file"].as<std::string>(),
                                                     where + ".basic_auth.password_file"));
        }
      }
      if (n["ca_file"]) r.ca_file = n["ca_file"].as<std::string>();
      if (const auto& m = n["match"]) {
        if (!m.IsSequence()) {
          return MakeError(ErrorCode::kInvalidArgument, where + ".match: expected a list");
        }
        for (const auto& s : m) r.match.push_back(s.as<std::string>());
      }
      if (n["shards"]) r.shards = n["shards"].as<int>();
      if (n["max_samples_per_send"])
        r.max_samples_per_send = n["max_samples_per_send"].as<size_t>();
      if (n["timeout"]) {
        r.timeout_ms = ParseDurationMs(n["timeout"].as<std::string>());
        if (r.timeout_ms <= 0) {
          return MakeError(ErrorCode::kInvalidArgument, where + ".timeout: a duration such as 30s");
        }
      }
      if (Status s = Validate(r); !s.ok()) {
        return MakeError(ErrorCode::kInvalidArgument, filename + ": " + s.error().message);
      }
      out.push_back(std::move(r));
    }
  } catch (const YAML::Exception& e) {
    return MakeError(ErrorCode::kInvalidArgument, filename + ": " + e.what());
  }
  return out;
}

}  // namespace gpufleet::remote
