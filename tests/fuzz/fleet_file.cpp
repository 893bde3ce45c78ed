// Fleet files: what `gpufleet apply` (and its dry run, open to any operator) sends. Parsing must
// refuse what it cannot take without crashing or blowing up (aliases, duplicate keys, deep
// nesting), and a file it takes must export and parse again to the same file.

#include <string>

#include "config/fleet_spec.h"
#include "fuzz.h"
#include "model/catalog.h"

using namespace gpufleet;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto catalog = GpuCatalog::Builtin();
  auto spec = ParseFleetSpec(fuzz::Text(data, size), "fuzz.yaml", *catalog);
  if (!spec.ok()) return 0;
  const std::string text = WriteFleetSpec(*spec);
  auto again = ParseFleetSpec(text, "export.yaml", *catalog);
  if (!again.ok()) fuzz::Fail("an exported fleet file does not parse", again.error().message);
  if (WriteFleetSpec(*again) != text) fuzz::Fail("a fleet file changes on export", text);
  return 0;
}
