#include "model/telemetry.h"

namespace gpufleet {

const std::array<FieldInfo, kFieldCount>& Fields() {
  static const std::array<FieldInfo, kFieldCount> kFields{{
      {Field::kGpuUtil, "gpu_util", "%", "DCGM_FI_DEV_GPU_UTIL", "gauge", 1,
       "GPU utilization (in %)."},
      {Field::kMemCopyUtil, "mem_copy_util", "%", "DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", 1,
       "Memory utilization (in %)."},
      {Field::kFbUsed, "fb_used", "MiB", "DCGM_FI_DEV_FB_USED", "gauge", 1,
       "Framebuffer memory used (in MiB)."},
      {Field::kFbFree, "fb_free", "MiB", "DCGM_FI_DEV_FB_FREE", "gauge", 1,
       "Framebuffer memory free (in MiB)."},
      {Field::kGpuTemp, "gpu_temp", "C", "DCGM_FI_DEV_GPU_TEMP", "gauge", 1,
       "GPU temperature (in C)."},
      {Field::kMemoryTemp, "memory_temp", "C", "DCGM_FI_DEV_MEMORY_TEMP", "gauge", 1,
       "Memory temperature (in C)."},
      {Field::kPowerUsage, "power_usage", "mW", "DCGM_FI_DEV_POWER_USAGE", "gauge", 0.001,
       "Power draw (in W)."},
      {Field::kPowerLimit, "power_limit", "mW", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "gauge", 0.001,
       "Enforced power limit (in W)."},
      {Field::kTotalEnergy, "total_energy", "mJ", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
       1, "Total energy consumption since boot (in mJ)."},
      {Field::kSmClock, "sm_clock", "MHz", "DCGM_FI_DEV_SM_CLOCK", "gauge", 1,
       "SM clock frequency (in MHz)."},
      {Field::kMemClock, "mem_clock", "MHz", "DCGM_FI_DEV_MEM_CLOCK", "gauge", 1,
       "Memory clock frequency (in MHz)."},
      {Field::kClocksEventReasons, "clocks_event_reasons", "bitmask",
       "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", 1,
       "Current clock event (throttle) reasons, NVML bitmask."},
      {Field::kPcieTx, "pcie_tx", "KB/s", "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "gauge", 1,
       "PCIe transmit throughput (in KB/s)."},
      {Field::kPcieRx, "pcie_rx", "KB/s", "DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "gauge", 1,
       "PCIe receive throughput (in KB/s)."},
      {Field::kPcieReplay, "pcie_replay", "count", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", 1,
       "Total number of PCIe retries."},
      {Field::kEccSbeVolatile, "ecc_sbe_volatile", "count", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
       "counter", 1, "Total number of single-bit volatile ECC errors."},
      {Field::kEccDbeVolatile, "ecc_dbe_volatile", "count", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
       "counter", 1, "Total number of double-bit volatile ECC errors."},
      {Field::kEccSbeAggregate, "ecc_sbe_aggregate", "count", "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
       "counter", 1, "Total number of single-bit persistent ECC errors."},
      {Field::kEccDbeAggregate, "ecc_dbe_aggregate", "count", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
       "counter", 1, "Total number of double-bit persistent ECC errors."},
      {Field::kRetiredSbe, "retired_sbe", "pages", "DCGM_FI_DEV_RETIRED_SBE", "counter", 1,
       "Total number of retired pages due to single-bit errors."},
      {Field::kRetiredDbe, "retired_dbe", "pages", "DCGM_FI_DEV_RETIRED_DBE", "counter", 1,
       "Total number of retired pages due to double-bit errors."},
      {Field::kRetiredPending, "retired_pending", "bool", "DCGM_FI_DEV_RETIRED_PENDING", "gauge", 1,
       "Whether pages are pending retirement."},
      {Field::kRemappedCorrectable, "remapped_correctable", "rows",
       "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", 1,
       "Number of remapped rows for correctable errors."},
      {Field::kRemappedUncorrectable, "remapped_uncorrectable", "rows",
       "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", 1,
       "Number of remapped rows for uncorrectable errors."},
      {Field::kRemapPending, "remap_pending", "bool", "DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", 1,
       "Whether remapping of rows is pending."},
      {Field::kRemapFailure, "remap_failure", "bool", "DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", 1,
       "Whether remapping of rows has failed."},
      {Field::kNvlinkLinksDown, "nvlink_links_down", "links", "", "gauge", 1,
       "NVLink links reported down."},
      {Field::kXidLast, "xid_last", "xid", "DCGM_FI_DEV_XID_ERRORS", "gauge", 1,
       "Value of the last XID error encountered."},
  }};
  return kFields;
}

const FieldInfo& Info(Field f) { return Fields()[static_cast<size_t>(f)]; }

std::optional<Field> ParseField(std::string_view name) {
  for (const auto& f : Fields()) {
    if (f.name == name || f.dcgm_name == name) return f.field;
  }
  return std::nullopt;
}

}  // namespace gpufleet
