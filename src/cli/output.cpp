#include "cli/output.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/json_text.h"
#include "common/paths.h"

namespace json = boost::json;

namespace gpufleet::cli {
namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

void Pretty(const json::value& v, std::string& out, int indent) {
  std::string pad(indent + 2, ' ');
  if (v.is_object()) {
    const auto& o = v.as_object();
    if (o.empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    size_t i = 0;
    for (const auto& kv : o) {
      out += pad + JsonText(json::value(kv.key())) + ": ";
      Pretty(kv.value(), out, indent + 2);
      out += ++i < o.size() ? ",\n" : "\n";
    }
    out += std::string(indent, ' ') + "}";
  } else if (v.is_array()) {
    const auto& a = v.as_array();
    if (a.empty()) {
      out += "[]";
      return;
    }
    out += "[\n";
    for (size_t i = 0; i < a.size(); ++i) {
      out += pad;
      Pretty(a[i], out, indent + 2);
      out += i + 1 < a.size() ? ",\n" : "\n";
    }
    out += std::string(indent, ' ') + "]";
  } else {
    out += JsonText(v);
  }
}

}  // namespace

void Table::Print() const {
  std::vector<size_t> width(headers_.size());
  for (size_t i = 0; i < headers_.size(); ++i) width[i] = headers_[i].size();
  for (const auto& r : rows_) {
    for (size_t i = 0; i < r.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], r[i].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < width.size(); ++i) {
      std::string c = i < cells.size() ? cells[i] : "";
      out += c;
      if (i + 1 < width.size()) out += std::string(width[i] - c.size() + 2, ' ');
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    std::printf("%s\n", out.c_str());
  };
  line(headers_);
  for (const auto& r : rows_) line(r);
}

std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string q;
  for (const auto& [k, v] : params) {
    if (v.empty()) continue;
    q += (q.empty() ? "?" : "&") + k + "=" + UrlEncode(v);
  }
  return q;
}

std::string PrettyJson(const json::value& v) {
  std::string out;
  Pretty(v, out, 0);
  return out;
}

std::optional<std::string> ReadInput(Globals& g, const std::string& file) {
  std::stringstream buf;
  if (file == "-") {
    buf << std::cin.rdbuf();
    return buf.str();
  }
  std::ifstream in(file);
  if (!in) {
    std::fprintf(stderr, "error: cannot read %s\n", file.c_str());
    g.exit_code = 1;
    return std::nullopt;
  }
  buf << in.rdbuf();
  return buf.str();
}

std::optional<json::array> MatchArgs(Globals& g, const std::vector<std::string>& args) {
  json::array matchers;
  for (const auto& m : args) {
    size_t at = m.find_first_of("=!");
    std::string op;
    for (const char* candidate : {"!~", "=~", "!=", "="}) {
      if (at != std::string::npos && m.compare(at, std::strlen(candidate), candidate) == 0) {
        op = candidate;
        break;
      }
    }
    if (at == std::string::npos || at == 0 || op.empty()) {
      std::fprintf(stderr, "error: --match '%s' is not LABEL=VALUE, !=, =~ or !~\n", m.c_str());
      g.exit_code = 2;
      return std::nullopt;
    }
    matchers.push_back(json::object{{"name", m.substr(0, at)},
                                    {"value", m.substr(at + op.size())},
                                    {"isRegex", op.back() == '~'},
                                    {"isEqual", op[0] == '='}});
  }
  return matchers;
}

std::string Str(const json::value& v) {
  if (v.is_string()) return std::string(v.as_string());
  if (v.is_null()) return "";
  if (v.is_double()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v.as_double());
    return buf;
  }
  return JsonText(v);
}

net::TlsClientOptions ClientTls(const Globals& g, bool local_controller) {
  auto o = net::ClientOptionsFromEnv(g.ca_file, g.insecure_skip_verify);
  std::string own = (g.data_dir.empty() ? DefaultDataDir() : g.data_dir) + "/tls/ca.pem";
  if (o.ca_file.empty() && local_controller && std::filesystem::exists(own)) o.ca_file = own;
  if (o.insecure_skip_verify) {
    std::fprintf(stderr,
                 "warning: --insecure-skip-verify: the controller's certificate is not "
                 "checked\n");
  }
  return o;
}

std::string ResolveToken(const Globals& g) {
  if (!g.token.empty()) return g.token;
  if (const char* t = std::getenv("GPUFLEET_TOKEN"); t && *t) return t;
  return ReadFirstLine((g.data_dir.empty() ? DefaultDataDir() : g.data_dir) + "/admin.token");
}

std::optional<std::string> CallText(Globals& g, const std::string& method,
                                    const std::string& target, const std::string& body,
                                    const std::string& content_type) {
  std::string dir = g.data_dir.empty() ? DefaultDataDir() : g.data_dir;
  std::string server = g.server;
  if (server.empty()) {
    if (const char* s = std::getenv("GPUFLEET_SERVER"); s && *s) server = s;
  }
  bool local = false;  // the data directory's own controller
  if (server.empty()) {
    server = ReadFirstLine(dir + "/controller.addr");
    local = !server.empty();
  }
  if (server.empty()) server = "127.0.0.1:8080";
  std::string token = ResolveToken(g);
  HttpClient client(server, token, ClientTls(g, local));
  auto reply = client.Send(method, target, body, content_type);
  if (!reply.ok()) {
    std::fprintf(stderr, "error: %s\n", reply.error().message.c_str());
    g.exit_code = 1;
    return std::nullopt;
  }
  if (reply->status >= 400) {
    boost::system::error_code ec;
    json::value v = json::parse(reply->body, ec);
    std::string message = reply->body;
    if (!ec && v.is_object() && v.as_object().contains("error")) {
      // The Prometheus API's errors carry the message itself.
      const auto& e = v.at("error");
      message = e.is_string() ? Str(e) : e.is_object() ? Str(e.at("message")) : message;
    }
    if (reply->status == 401 && token.empty()) {
      message +=
          " (no token: pass --token, set GPUFLEET_TOKEN, or use --data-dir of the controller)";
    }
    std::fprintf(stderr, "error: %s (HTTP %d)\n", message.c_str(), reply->status);
    g.exit_code = 1;
    return std::nullopt;
  }
  return std::move(reply->body);
}

std::optional<json::value> Call(Globals& g, const std::string& method, const std::string& target,
                                const std::string& body, const std::string& content_type) {
  auto text = CallText(g, method, target, body, content_type);
  if (!text) return std::nullopt;
  boost::system::error_code ec;
  json::value v = json::parse(*text, ec);
  if (ec) {
    std::fprintf(stderr, "error: the controller sent a reply that is not JSON\n");
    g.exit_code = 1;
    return std::nullopt;
  }
  return v;
}

void Show(Globals& g, const json::value& v, const std::function<void(const json::value&)>& table) {
  if (g.output == "json") {
    std::printf("%s\n", PrettyJson(v).c_str());
  } else {
    table(v);
  }
}

}  // namespace gpufleet::cli
