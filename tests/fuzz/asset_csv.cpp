// Asset imports (POST /api/v1/assets/import, CSV or JSON). Nothing may crash them; a field of
// any text is exported so that a spreadsheet shows it as text and an import reads it back as it
// was; an import it takes, applied and exported, imports again.

#include <string>

#include "common/csv.h"
#include "common/utf8.h"
#include "fuzz.h"
#include "model/asset.h"

using namespace gpufleet;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::Text(data, size);

  // One field through the export's guard and back (what an export holds came in as UTF-8:
  // an import refuses other text).
  if (size <= 4096 && InvalidUtf8At(text) == std::string_view::npos) {
    std::string line = "x,";
    AppendCsvField(line, text);
    line += "\n";
    auto rows = ParseCsv(line);
    if (!rows.ok()) fuzz::Fail("an exported field does not parse", line);
    if (rows->size() != 1 || (*rows)[0].fields.size() != 2) {
      fuzz::Fail("an exported field splits", line);
    }
    const std::string& raw = (*rows)[0].fields[1];
    if (!raw.empty() &&
        (raw[0] == '=' || raw[0] == '+' || raw[0] == '@' || raw[0] == '\t' || raw[0] == '\r')) {
      fuzz::Fail("an exported field starts as a formula", line);
    }
    if (UnguardCsvField(raw) != text) fuzz::Fail("an exported field reads back changed", line);
  }

  for (auto parsed : {ParseAssetsCsv(text), ParseAssetsJson(text)}) {
    if (!parsed.ok()) continue;
    std::vector<Asset> assets;
    for (const auto& patch : *parsed) {
      Asset a;  // as an import creates it (fleet/assets.cpp)
      a.kind = patch.kind;
      a.state = AssetState::kSpare;
      ApplyPatch(patch, a);
      if (a.id() != patch.key) continue;  // refused by the import
      assets.push_back(std::move(a));
    }
    const std::string csv = AssetsCsv(assets);
    if (auto again = ParseAssetsCsv(csv); !again.ok()) {
      fuzz::Fail("an export does not import", again.error().message + "\n" + csv);
    }
    const std::string json = AssetsExportJson(assets);
    if (auto again = ParseAssetsJson(json); !again.ok()) {
      fuzz::Fail("a JSON export does not import", again.error().message + "\n" + json);
    }
  }
  return 0;
}
