#include "agent/action_record.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace gpufleet::agent_internal {

ActionRecord::ActionRecord(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  std::ifstream in(path_);
  std::string line;
  int bad = 0;
  while (std::getline(in, line)) {
    auto m = proto::Decode(line);
    auto* r = m.ok() ? std::get_if<proto::CommandResult>(&m.value()) : nullptr;
    if (!r || r->id == 0) {
      ++bad;
      continue;
    }
    answers_.push_back(std::move(*r));
    if (answers_.size() > kKept) answers_.pop_front();
  }
  if (bad) spdlog::warn("agent: {}: {} line(s) that are not answers skipped", path_, bad);
}

const proto::CommandResult* ActionRecord::Find(int64_t id, std::string_view action) const {
  if (id == 0) return nullptr;
  for (auto it = answers_.rbegin(); it != answers_.rend(); ++it) {
    if (it->id == id) return it->action == action ? &*it : nullptr;
  }
  return nullptr;
}

void ActionRecord::Add(const proto::CommandResult& result) {
  if (result.id == 0) return;
  for (auto& a : answers_) {
    if (a.id == result.id) return;  // the first answer stands
  }
  answers_.push_back(result);
  if (answers_.size() > kKept) answers_.pop_front();
  Write();
}

void ActionRecord::Write() const {
  if (path_.empty()) return;
  std::string text;
  for (const auto& a : answers_) text += proto::Encode(proto::Message(a)) + "\n";
  if (!WriteStateFile(path_, text)) {
    spdlog::warn("agent: cannot keep the node actions' answers in {}: {}", path_,
                 std::strerror(errno));
  }
}

bool WriteStateFile(const std::string& path, std::string_view text) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
            ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  return ok && ::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace gpufleet::agent_internal
