// The NVML backend: dlopen("libnvidia-ml.so.1"), resolve the versioned entry points (newest
// first, as nvml.h maps them), and read each GPU's identity. Per-GPU failures are recorded on
// that GPU so one lost GPU does not hide the others.

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "agent/gpu_backend.h"
#include "agent/nvml/nvml_api.h"

namespace gpufleet {
namespace {

const char* ReturnName(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS:
      return "SUCCESS";
    case NVML_ERROR_UNINITIALIZED:
      return "UNINITIALIZED";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case NVML_ERROR_NOT_SUPPORTED:
      return "NOT_SUPPORTED";
    case NVML_ERROR_NO_PERMISSION:
      return "NO_PERMISSION";
    case NVML_ERROR_NOT_FOUND:
      return "NOT_FOUND";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "INSUFFICIENT_SIZE";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "DRIVER_NOT_LOADED";
    case NVML_ERROR_TIMEOUT:
      return "TIMEOUT";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
      return "LIBRARY_NOT_FOUND";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "FUNCTION_NOT_FOUND";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU_IS_LOST";
    case NVML_ERROR_RESET_REQUIRED:
      return "RESET_REQUIRED";
    default:
      return "UNKNOWN";
  }
}

std::string ComputeModeName(int mode) {
  switch (mode) {
    case NVML_COMPUTEMODE_DEFAULT:
      return "default";
    case NVML_COMPUTEMODE_EXCLUSIVE_THREAD:
      return "exclusive_thread";
    case NVML_COMPUTEMODE_PROHIBITED:
      return "prohibited";
    case NVML_COMPUTEMODE_EXCLUSIVE_PROCESS:
      return "exclusive_process";
    default:
      return "unknown";
  }
}

class NvmlBackend : public GpuBackend {
 public:
  ~NvmlBackend() override {
    if (events_ && event_free_) event_free_(events_);
    if (shutdown_) shutdown_();
    if (lib_) dlclose(lib_);
  }

