#include "scrape/exposition.h"

#include <charconv>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>

namespace gpufleet::scrape {
namespace {

bool IsNameStart(char c, bool metric) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (metric && c == ':');
}
bool IsNameChar(char c, bool metric) { return IsNameStart(c, metric) || (c >= '0' && c <= '9'); }

// Well-formed UTF-8 (no overlongs, no surrogates, at most U+10FFFF).
bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= s.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

// One line's reader; every method consumes from `rest` or says why it cannot.
class Line {
 public:
  explicit Line(std::string_view text) : rest_(text) {}

  void SkipBlanks() {
    while (!rest_.empty() && (rest_.front() == ' ' || rest_.front() == '\t'))
      rest_.remove_prefix(1);
  }
  bool Empty() const { return rest_.empty(); }
  bool Take(char c) {
    if (rest_.empty() || rest_.front() != c) return false;
    rest_.remove_prefix(1);
    return true;
  }
  std::string_view Name(bool metric) {
    size_t n = 0;
    if (rest_.empty() || !IsNameStart(rest_[0], metric)) return {};
    while (n < rest_.size() && IsNameChar(rest_[n], metric)) ++n;
    auto out = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return out;
  }
  // A token up to the next blank.
  std::string_view Word() {
    size_t n = 0;
    while (n < rest_.size() && rest_[n] != ' ' && rest_[n] != '\t') ++n;
    auto out = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return out;
  }
  // A double-quoted label value with the escapes \\, \" and \n.
  Result<std::string> Quoted() {
    if (!Take('"')) return MakeError(ErrorCode::kInvalidArgument, "a label value must be quoted");
    std::string out;
    while (!rest_.empty()) {
      char c = rest_.front();
      rest_.remove_prefix(1);
      if (c == '"') {
        if (!IsUtf8(out))
          return MakeError(ErrorCode::kInvalidArgument, "a label value is not valid UTF-8");
        return out;
      }
      if (c == '\\') {
        if (rest_.empty()) break;
        char e = rest_.front();
        rest_.remove_prefix(1);
        if (e == '\\' || e == '"') {
          out += e;
        } else if (e == 'n') {
          out += '\n';
        } else {
          return MakeError(ErrorCode::kInvalidArgument,
                           std::string("unknown escape '\\") + e + "' in a label value");
        }
        continue;
      }
      out += c;
    }
    return MakeError(ErrorCode::kInvalidArgument, "a label value is not closed");
  }
  std::string_view rest() const { return rest_; }

