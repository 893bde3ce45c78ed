#include "scrape/dcgm.h"

#include <charconv>
#include <cmath>
#include <optional>

#include "model/telemetry.h"

namespace gpufleet::scrape {
namespace {

struct Mapping {
  Field field;
  double to_stored;  // exposed value x to_stored = gpufleet's unit
};

// dcgm-exporter's names: those gpufleet exposes itself, plus the aliases older and newer
// exporter versions use for the same quantities.
const std::map<std::string, Mapping, std::less<>>& Names() {
  static const auto* kNames = [] {
    auto* m = new std::map<std::string, Mapping, std::less<>>();
    for (const auto& info : Fields()) {
      if (!info.dcgm_name.empty()) {
        m->emplace(std::string(info.dcgm_name), Mapping{info.field, 1 / info.metrics_scale});
      }
    }
    m->emplace("DCGM_FI_DEV_POWER_MGMT_LIMIT", Mapping{Field::kPowerLimit, 1000});
    m->emplace("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", Mapping{Field::kClocksEventReasons, 1});
    // Profiling PCIe counters are bytes/s; NVML's throughput is KiB/s.
    m->emplace("DCGM_FI_PROF_PCIE_TX_BYTES", Mapping{Field::kPcieTx, 1.0 / 1024});
    m->emplace("DCGM_FI_PROF_PCIE_RX_BYTES", Mapping{Field::kPcieRx, 1.0 / 1024});
    return m;
  }();
  return *kNames;
}

// DCGM reports a field it cannot read as a "blank" sentinel, not an error: the int64 ones
// (DCGM_INT64_BLANK = 0x7ffffffffffffff0 and the three after it) and the fp64 ones (2^47 and the
// three after it). They mean "not supported", never a reading.
bool IsBlank(double v) {
  if (std::isnan(v)) return true;
  if (v >= 9.2233720368547758e18) return true;
  return v >= 140737488355328.0 && v <= 140737488355331.0;
}

std::optional<int> Index(std::string_view text) {
  int v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0 || v > 64) {
    return std::nullopt;
  }
  return v;
}

// "12010" -> "12.1", as nvidia-smi prints the CUDA driver version.
std::string CudaVersion(std::string_view text) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v <= 0) return std::string(text);
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::string_view FirstLabel(const ExpoSample& s, std::initializer_list<std::string_view> keys) {
  for (auto k : keys) {
    if (auto v = s.Label(k); !v.empty()) return v;
  }
  return {};
}

// The node's facts a series' labels carry, where not known yet.
void TakeFacts(const ExpoSample& s, NodeFacts& facts) {
  if (facts.hostname.empty()) {
    facts.hostname = std::string(FirstLabel(s, {"Hostname", "hostname"}));
  }
  if (facts.driver_version.empty()) {
    facts.driver_version = std::string(s.Label("DCGM_FI_DRIVER_VERSION"));
  }
  if (facts.cuda_driver_version.empty()) {
    if (auto cuda = s.Label("DCGM_FI_CUDA_DRIVER_VERSION"); !cuda.empty()) {
      facts.cuda_driver_version = CudaVersion(cuda);
    }
  }
}

}  // namespace

Result<DcgmReading> ReadDcgm(const std::vector<ExpoSample>& samples) {
  DcgmReading out;
  std::map<int, size_t> slot;  // GPU index -> position in out.gpus / out.rows
  std::map<int, double> fb_total, fb_reserved;
  for (const auto& s : samples) {
    auto gpu_label = s.Label("gpu");
    if (gpu_label.empty() || !s.Label("GPU_I_ID").empty()) continue;
    auto index = Index(gpu_label);
    if (!index) {
      return MakeError(ErrorCode::kInvalidArgument, "series " + s.name + " has gpu=\"" +
                                                        std::string(gpu_label) +
                                                        "\"; expected a GPU index from 0 to 64");
    }
    auto [it, created] = slot.try_emplace(*index, out.gpus.size());
    std::string_view uuid = FirstLabel(s, {"UUID", "uuid", "gpu_uuid"});
    if (created) {
      Gpu g;
      g.index = *index;
      g.uuid = std::string(uuid);
      g.name = std::string(FirstLabel(s, {"modelName", "model_name", "DCGM_FI_DEV_NAME"}));
      g.pci_bus_id = std::string(s.Label("pci_bus_id"));
      g.serial = std::string(s.Label("DCGM_FI_DEV_SERIAL"));
      g.vbios_version = std::string(s.Label("DCGM_FI_DEV_VBIOS_VERSION"));
      g.inforom_version = std::string(s.Label("DCGM_FI_DEV_INFOROM_IMAGE_VER"));
      out.gpus.push_back(std::move(g));
      SampleRow row;
      row.gpu = *index;
      out.rows.push_back(row);
    } else if (!uuid.empty() && !out.gpus[it->second].uuid.empty() &&
               out.gpus[it->second].uuid != uuid) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "GPU " + std::to_string(*index) + " has two UUIDs: " +
                           out.gpus[it->second].uuid + " and " + std::string(uuid));
    }
    Gpu& gpu = out.gpus[it->second];
    if (gpu.uuid.empty()) gpu.uuid = std::string(uuid);
    TakeFacts(s, out.facts);
    if (s.name == "DCGM_FI_DEV_FB_TOTAL" && !IsBlank(s.value)) fb_total[*index] = s.value;
    if (s.name == "DCGM_FI_DEV_FB_RESERVED" && !IsBlank(s.value)) fb_reserved[*index] = s.value;
    auto m = Names().find(s.name);
    if (m == Names().end()) continue;
    if (IsBlank(s.value) || std::isinf(s.value)) {
      ++out.skipped;
      continue;
    }
    double v = s.value * m->second.to_stored;
    // gpufleet keeps NVML's integer units; a W reading of 8.969 is 8969 mW exactly.
    if (std::fabs(v) < 9e15) v = std::round(v);
    out.rows[it->second].set(m->second.field, v);
    ++out.samples;
  }
  if (out.gpus.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "no GPU series (DCGM_FI_* with a gpu label) on the page");
  }
  for (size_t i = 0; i < out.gpus.size(); ++i) {
    Gpu& g = out.gpus[i];
    if (g.uuid.empty()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "GPU " + std::to_string(g.index) + " has no UUID label");
    }
    const auto& row = out.rows[i];
    double mib = 0;
    if (auto t = fb_total.find(g.index); t != fb_total.end()) {
      mib = t->second;
    } else if (row.has(Field::kFbUsed) && row.has(Field::kFbFree)) {
      mib = row.values[static_cast<size_t>(Field::kFbUsed)] +
            row.values[static_cast<size_t>(Field::kFbFree)];
      if (auto r = fb_reserved.find(g.index); r != fb_reserved.end()) mib += r->second;
    }
    g.memory_total_bytes = static_cast<uint64_t>(mib) << 20;
  }
  return out;
}

}  // namespace gpufleet::scrape
