#include "remote/cursor.h"

#include <filesystem>
#include <fstream>

namespace gpufleet::remote {

void Cursor::Save(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "v3 " << pos.segment << ' ' << pos.offset << ' ' << pos.seq << ' ' << until << ' '
        << chunks << ' ' << shard_done.size();
    for (auto d : shard_done) out << ' ' << d;
    out << '\n';
    if (!out) return;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
}

bool Cursor::Load(const std::string& path) {
  std::ifstream in(path);
  std::string v;
  Position p;
  if (!(in >> v >> p.segment >> p.offset >> p.seq) || (v != "v1" && v != "v2" && v != "v3"))
    return false;
  pos = p;
  // Shards are by GPU hash modulo their count: another count cannot use these. (A v1 cursor's
  // shards counted samples, not requests, and a v2 cursor's split by series: an interrupted
  // read of theirs starts again.)
  size_t shards = 0;
  std::vector<uint64_t> done;
  if (v == "v3" && in >> until >> chunks >> shards && shards == shard_done.size()) {
    done.resize(shards);
    for (auto& d : done) {
      if (!(in >> d)) break;
    }
  }
  if (in && done.size() == shard_done.size()) {
    shard_done = done;
  } else {
    until = chunks = 0;
  }
  return true;
}

}  // namespace gpufleet::remote