 private:
  std::string_view rest_;
};

// Go's ParseFloat as Prometheus uses it: decimal, exponent, NaN and [+-]Inf in any case.
std::optional<double> ParseValue(std::string_view w) {
  if (w.empty()) return std::nullopt;
  std::string lower;
  for (char c : w) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  if (lower == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (lower == "+inf" || lower == "inf") return std::numeric_limits<double>::infinity();
  if (lower == "-inf") return -std::numeric_limits<double>::infinity();
  std::string_view digits = w;
  if (digits.front() == '+') {
    digits.remove_prefix(1);
    if (digits.empty() || digits.front() == '-') return std::nullopt;
  }
  double v = 0;
  auto [end, ec] =
      std::from_chars(digits.data(), digits.data() + digits.size(), v, std::chars_format::general);
  if (end != digits.data() + digits.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) {
    // The text is a number, just not a double: overflow reads as infinity, underflow as zero,
    // as in Go. strtod agrees, and the text is known to be plain decimal here.
    return std::strtod(std::string(digits).c_str(), nullptr);
  }
  if (ec != std::errc()) return std::nullopt;
  return v;
}

std::optional<int64_t> ParseTimestamp(std::string_view w) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
  if (ec != std::errc() || end != w.data() + w.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string_view ExpoSample::Label(std::string_view key) const {
  for (const auto& [k, v] : labels) {
    if (k == key) return v;
  }
  return {};
}

Result<std::vector<ExpoSample>> ParseExposition(std::string_view text, const ExpoLimits& limits) {
  std::vector<ExpoSample> out;
  std::map<std::string, std::string, std::less<>> types;  // family -> TYPE
  std::set<std::string, std::less<>> helped;
  std::set<std::string, std::less<>> sampled;  // families with samples seen
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    ++line_no;
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      // A page cut short (a dropped connection, a body limit) must not be half-stored.
      return MakeError(ErrorCode::kInvalidArgument,
                       "line " + std::to_string(line_no) +
                           ": the page does not end with a newline (cut short?)");
    }
    std::string_view raw = text.substr(pos, nl - pos);
    pos = nl + 1;
    auto fail = [&](const std::string& why) {
      return MakeError(ErrorCode::kInvalidArgument, "line " + std::to_string(line_no) + ": " + why);
    };
    if (raw.size() > limits.max_line_bytes) {
      return fail("longer than " + std::to_string(limits.max_line_bytes) + " bytes");
    }
    if (!raw.empty() && raw.back() == '\r') return fail("has a carriage return (\\r)");
    for (char c : raw) {
      if (c == '\0') return fail("has a NUL byte");
    }
    Line line(raw);
    line.SkipBlanks();
    if (line.Empty()) continue;
    if (line.Take('#')) {
      line.SkipBlanks();
      std::string_view keyword = line.Word();
      if (keyword != "HELP" && keyword != "TYPE") continue;  // a plain comment
      line.SkipBlanks();
      std::string_view name = line.Name(true);
      if (name.empty()) return fail("# " + std::string(keyword) + " needs a metric name");
      if (!line.Empty() && line.rest().front() != ' ' && line.rest().front() != '\t') {
        return fail("'" + std::string(name) + std::string(line.rest().substr(0, 1)) +
                    "...' is not a metric name");
      }
      line.SkipBlanks();
      if (keyword == "HELP") {
        if (!helped.insert(std::string(name)).second) {
          return fail("a second HELP line for " + std::string(name));
        }
        continue;
      }
      std::string_view type = line.Word();
      line.SkipBlanks();
      if (!line.Empty()) return fail("text after the type of " + std::string(name));
      if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" &&
          type != "untyped") {
        return fail("'" + std::string(type) + "' is not a metric type");
      }
      if (types.count(name)) return fail("a second TYPE line for " + std::string(name));
      if (sampled.count(name)) {
        return fail("the TYPE line for " + std::string(name) + " comes after its samples");
      }
      types.emplace(std::string(name), std::string(type));
      continue;
    }
    ExpoSample s;
    std::string_view name = line.Name(true);
    if (name.empty())
      return fail("expected a metric name, found '" + std::string(raw.substr(0, 20)) + "'");
    s.name = std::string(name);
    if (line.Take('{')) {
      std::set<std::string_view> seen;
      while (true) {
        line.SkipBlanks();
        if (line.Take('}')) break;
        std::string_view key = line.Name(false);
        if (key.empty()) return fail("expected a label name or '}' in " + s.name);
        line.SkipBlanks();
        if (!line.Take('=')) return fail("expected '=' after label " + std::string(key));
        line.SkipBlanks();
        auto value = line.Quoted();
        if (!value.ok()) return fail(value.error().message + " (label " + std::string(key) + ")");
        if (!seen.insert(key).second) {
          return fail("label " + std::string(key) + " appears twice in " + s.name);
        }
        if (s.labels.size() >= limits.max_labels) {
          return fail("more than " + std::to_string(limits.max_labels) + " labels");
        }
        s.labels.emplace_back(std::string(key), std::move(value).value());
        line.SkipBlanks();
        if (line.Take(',')) continue;
        if (line.Take('}')) break;
        return fail("expected ',' or '}' after label " + std::string(key));
      }
    }
    if (!line.Take(' ') && !line.Take('\t')) {
      return fail("expected a space and a value after " + s.name);
    }
    line.SkipBlanks();
    std::string_view value_text = line.Word();
    auto value = ParseValue(value_text);
    if (!value) return fail("'" + std::string(value_text) + "' is not a number (" + s.name + ")");
    s.value = *value;
    line.SkipBlanks();
    if (!line.Empty()) {
      std::string_view ts_text = line.Word();
      auto ts = ParseTimestamp(ts_text);
      if (!ts) return fail("'" + std::string(ts_text) + "' is not a timestamp in milliseconds");
      s.timestamp_ms = ts;
      line.SkipBlanks();
      if (!line.Empty()) return fail("text after the timestamp");
    }
    if (out.size() >= limits.max_samples) {
      return fail("more than " + std::to_string(limits.max_samples) + " samples");
    }
    // Histograms and summaries report under suffixed names; the family is what TYPE named.
    sampled.insert(s.name);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gpufleet::scrape
