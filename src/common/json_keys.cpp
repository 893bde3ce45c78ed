#include "common/json_keys.h"

#include <boost/json/basic_parser_impl.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/strings.h"

namespace gpufleet {
namespace {

namespace json = boost::json;
using boost::system::error_code;

// Keeps the keys of each open object; stops at the first one seen twice.
struct KeyHandler {
  constexpr static std::size_t max_object_size = std::size_t(-1);
  constexpr static std::size_t max_array_size = std::size_t(-1);
  constexpr static std::size_t max_key_size = std::size_t(-1);
  constexpr static std::size_t max_string_size = std::size_t(-1);

  std::vector<std::set<std::string>> open;
  std::string key;
  std::string repeated;
  bool found = false;

  bool on_document_begin(error_code&) { return true; }
  bool on_document_end(error_code&) { return true; }
  bool on_object_begin(error_code&) {
    open.emplace_back();
    return true;
  }
  bool on_object_end(std::size_t, error_code&) {
    open.pop_back();
    return true;
  }
  bool on_array_begin(error_code&) { return true; }
  bool on_array_end(std::size_t, error_code&) { return true; }
  bool on_key_part(json::string_view s, std::size_t, error_code&) {
    key.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, std::size_t, error_code& ec) {
    key.append(s.data(), s.size());
    if (!open.empty() && !open.back().insert(key).second) {
      found = true;
      repeated = key;
      ec = json::error::syntax;  // stops the parse; `found` says why
      return false;
    }
    key.clear();
    return true;
  }
  bool on_string_part(json::string_view, std::size_t, error_code&) { return true; }
  bool on_string(json::string_view, std::size_t, error_code&) { return true; }
  bool on_number_part(json::string_view, error_code&) { return true; }
  bool on_int64(std::int64_t, json::string_view, error_code&) { return true; }
  bool on_uint64(std::uint64_t, json::string_view, error_code&) { return true; }
  bool on_double(double, json::string_view, error_code&) { return true; }
  bool on_bool(bool, error_code&) { return true; }
  bool on_null(error_code&) { return true; }
  bool on_comment_part(json::string_view, error_code&) { return true; }
  bool on_comment(json::string_view, error_code&) { return true; }
};

}  // namespace

Status CheckJsonKeys(std::string_view text) {
  json::basic_parser<KeyHandler> parser{json::parse_options{}};
  error_code ec;
  parser.write_some(false, text.data(), text.size(), ec);
  if (parser.handler().found) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "key '" + Printable(parser.handler().repeated, 80) + "' is given twice in one object");
  }
  return {};
}

}  // namespace gpufleet
