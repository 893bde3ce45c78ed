#include "common/json_text.h"

#include <boost/json.hpp>
#include <charconv>
#include <cmath>

#include "common/strings.h"

namespace json = boost::json;

namespace gpufleet {
namespace {

// flow: ", " and ": " between items, as YAML's flow syntax wants them.
void Write(std::string& out, const json::value& v, bool flow = false);

void WriteObject(std::string& out, const json::object& o, bool flow = false) {
  out += '{';
  bool first = true;
  for (const auto& kv : o) {
    if (!first) out += flow ? ", " : ",";
    first = false;
    AppendJsonString(out, kv.key());
    out += flow ? ": " : ":";
    Write(out, kv.value(), flow);
  }
  out += '}';
}

void WriteArray(std::string& out, const json::array& a, bool flow = false) {
  out += '[';
  for (size_t i = 0; i < a.size(); ++i) {
    if (i) out += flow ? ", " : ",";
    Write(out, a[i], flow);
  }
  out += ']';
}

template <typename T>
void WriteNumber(std::string& out, T n) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, n);
  out.append(buf, ec == std::errc() ? end : buf);
}

void Write(std::string& out, const json::value& v, bool flow) {
  switch (v.kind()) {
    case json::kind::null:
      out += "null";
      break;
    case json::kind::bool_:
      out += v.get_bool() ? "true" : "false";
      break;
    case json::kind::int64:
      WriteNumber(out, v.get_int64());
      break;
    case json::kind::uint64:
      WriteNumber(out, v.get_uint64());
      break;
    case json::kind::double_:
      if (std::isfinite(v.get_double())) {
        WriteNumber(out, v.get_double());  // the shortest text that reads back the same
      } else {
        out += "null";
      }
      break;
    case json::kind::string:
      AppendJsonString(out, v.get_string());
      break;
    case json::kind::array:
      WriteArray(out, v.get_array(), flow);
      break;
    case json::kind::object:
      WriteObject(out, v.get_object(), flow);
      break;
  }
}

}  // namespace

std::string JsonText(const json::value& v) {
  std::string out;
  Write(out, v);
  return out;
}

std::string JsonText(const json::object& o) {
  std::string out;
  WriteObject(out, o);
  return out;
}

std::string JsonText(const json::array& a) {
  std::string out;
  WriteArray(out, a);
  return out;
}

void AppendYamlFlow(std::string& out, const json::value& v) { Write(out, v, true); }

}  // namespace gpufleet
