// NVIDIA security bulletins: CSAF 2.0 advisories (POST /api/v1/security/bulletins/import) and
// the bulletin file's YAML. Nothing may crash them, and an id that is taken must be a safe key.

#include <string>

#include "fuzz.h"
#include "model/bulletins.h"

using namespace gpufleet;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::Text(data, size);
  if (auto b = ParseCsafAdvisory(text); b.ok()) {
    if (b->id.empty() || b->id.size() > 64 || b->id.find('/') != std::string::npos ||
        b->id == "." || b->id == ".." || b->id.find('\\') != std::string::npos) {
      fuzz::Fail("a CSAF advisory's id is not a safe key", b->id);
    }
  }
  (void)BulletinSet::Parse(text, "fuzz.yaml");
  return 0;
}
