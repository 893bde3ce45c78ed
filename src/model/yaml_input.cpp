#include "model/yaml_input.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/strings.h"
#include "common/utf8.h"

namespace gpufleet {
namespace {

struct Refusal {
  YAML::Mark mark;
  std::string message;
};

// Walks the events of one document: no aliases, no key twice in a mapping.
class Checker : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Scalar(mark, "~"); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    throw Refusal{mark, "aliases (*name) are not accepted; write the value out"};
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string& value) override {
    Scalar(mark, value);
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Open(false);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Open(true);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Frame {
    bool map = false;
    bool want_key = true;  // in a map: the next node is a key
    std::set<std::string> keys;
  };

  // A node (scalar or container) in the current frame is complete.
  void Done() {
    if (!stack_.empty() && stack_.back().map) stack_.back().want_key = !stack_.back().want_key;
  }
  void Scalar(const YAML::Mark& mark, const std::string& value) {
    if (!stack_.empty() && stack_.back().map && stack_.back().want_key &&
        !stack_.back().keys.insert(value).second) {
      throw Refusal{mark, "key '" + Printable(value, 80) + "' is given twice in this mapping"};
    }
    Done();
  }
  void Open(bool map) {
    // A container as a key (rare, never ours) counts as a key that is not a string.
    stack_.push_back(Frame{map, true, {}});
  }
  void Close() {
    stack_.pop_back();
    Done();
  }

  std::vector<Frame> stack_;
};

Error At(std::string_view source, const YAML::Mark& mark, const std::string& message) {
  return MakeError(ErrorCode::kInvalidArgument,
                   std::string(source) + ":" + std::to_string(mark.line + 1) + ": " + message);
}

}  // namespace

Result<YAML::Node> LoadYamlInput(std::string_view text, std::string_view source) {
  // YAML is Unicode; what is read here goes back out in JSON replies, which must be UTF-8.
  if (size_t at = InvalidUtf8At(text); at != std::string_view::npos) {
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(at), '\n');
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(source) + ":" + std::to_string(line) + ": the text is not UTF-8");
  }
  std::string copy(text);
  try {
    std::istringstream in(copy);
    YAML::Parser parser(in);
    Checker checker;
    parser.HandleNextDocument(checker);
  } catch (const Refusal& r) {
    return At(source, r.mark, r.message);
  } catch (const YAML::Exception& e) {
    return At(source, e.mark, e.msg);
  }
  try {
    return YAML::Load(copy);
  } catch (const YAML::Exception& e) {
    return At(source, e.mark, e.msg);
  }
}

Error YamlFields::Bad(const YAML::Node& node, const std::string& path,
                      const std::string& what) const {
  std::string where = file_;
  if (node.IsDefined() && node.Mark().line >= 0) {
    where += ":" + std::to_string(node.Mark().line + 1);
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   where + ": " + (path.empty() ? "" : path + ": ") + what);
}

Status YamlFields::Only(const YAML::Node& map, const std::string& path,
                        std::initializer_list<std::string_view> allowed) const {
  if (!map.IsDefined()) return {};
  if (!map.IsMap()) return Bad(map, path, "must be a mapping");
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>("");
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return Bad(kv.first, Join(path, key), "unknown field");
    }
  }
  return {};
}

Result<std::string> YamlFields::String(const YAML::Node& map, const std::string& path,
                                       const char* key, bool required) const {
  const YAML::Node v = map[key];
  if (!v.IsDefined() || v.IsNull()) {
    if (required) return Bad(map, Join(path, key), "is required");
    return std::string();
  }
  if (!v.IsScalar()) return Bad(v, Join(path, key), "must be a string");
  return v.as<std::string>();
}

std::string YamlFields::Join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

}  // namespace gpufleet
