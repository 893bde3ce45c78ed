// Telemetry's write-ahead log and checkpoint, read back at start: whatever a crash, a full disk
// or a damaged file left in them, Open() takes the good frames and skips or cuts the rest, or
// refuses a damaged checkpoint with a message; it never crashes. A store it opened writes,
// checkpoints and opens again.
//
// The first byte picks the file: bit 0 clear, the rest of the input is a log segment as it is
// (random bytes rarely pass a frame's CRC); bit 0 set, the rest is records, each a type byte, a
// length byte and that many payload bytes, framed here with their CRC (a type with bit 7 set
// gets a wrong CRC, a torn frame) so that the fuzzer reaches the payloads' decoding. Bit 1 puts
// the frames in a checkpoint file instead of the log.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz.h"
#include "tsdb/codec.h"
#include "tsdb/engine.h"

using namespace gpufleet;
namespace fs = std::filesystem;

namespace {

void AppendU32(std::string& out, uint32_t v) {
  for (int k = 0; k < 4; ++k) out.push_back(static_cast<char>(v >> (8 * k)));
}

std::string Frames(std::string_view in) {
  std::string out;
  size_t i = 0;
  while (i + 2 <= in.size()) {
    const uint8_t type = static_cast<uint8_t>(in[i]);
    const size_t len = std::min<size_t>(static_cast<uint8_t>(in[i + 1]), in.size() - i - 2);
    std::string body(1, static_cast<char>(type & 0x7f));
    body.append(in.substr(i + 2, len));
    AppendU32(out, static_cast<uint32_t>(body.size()));
    AppendU32(out, tsdb::Crc32c(body) ^ ((type & 0x80) ? 1u : 0u));
    out += body;
    i += 2 + len;
  }
  return out;
}

void Write(const fs::path& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const fs::path dir =
      fs::temp_directory_path() / ("gpufleet-fuzz-wal-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir / "wal");
  const uint8_t mode = data[0];
  const std::string_view rest = fuzz::Text(data + 1, size - 1);
  const std::string bytes = (mode & 1) ? Frames(rest) : std::string(rest);
  if (mode & 2) {
    Write(dir / "checkpoint-000000000001.bin", bytes);
  } else {
    Write(dir / "wal" / "0000000000000001.log", bytes);
  }

  tsdb::EngineOptions options{dir.string(), {}, false, 4096};
  {
    auto engine = tsdb::Engine::Open(options);
    if (!engine.ok()) return 0;  // a damaged checkpoint, refused with its reason
    auto id = (*engine)->Intern("fuzz|gpu_temp");
    if (!id.ok()) fuzz::Fail("intern after replay", id.error().message);
    if (auto r = (*engine)->Append({{*id, int64_t{1} << 50, 1.5}}); !r.ok()) {
      fuzz::Fail("append after replay", r.error().message);
    }
    if (auto s = (*engine)->Checkpoint(); !s.ok()) fuzz::Fail("checkpoint", s.error().message);
  }
  auto again = tsdb::Engine::Open(options);
  if (!again.ok())
    fuzz::Fail("a store does not open after its own checkpoint", again.error().message);
  return 0;
}
