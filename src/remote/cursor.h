#pragma once
// A receiver's place in the queue, kept in <data-dir>/remote-write/<receiver>.cursor: where its
// next read starts and, within a read it has begun, the requests each shard has had taken, so
// that a restart neither sends a request again nor skips one.

#include <cstdint>
#include <string>
#include <vector>

#include "remote/queue.h"

namespace gpufleet::remote {

struct Cursor {
  Position pos;  // where the next read starts
  // Within the read that starts at `pos` and ends at sample `until` (0: none begun), split
  // into `chunks` requests a shard: shard i has sent its first shard_done[i] (a read
  // interrupted by a stop or a crash). The same read always splits into the same requests, so
  // a restart goes on with the next.
  uint64_t until = 0, chunks = 0;
  std::vector<uint64_t> shard_done;

  // Written to a temporary file and renamed over `path`; nothing changes when it cannot be.
  void Save(const std::string& path) const;
  // False when there is no cursor there. A begun read recorded for another number of shards
  // than shard_done.size() (or by an older version, which split reads another way) is
  // forgotten: that read starts again.
  bool Load(const std::string& path);
};

}  // namespace gpufleet::remote
