#pragma once
// The node actions an agent has answered, by command id: a command asked again (a controller
// that took over a rollout step whose answer was lost with a connection) is answered from here
// rather than run twice. The newest kKept answers; kept in a file across restarts when given
// one (one proto message a line, written whole through a rename).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "proto/proto.h"

namespace gpufleet::agent_internal {

// Writes `text` to `path` whole (mode 0600, fsynced, through a rename), making its directory:
// the agent's state files. False with errno set when it could not.
bool WriteStateFile(const std::string& path, std::string_view text);

class ActionRecord {
 public:
  static constexpr size_t kKept = 256;
  // Reads what `path` holds ("": memory only); a line that does not decode is skipped with a
  // warning, a missing file is an empty record.
  explicit ActionRecord(std::string path);
  // The answer given to command `id`, if it was `action`; null otherwise.
  const proto::CommandResult* Find(int64_t id, std::string_view action) const;
  // Remembers an answer (id 0 is no id: not kept) and rewrites the file; the oldest beyond
  // kKept are forgotten.
  void Add(const proto::CommandResult& result);
  size_t size() const { return answers_.size(); }

 private:
  void Write() const;

  std::string path_;
  std::deque<proto::CommandResult> answers_;  // oldest first
};

}  // namespace gpufleet::agent_internal