  Status Load(const std::string& path) {
    lib_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib_) {
      const char* why = dlerror();
      return MakeError(ErrorCode::kUnavailable,
                       "cannot load NVML (" + path + "): " + (why ? why : "not found") +
                           "; install the NVIDIA driver, or point --nvml-library / "
                           "GPUFLEET_NVML_LIBRARY at libnvidia-ml.so.1, or use --backend sim");
    }
    // Newest versioned symbol first, as nvml.h maps the unversioned names.
    init_ = Sym<NvmlInitFn>({"nvmlInit_v2", "nvmlInit"});
    shutdown_ = Sym<NvmlShutdownFn>({"nvmlShutdown"});
    error_string_ = Sym<NvmlErrorStringFn>({"nvmlErrorString"});
    driver_version_ = Sym<NvmlSystemGetDriverVersionFn>({"nvmlSystemGetDriverVersion"});
    cuda_version_ = Sym<NvmlSystemGetCudaDriverVersionFn>(
        {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"});
    count_ = Sym<NvmlDeviceGetCountFn>({"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
    handle_ = Sym<NvmlDeviceGetHandleByIndexFn>(
        {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
    uuid_ = Sym<NvmlDeviceGetStringFn>({"nvmlDeviceGetUUID"});
    name_ = Sym<NvmlDeviceGetStringFn>({"nvmlDeviceGetName"});
    serial_ = Sym<NvmlDeviceGetStringFn>({"nvmlDeviceGetSerial"});
    vbios_ = Sym<NvmlDeviceGetStringFn>({"nvmlDeviceGetVbiosVersion"});
    inforom_ = Sym<NvmlDeviceGetStringFn>({"nvmlDeviceGetInforomImageVersion"});
    inforom_object_ = Sym<NvmlDeviceGetInforomVersionFn>({"nvmlDeviceGetInforomVersion"});
    gsp_ = Sym<NvmlDeviceGetGspFirmwareVersionFn>({"nvmlDeviceGetGspFirmwareVersion"});
    pci_ = Sym<NvmlDeviceGetPciInfoFn>(
        {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"});
    memory_ = Sym<NvmlDeviceGetMemoryInfoFn>({"nvmlDeviceGetMemoryInfo"});
    minor_ = Sym<NvmlDeviceGetUintFn>({"nvmlDeviceGetMinorNumber"});
    mig_ = Sym<NvmlDeviceGetMigModeFn>({"nvmlDeviceGetMigMode"});
    gi_profile_ =
        Sym<NvmlDeviceGetGpuInstanceProfileInfoVFn>({"nvmlDeviceGetGpuInstanceProfileInfoV"});
    gi_list_ = Sym<NvmlDeviceGetGpuInstancesFn>({"nvmlDeviceGetGpuInstances"});
    utilization_ = Sym<NvmlDeviceGetUtilizationRatesFn>({"nvmlDeviceGetUtilizationRates"});
    temperature_ = Sym<NvmlDeviceGetTemperatureFn>({"nvmlDeviceGetTemperature"});
    power_ = Sym<NvmlDeviceGetUintFn>({"nvmlDeviceGetPowerUsage"});
    power_limit_ = Sym<NvmlDeviceGetUintFn>({"nvmlDeviceGetEnforcedPowerLimit"});
    energy_ = Sym<NvmlDeviceGetUllFn>({"nvmlDeviceGetTotalEnergyConsumption"});
    clock_ = Sym<NvmlDeviceGetClockInfoFn>({"nvmlDeviceGetClockInfo"});
    clock_reasons_ = Sym<NvmlDeviceGetUllFn>(
        {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
    pcie_throughput_ = Sym<NvmlDeviceGetPcieThroughputFn>({"nvmlDeviceGetPcieThroughput"});
    pcie_replay_ = Sym<NvmlDeviceGetUintFn>({"nvmlDeviceGetPcieReplayCounter"});
    ecc_ = Sym<NvmlDeviceGetTotalEccErrorsFn>({"nvmlDeviceGetTotalEccErrors"});
    retired_ = Sym<NvmlDeviceGetRetiredPagesFn>({"nvmlDeviceGetRetiredPages"});
    retired_pending_ = Sym<NvmlDeviceGetEnableStateFn>({"nvmlDeviceGetRetiredPagesPendingStatus"});
    remapped_ = Sym<NvmlDeviceGetRemappedRowsFn>({"nvmlDeviceGetRemappedRows"});
    nvlink_state_ = Sym<NvmlDeviceGetNvLinkStateFn>({"nvmlDeviceGetNvLinkState"});
    persistence_ = Sym<NvmlDeviceGetEnableStateFn>({"nvmlDeviceGetPersistenceMode"});
    ecc_mode_ = Sym<NvmlDeviceGetEccModeFn>({"nvmlDeviceGetEccMode"});
    compute_mode_ = Sym<NvmlDeviceGetComputeModeFn>({"nvmlDeviceGetComputeMode"});
    power_management_limit_ = Sym<NvmlDeviceGetUintFn>({"nvmlDeviceGetPowerManagementLimit"});
    app_clock_ = Sym<NvmlDeviceGetClockInfoFn>({"nvmlDeviceGetApplicationsClock"});
    set_persistence_ = Sym<NvmlDeviceSetEnableStateFn>({"nvmlDeviceSetPersistenceMode"});
    set_ecc_ = Sym<NvmlDeviceSetEnableStateFn>({"nvmlDeviceSetEccMode"});
    set_compute_mode_ = Sym<NvmlDeviceSetComputeModeFn>({"nvmlDeviceSetComputeMode"});
    set_power_limit_ =
        Sym<NvmlDeviceSetPowerManagementLimitFn>({"nvmlDeviceSetPowerManagementLimit"});
    set_app_clocks_ = Sym<NvmlDeviceSetApplicationsClocksFn>({"nvmlDeviceSetApplicationsClocks"});
    set_mig_ = Sym<NvmlDeviceSetMigModeFn>({"nvmlDeviceSetMigMode"});
    event_create_ = Sym<NvmlEventSetCreateFn>({"nvmlEventSetCreate"});
    event_free_ = Sym<NvmlEventSetFreeFn>({"nvmlEventSetFree"});
    register_events_ = Sym<NvmlDeviceRegisterEventsFn>({"nvmlDeviceRegisterEvents"});
    event_wait_ = Sym<NvmlEventSetWaitFn>({"nvmlEventSetWait_v2", "nvmlEventSetWait"});
    if (!init_ || !shutdown_ || !count_ || !handle_ || !uuid_ || !name_) {
      return MakeError(ErrorCode::kUnavailable,
                       path +
                           " lacks the NVML entry points the agent needs (nvmlInit_v2, "
                           "nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2, "
                           "nvmlDeviceGetUUID, nvmlDeviceGetName); is it NVML?");
    }
    nvmlReturn_t r = init_();
    if (r != NVML_SUCCESS) {
      shutdown_ = nullptr;  // never initialised: nothing to shut down
      return MakeError(ErrorCode::kUnavailable, "nvmlInit failed: " + Describe(r));
    }
    RegisterXidEvents();
    return {};
  }

  std::string Name() const override { return "nvml"; }
  bool Simulated() const override { return false; }

  Result<DriverInfo> Driver() override {
    DriverInfo info;
    char buf[kNvmlDriverBufferSize] = {};
    if (driver_version_ && driver_version_(buf, sizeof buf) == NVML_SUCCESS) {
      info.driver_version = buf;
    }
    int cuda = 0;
    if (cuda_version_ && cuda_version_(&cuda) == NVML_SUCCESS) {
      info.cuda_driver_version =
          std::to_string(cuda / 1000) + "." + std::to_string(cuda % 1000 / 10);
    }
    return info;
  }

  Result<std::vector<Gpu>> Inventory() override {
    unsigned count = 0;
    nvmlReturn_t r = count_(&count);
    if (r != NVML_SUCCESS) {
      return MakeError(ErrorCode::kUnavailable, "nvmlDeviceGetCount failed: " + Describe(r));
    }
    std::vector<Gpu> gpus;
    for (unsigned i = 0; i < count; ++i) gpus.push_back(ReadGpu(i));
    return gpus;
  }

  // The error counters: ECC, retired pages, row remapping, NVLink links down.
  void SampleErrors(nvmlDevice_t dev, SampleRow& row) {
    auto put = [&](Field f, nvmlReturn_t r, double v) {
      if (r == NVML_SUCCESS) row.set(f, v);
    };
    if (ecc_) {
      auto ecc = [&](Field f, int type, int counter) {
        unsigned long long v = 0;
        nvmlReturn_t r = ecc_(dev, type, counter, &v);
        put(f, r, static_cast<double>(v));
      };
      ecc(Field::kEccSbeVolatile, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC);
      ecc(Field::kEccDbeVolatile, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC);
      ecc(Field::kEccSbeAggregate, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC);
      ecc(Field::kEccDbeAggregate, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC);
    }
    if (retired_) {
      auto pages = [&](Field f, int cause) {
        unsigned count = 0;  // a size query: how many pages, without listing them
        nvmlReturn_t r = retired_(dev, cause, &count, nullptr);
        put(f, r == NVML_ERROR_INSUFFICIENT_SIZE ? NVML_SUCCESS : r, count);
      };
      pages(Field::kRetiredSbe, NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS);
      pages(Field::kRetiredDbe, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR);
    }
    if (retired_pending_) {
      nvmlEnableState_t st = 0;
      nvmlReturn_t r = retired_pending_(dev, &st);
      put(Field::kRetiredPending, r, st ? 1 : 0);
    }
    if (remapped_) {
      unsigned corr = 0, unc = 0, pending = 0, failure = 0;
      nvmlReturn_t r = remapped_(dev, &corr, &unc, &pending, &failure);
      put(Field::kRemappedCorrectable, r, corr);
      put(Field::kRemappedUncorrectable, r, unc);
      put(Field::kRemapPending, r, pending ? 1 : 0);
      put(Field::kRemapFailure, r, failure ? 1 : 0);
    }
    if (nvlink_state_) {
      int links = 0, down = 0;
      for (unsigned link = 0; link < kNvmlNvlinkMaxLinks; ++link) {
        nvmlEnableState_t st = 0;
        if (nvlink_state_(dev, link, &st) != NVML_SUCCESS) continue;
        ++links;
        down += st ? 0 : 1;
      }
      if (links > 0) row.set(Field::kNvlinkLinksDown, down);
    }
  }

  SampleRow Sample(int index, int64_t time_ms) override {
    SampleRow row;
    row.time_ms = time_ms;
    row.gpu = index;
    nvmlDevice_t dev = nullptr;
    if (handle_(static_cast<unsigned>(index), &dev) != NVML_SUCCESS) return row;
    // Each read is independent: one a GPU does not support leaves only that field absent.
    auto put = [&](Field f, nvmlReturn_t r, double v) {
      if (r == NVML_SUCCESS) row.set(f, v);
    };
    if (utilization_) {
      nvmlUtilization_t u{};
      nvmlReturn_t r = utilization_(dev, &u);
      put(Field::kGpuUtil, r, u.gpu);
      put(Field::kMemCopyUtil, r, u.memory);
    }
    if (memory_) {
      nvmlMemory_t m{};
      nvmlReturn_t r = memory_(dev, &m);
      put(Field::kFbUsed, r, static_cast<double>(m.used >> 20));
      put(Field::kFbFree, r, static_cast<double>(m.free >> 20));
    }
    // Each reader calls NVML first and reads the out-value after (never in one expression:
    // the order in which call arguments are evaluated is unspecified).
    auto u32 = [&](Field f, auto&& call) {
      unsigned v = 0;
      nvmlReturn_t r = call(&v);
      put(f, r, v);
    };
    auto u64 = [&](Field f, auto&& call) {
      unsigned long long v = 0;
      nvmlReturn_t r = call(&v);
      put(f, r, static_cast<double>(v));
    };
    if (temperature_) {
      u32(Field::kGpuTemp, [&](unsigned* v) { return temperature_(dev, NVML_TEMPERATURE_GPU, v); });
    }
    if (power_) u32(Field::kPowerUsage, [&](unsigned* v) { return power_(dev, v); });
    if (power_limit_) u32(Field::kPowerLimit, [&](unsigned* v) { return power_limit_(dev, v); });
    if (energy_) u64(Field::kTotalEnergy, [&](unsigned long long* v) { return energy_(dev, v); });
    if (clock_) {
      u32(Field::kSmClock, [&](unsigned* v) { return clock_(dev, NVML_CLOCK_SM, v); });
      u32(Field::kMemClock, [&](unsigned* v) { return clock_(dev, NVML_CLOCK_MEM, v); });
    }
    if (clock_reasons_) {
      u64(Field::kClocksEventReasons,
          [&](unsigned long long* v) { return clock_reasons_(dev, v); });
    }
    if (pcie_throughput_) {  // each call samples a 20 ms window
      u32(Field::kPcieTx,
          [&](unsigned* v) { return pcie_throughput_(dev, NVML_PCIE_UTIL_TX_BYTES, v); });
      u32(Field::kPcieRx,
          [&](unsigned* v) { return pcie_throughput_(dev, NVML_PCIE_UTIL_RX_BYTES, v); });
    }
    if (pcie_replay_) u32(Field::kPcieReplay, [&](unsigned* v) { return pcie_replay_(dev, v); });
    SampleErrors(dev, row);
    return row;
  }

  // One setting through its NVML setter. ECC and MIG modes become the current ones only after
  // the GPU is reset; the message says so.
  Result<std::string> ApplySetting(int gpu, const std::string& setting,
                                   const std::string& value) override {
    GpuSettingValue want;
    GF_TRY_ASSIGN(want, ParseGpuSetting(setting, value));
    nvmlDevice_t dev = nullptr;
    if (nvmlReturn_t r = handle_(static_cast<unsigned>(gpu), &dev); r != NVML_SUCCESS) {
      return MakeError(ErrorCode::kUnavailable, "GPU " + std::to_string(gpu) + ": " + Describe(r));
    }
    auto missing = [&](const char* fn) {
      return MakeError(ErrorCode::kUnavailable, std::string("this NVML has no ") + fn);
    };
    nvmlReturn_t r = NVML_SUCCESS;
    std::string after;
    if (setting == "persistence_mode") {
      if (!set_persistence_) return missing("nvmlDeviceSetPersistenceMode");
      r = set_persistence_(dev, want.number);
    } else if (setting == "ecc_mode") {
      if (!set_ecc_) return missing("nvmlDeviceSetEccMode");
      r = set_ecc_(dev, want.number);
      after = "; takes effect after the GPU is reset";
    } else if (setting == "compute_mode") {
      if (!set_compute_mode_) return missing("nvmlDeviceSetComputeMode");
      r = set_compute_mode_(dev, want.number);
    } else if (setting == "power_limit_w") {
      if (!set_power_limit_) return missing("nvmlDeviceSetPowerManagementLimit");
      r = set_power_limit_(dev, static_cast<unsigned>(want.number) * 1000);
    } else if (setting == "application_clocks") {
      if (!set_app_clocks_) return missing("nvmlDeviceSetApplicationsClocks");
      r = set_app_clocks_(dev, static_cast<unsigned>(want.second),
                          static_cast<unsigned>(want.number));
    } else if (setting == "mig_mode") {
      if (!set_mig_) return missing("nvmlDeviceSetMigMode");
      nvmlReturn_t activation = NVML_SUCCESS;
      r = set_mig_(dev, static_cast<unsigned>(want.number), &activation);
      if (r == NVML_SUCCESS && activation != NVML_SUCCESS) {
        after = "; pending: " + Describe(activation);
      }
    }
    if (r != NVML_SUCCESS) {
      return MakeError(
          r == NVML_ERROR_NO_PERMISSION ? ErrorCode::kPermissionDenied : ErrorCode::kUnavailable,
          "GPU " + std::to_string(gpu) + ": setting " + setting + " to " + value + ": " +
              Describe(r));
    }
    return "GPU " + std::to_string(gpu) + ": " + setting + " set to " + value + after;
  }

  // Critical XID errors the driver queued since the last call (a zero-timeout wait each).
  std::vector<proto::GpuEvent> Events(int64_t time_ms) override {
    std::vector<proto::GpuEvent> out;
    if (!events_ || !event_wait_) return out;
    for (int guard = 0; guard < 1024; ++guard) {
      nvmlEventData_t data{};
      if (event_wait_(events_, &data, 0) != NVML_SUCCESS) break;  // TIMEOUT: nothing queued
      if (!(data.eventType & kNvmlEventTypeXidCriticalError)) continue;
      int gpu = -1;
      for (size_t i = 0; i < event_devices_.size(); ++i) {
        if (event_devices_[i] == data.device) gpu = static_cast<int>(i);
      }
      out.push_back({time_ms, gpu, "xid", static_cast<int64_t>(data.eventData)});
    }
    return out;
  }

 private:
  void RegisterXidEvents() {
    if (!event_create_ || !register_events_ || event_create_(&events_) != NVML_SUCCESS) {
      events_ = nullptr;
      return;
    }
    unsigned count = 0;
    if (count_(&count) != NVML_SUCCESS) return;
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t dev = nullptr;
      handle_(i, &dev);
      event_devices_.push_back(dev);
      // NOT_SUPPORTED on some GPUs: the set stays usable for the others.
      if (dev) register_events_(dev, kNvmlEventTypeXidCriticalError, events_);
    }
  }

  template <class Fn>
  Fn Sym(std::initializer_list<const char*> names) {
    for (const char* n : names) {
      if (void* p = dlsym(lib_, n)) return reinterpret_cast<Fn>(p);
    }
    return nullptr;
  }

  std::string Describe(nvmlReturn_t r) const {
    std::string text = std::string("NVML_ERROR_") + ReturnName(r) + " (" + std::to_string(r) + ")";
    if (error_string_) {
      if (const char* s = error_string_(r)) text += ": " + std::string(s);
    }
    return text;
  }

  // Reads one string attribute. NOT_SUPPORTED leaves it empty; other failures are returned.
  nvmlReturn_t ReadString(NvmlDeviceGetStringFn fn, nvmlDevice_t dev, unsigned size,
                          std::string& out) {
    if (!fn) return NVML_ERROR_FUNCTION_NOT_FOUND;
    std::string buf(size, '\0');
    nvmlReturn_t r = fn(dev, buf.data(), size);
    if (r == NVML_SUCCESS) out = buf.c_str();
    return r;
  }

  Gpu ReadGpu(unsigned index) {
    Gpu g;
    g.index = static_cast<int>(index);
    nvmlDevice_t dev = nullptr;
    nvmlReturn_t r = handle_(index, &dev);
    auto note = [&](nvmlReturn_t rc) {
      if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_SUPPORTED &&
          rc != NVML_ERROR_FUNCTION_NOT_FOUND && g.error.empty()) {
        g.error = ReturnName(rc);
      }
      return rc;
    };
    if (note(r) != NVML_SUCCESS) {
      g.uuid = "unknown-gpu-" + std::to_string(index);
      return g;
    }
    if (note(ReadString(uuid_, dev, kNvmlDeviceUuidBufferSize, g.uuid)) != NVML_SUCCESS) {
      g.uuid = "unknown-gpu-" + std::to_string(index);
    }
    note(ReadString(name_, dev, kNvmlDeviceNameBufferSize, g.name));
    note(ReadString(serial_, dev, kNvmlSerialBufferSize, g.serial));
    note(ReadString(vbios_, dev, kNvmlVbiosBufferSize, g.vbios_version));
    note(ReadString(inforom_, dev, kNvmlInforomBufferSize, g.inforom_version));
    if (inforom_object_) {
      for (auto [object, out] : {std::pair{NVML_INFOROM_OEM, &g.inforom_oem},
                                 {NVML_INFOROM_ECC, &g.inforom_ecc},
                                 {NVML_INFOROM_POWER, &g.inforom_power}}) {
        char buf[kNvmlInforomBufferSize] = {};
        if (note(inforom_object_(dev, object, buf, sizeof buf)) == NVML_SUCCESS) *out = buf;
      }
    }
    if (gsp_) {  // NOT_SUPPORTED when GSP firmware is off: left empty, not an error
      char buf[kNvmlGspFirmwareBufferSize] = {};
      if (note(gsp_(dev, buf)) == NVML_SUCCESS) g.gsp_firmware_version = buf;
    }
    if (pci_) {
      nvmlPciInfo_t pci{};
      if (note(pci_(dev, &pci)) == NVML_SUCCESS) g.pci_bus_id = pci.busId;
    }
    if (minor_) {  // Linux only: NOT_SUPPORTED elsewhere, left unknown
      unsigned minor = 0;
      if (note(minor_(dev, &minor)) == NVML_SUCCESS && minor < 255) {
        g.minor_number = static_cast<int>(minor);
      }
    }
    if (memory_) {
      nvmlMemory_t mem{};
      if (note(memory_(dev, &mem)) == NVML_SUCCESS) g.memory_total_bytes = mem.total;
    }
    if (mig_) {
      unsigned current = 0, pending = 0;
      nvmlReturn_t mr = mig_(dev, &current, &pending);
      if (mr == NVML_SUCCESS) g.mig_mode = current == 1 ? 1 : 0;
      note(mr);
    }
    if (g.mig_mode == 0) g.mig_layout.emplace();  // MIG off: no instances
    if (g.mig_mode == 1) g.mig_layout = ReadMigLayout(dev);
    ReadSettings(dev, g.settings);
    return g;
  }

  // The GPU instances of a MIG-enabled GPU by profile name ("1g.10gb" -> 4): each profile id
  // the GPU has, and how many instances of it exist. nullopt when the driver cannot tell
  // (no such entry points, no permission).
  std::optional<std::map<std::string, int>> ReadMigLayout(nvmlDevice_t dev) {
    if (!gi_profile_ || !gi_list_) return std::nullopt;
    std::map<std::string, int> layout;
    for (unsigned id = 0; id < kNvmlGpuInstanceProfileIds; ++id) {
      nvmlGpuInstanceProfileInfo_v2_t info{};
      info.version = kNvmlGpuInstanceProfileInfoV2;
      nvmlReturn_t r = gi_profile_(dev, id, &info);
      if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_INVALID_ARGUMENT) continue;
      if (r != NVML_SUCCESS) return std::nullopt;
      std::vector<nvmlGpuInstance_t> instances(std::clamp(info.instanceCount, 1u, 64u));
      unsigned count = static_cast<unsigned>(instances.size());
      r = gi_list_(dev, info.id, instances.data(), &count);
      if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_INVALID_ARGUMENT) continue;
      if (r != NVML_SUCCESS) return std::nullopt;
      if (count == 0) continue;
      info.name[sizeof info.name - 1] = '\0';
      std::string name = info.name;
      if (name.rfind("MIG ", 0) == 0) name.erase(0, 4);
      if (name.empty()) return std::nullopt;
      layout[name] += static_cast<int>(count);
    }
    return layout;
  }

  // The settings a profile can ask for; one a GPU does not support stays unknown (-1, empty).
  void ReadSettings(nvmlDevice_t dev, GpuSettings& s) {
    if (persistence_) {
      nvmlEnableState_t on = 0;
      if (persistence_(dev, &on) == NVML_SUCCESS) s.persistence_mode = on ? 1 : 0;
    }
    if (ecc_mode_) {
      nvmlEnableState_t current = 0, pending = 0;
      if (ecc_mode_(dev, &current, &pending) == NVML_SUCCESS) {
        s.ecc_mode = current ? 1 : 0;
        s.ecc_pending = pending ? 1 : 0;
      }
    }
    if (compute_mode_) {
      int mode = 0;
      if (compute_mode_(dev, &mode) == NVML_SUCCESS) s.compute_mode = ComputeModeName(mode);
    }
    if (power_management_limit_) {
      unsigned mw = 0;
      if (power_management_limit_(dev, &mw) == NVML_SUCCESS) {
        s.power_limit_w = static_cast<int>((mw + 500) / 1000);
      }
    }
    if (app_clock_) {
      unsigned graphics = 0, memory = 0;
      if (app_clock_(dev, NVML_CLOCK_GRAPHICS, &graphics) == NVML_SUCCESS) {
        s.app_clock_graphics_mhz = static_cast<int>(graphics);
      }
      if (app_clock_(dev, NVML_CLOCK_MEM, &memory) == NVML_SUCCESS) {
        s.app_clock_mem_mhz = static_cast<int>(memory);
      }
    }
  }

  void* lib_ = nullptr;
  NvmlInitFn init_ = nullptr;
  NvmlShutdownFn shutdown_ = nullptr;
  NvmlErrorStringFn error_string_ = nullptr;
  NvmlSystemGetDriverVersionFn driver_version_ = nullptr;
  NvmlSystemGetCudaDriverVersionFn cuda_version_ = nullptr;
  NvmlDeviceGetCountFn count_ = nullptr;
  NvmlDeviceGetHandleByIndexFn handle_ = nullptr;
  NvmlDeviceGetStringFn uuid_ = nullptr, name_ = nullptr, serial_ = nullptr, vbios_ = nullptr,
                        inforom_ = nullptr;
  NvmlDeviceGetInforomVersionFn inforom_object_ = nullptr;
  NvmlDeviceGetGspFirmwareVersionFn gsp_ = nullptr;
  NvmlDeviceGetPciInfoFn pci_ = nullptr;
  NvmlDeviceGetUintFn minor_ = nullptr;
  NvmlDeviceGetMemoryInfoFn memory_ = nullptr;
  NvmlDeviceGetMigModeFn mig_ = nullptr;
  NvmlDeviceGetGpuInstanceProfileInfoVFn gi_profile_ = nullptr;
  NvmlDeviceGetGpuInstancesFn gi_list_ = nullptr;
  NvmlDeviceGetUtilizationRatesFn utilization_ = nullptr;
  NvmlDeviceGetTemperatureFn temperature_ = nullptr;
  NvmlDeviceGetUintFn power_ = nullptr, power_limit_ = nullptr, pcie_replay_ = nullptr;
  NvmlDeviceGetUllFn energy_ = nullptr, clock_reasons_ = nullptr;
  NvmlDeviceGetClockInfoFn clock_ = nullptr;
  NvmlDeviceGetPcieThroughputFn pcie_throughput_ = nullptr;
  NvmlDeviceGetTotalEccErrorsFn ecc_ = nullptr;
  NvmlDeviceGetRetiredPagesFn retired_ = nullptr;
  NvmlDeviceGetEnableStateFn retired_pending_ = nullptr;
  NvmlDeviceGetRemappedRowsFn remapped_ = nullptr;
  NvmlDeviceGetNvLinkStateFn nvlink_state_ = nullptr;
  NvmlDeviceGetEnableStateFn persistence_ = nullptr;
  NvmlDeviceGetEccModeFn ecc_mode_ = nullptr;
  NvmlDeviceGetComputeModeFn compute_mode_ = nullptr;
  NvmlDeviceGetUintFn power_management_limit_ = nullptr;
  NvmlDeviceGetClockInfoFn app_clock_ = nullptr;
  NvmlDeviceSetEnableStateFn set_persistence_ = nullptr, set_ecc_ = nullptr;
  NvmlDeviceSetComputeModeFn set_compute_mode_ = nullptr;
  NvmlDeviceSetPowerManagementLimitFn set_power_limit_ = nullptr;
  NvmlDeviceSetApplicationsClocksFn set_app_clocks_ = nullptr;
  NvmlDeviceSetMigModeFn set_mig_ = nullptr;
  NvmlEventSetCreateFn event_create_ = nullptr;
  NvmlEventSetFreeFn event_free_ = nullptr;
  NvmlDeviceRegisterEventsFn register_events_ = nullptr;
  NvmlEventSetWaitFn event_wait_ = nullptr;
  nvmlEventSet_t events_ = nullptr;
  std::vector<nvmlDevice_t> event_devices_;  // by GPU index
};

}  // namespace

Result<std::unique_ptr<GpuBackend>> OpenNvmlBackend(const std::string& library_path) {
  std::string path = library_path;
  if (path.empty()) {
    const char* env = std::getenv("GPUFLEET_NVML_LIBRARY");
    path = env && *env ? env : "libnvidia-ml.so.1";
  }
  auto backend = std::make_unique<NvmlBackend>();
  GF_TRY(backend->Load(path));
  return std::unique_ptr<GpuBackend>(std::move(backend));
}

}  // namespace gpufleet
