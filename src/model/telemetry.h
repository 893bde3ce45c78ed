#pragma once
// The per-GPU telemetry fields: what the agent samples, what the store keeps (in NVML's own
// integer units, which compress well) and how /metrics exposes them under dcgm-exporter's names
// (scaled to dcgm-exporter's units). The order is the wire order of protocol version 1.

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gpufleet {

enum class Field : uint8_t {
  kGpuUtil,                // %
  kMemCopyUtil,            // %
  kFbUsed,                 // MiB
  kFbFree,                 // MiB
  kGpuTemp,                // degrees C
  kMemoryTemp,             // degrees C
  kPowerUsage,             // mW
  kPowerLimit,             // mW (enforced)
  kTotalEnergy,            // mJ since driver load (counter)
  kSmClock,                // MHz
  kMemClock,               // MHz
  kClocksEventReasons,     // NVML bitmask
  kPcieTx,                 // KB/s
  kPcieRx,                 // KB/s
  kPcieReplay,             // count (counter)
  kEccSbeVolatile,         // count
  kEccDbeVolatile,         // count
  kEccSbeAggregate,        // count
  kEccDbeAggregate,        // count
  kRetiredSbe,             // pages
  kRetiredDbe,             // pages
  kRetiredPending,         // 0/1
  kRemappedCorrectable,    // rows
  kRemappedUncorrectable,  // rows
  kRemapPending,           // 0/1
  kRemapFailure,           // 0/1
  kNvlinkLinksDown,        // links reported down
  kXidLast,                // the most recent XID error's number (an event, kept as a gauge)
};
inline constexpr size_t kFieldCount = 28;

struct FieldInfo {
  Field field;
  std::string_view name;       // "gpu_util": API and series names
  std::string_view unit;       // as stored
  std::string_view dcgm_name;  // "DCGM_FI_DEV_GPU_UTIL"; empty: exposed under gpufleet_gpu_<name>
  std::string_view type;       // "gauge" or "counter"
  double metrics_scale;        // stored value x scale = exposed value (mW -> W: 0.001)
  std::string_view help;
};

const std::array<FieldInfo, kFieldCount>& Fields();
const FieldInfo& Info(Field f);
std::optional<Field> ParseField(std::string_view name);

// One GPU's fields at one time; `present` has bit i set when field i was read (a field the GPU
// does not support is absent, never zero).
struct SampleRow {
  int64_t time_ms = 0;
  int gpu = 0;  // index on the node
  uint32_t present = 0;
  std::array<double, kFieldCount> values{};
  bool has(Field f) const { return present & (1u << static_cast<int>(f)); }
  void set(Field f, double v) {
    present |= 1u << static_cast<int>(f);
    values[static_cast<size_t>(f)] = v;
  }
};

}  // namespace gpufleet
