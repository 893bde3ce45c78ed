// A fake libnvidia-ml.so.1 for tests: exports the NVML entry points the agent resolves, with
// values scripted by the JSON file named in $FAKE_NVML_SCRIPT (see tests/fixtures/nvml/).
// Any function can be scripted to fail per GPU: "errors": {"nvmlDeviceGetMemoryInfo": 15}.
// ECC and MIG mode changes stay pending until the GPU is reset ($FAKE_NVML_RESETS, below).
// Each call is counted in $FAKE_NVML_CALLS (a file) when set, so tests can see it was used.

#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

#include "agent/nvml/nvml_api.h"

namespace json = boost::json;

namespace {

std::mutex g_mu;
json::object g_script;  // guarded by g_mu
bool g_initialised = false;

int Index(nvmlDevice_t dev) { return static_cast<int>(reinterpret_cast<intptr_t>(dev)) - 1; }

const json::object* Gpu(int index) {
  if (!g_script.contains("gpus")) return nullptr;
  const auto& gpus = g_script.at("gpus").as_array();
  if (index < 0 || index >= static_cast<int>(gpus.size())) return nullptr;
  return &gpus[index].as_object();
}

// The scripted failure of `fn` on GPU `index`, or NVML_SUCCESS.
nvmlReturn_t Scripted(int index, const char* fn) {
  const json::object* g = Gpu(index);
  if (!g) return NVML_ERROR_INVALID_ARGUMENT;
  if (auto it = g->find("errors"); it != g->end()) {
    const auto& errors = it->value().as_object();
    if (auto e = errors.find(fn); e != errors.end())
      return static_cast<nvmlReturn_t>(e->value().as_int64());
  }
  return NVML_SUCCESS;
}

// A GPU reset happens outside the process (the agent's --reset-gpu-command): a test's command
// appends the GPU's index to $FAKE_NVML_RESETS, and the next read of a mode finds the pending
// ECC and MIG modes current, as after a real reset. Called with g_mu held.
void ApplyResets() {
  const char* path = std::getenv("FAKE_NVML_RESETS");
  if (!path || !g_script.contains("gpus")) return;
  std::ifstream in(path);
  if (!in) return;
  auto& gpus = g_script.at("gpus").as_array();
  for (int index; in >> index;) {
    if (index < 0 || index >= static_cast<int>(gpus.size())) continue;
    auto& g = gpus[static_cast<size_t>(index)].as_object();
    if (auto* s = g.if_contains("settings"); s && s->is_object()) {
      if (auto* ecc = s->as_object().if_contains("ecc"))
        ecc->as_array().at(0) = ecc->as_array().at(1);
    }
    if (auto* p = g.if_contains("mig_pending")) {
      json::value pending = *p;
      g["mig"] = pending;
    }
  }
  in.close();
  std::ofstream(path, std::ios::trunc);
}

nvmlReturn_t CopyString(int index, const char* fn, const char* key, char* buf, unsigned len) {
  std::lock_guard lock(g_mu);
  if (!g_initialised) return NVML_ERROR_UNINITIALIZED;
  if (nvmlReturn_t r = Scripted(index, fn); r != NVML_SUCCESS) return r;
  const json::object* g = Gpu(index);
  auto it = g->find(key);
  if (it == g->end()) return NVML_ERROR_NOT_SUPPORTED;
  std::string value(it->value().as_string());
  if (value.size() + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, value.c_str(), value.size() + 1);
  return NVML_SUCCESS;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit_v2() {
  std::lock_guard lock(g_mu);
  const char* path = std::getenv("FAKE_NVML_SCRIPT");
  if (!path) return NVML_ERROR_DRIVER_NOT_LOADED;
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  boost::system::error_code ec;
  auto v = json::parse(buf.str(), ec);
  if (ec || !v.is_object()) return NVML_ERROR_UNKNOWN;
  g_script = v.as_object();
  if (auto it = g_script.find("init_error"); it != g_script.end() && it->value().as_int64() != 0) {
    return static_cast<nvmlReturn_t>(it->value().as_int64());
  }
  g_initialised = true;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlShutdown() {
  std::lock_guard lock(g_mu);
  g_initialised = false;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    default:
      return "Unknown Error";
  }
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetDriverVersion(char* buf,
                                                                               unsigned len) {
  std::lock_guard lock(g_mu);
  std::string v(g_script.at("driver_version").as_string());
  if (v.size() + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, v.c_str(), v.size() + 1);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(
    int* version) {
  std::lock_guard lock(g_mu);
  *version = static_cast<int>(g_script.at("cuda_driver_version").as_int64());
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  std::lock_guard lock(g_mu);
  if (!g_initialised) return NVML_ERROR_UNINITIALIZED;
  *count = static_cast<unsigned>(g_script.at("gpus").as_array().size());
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(
    unsigned index, nvmlDevice_t* dev) {
  std::lock_guard lock(g_mu);
  if (!g_initialised) return NVML_ERROR_UNINITIALIZED;
  if (nvmlReturn_t r = Scripted(static_cast<int>(index), "nvmlDeviceGetHandleByIndex_v2");
      r != NVML_SUCCESS)
    return r;
  *dev = reinterpret_cast<nvmlDevice_t>(static_cast<intptr_t>(index) + 1);
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* b,
                                                                      unsigned n) {
  return CopyString(Index(d), "nvmlDeviceGetUUID", "uuid", b, n);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* b,
                                                                      unsigned n) {
  return CopyString(Index(d), "nvmlDeviceGetName", "name", b, n);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t d, char* b,
                                                                        unsigned n) {
  return CopyString(Index(d), "nvmlDeviceGetSerial", "serial", b, n);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t d,
                                                                              char* b, unsigned n) {
  return CopyString(Index(d), "nvmlDeviceGetVbiosVersion", "vbios", b, n);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetInforomImageVersion(nvmlDevice_t d,
                                                                                     char* b,
                                                                                     unsigned n) {
  return CopyString(Index(d), "nvmlDeviceGetInforomImageVersion", "inforom", b, n);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetInforomVersion(nvmlDevice_t d,
                                                                                int object, char* b,
                                                                                unsigned n) {
  const char* key = object == 0 ? "inforom_oem" : object == 1 ? "inforom_ecc" : "inforom_power";
  return CopyString(Index(d), "nvmlDeviceGetInforomVersion", key, b, n);
}
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetGspFirmwareVersion(nvmlDevice_t d,
                                                                                    char* b) {
  return CopyString(Index(d), "nvmlDeviceGetGspFirmwareVersion", "gsp_firmware", b, 0x40);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d,
                                                                            nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof *pci);
  return CopyString(Index(d), "nvmlDeviceGetPciInfo_v3", "pci_bus_id", pci->busId,
                    sizeof pci->busId);
}

// "minor": the GPU's /dev/nvidiaN number; its index when the script gives none.
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d,
                                                                             unsigned* minor) {
  std::lock_guard lock(g_mu);
  if (nvmlReturn_t r = Scripted(Index(d), "nvmlDeviceGetMinorNumber"); r != NVML_SUCCESS) return r;
  const json::object* g = Gpu(Index(d));
  auto it = g->find("minor");
  *minor = static_cast<unsigned>(it == g->end() ? Index(d) : it->value().as_int64());
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d,
                                                                            nvmlMemory_t* mem) {
  std::lock_guard lock(g_mu);
  if (nvmlReturn_t r = Scripted(Index(d), "nvmlDeviceGetMemoryInfo"); r != NVML_SUCCESS) return r;
  mem->total = static_cast<unsigned long long>(Gpu(Index(d))->at("memory_total").as_int64());
  mem->used = 0;
  mem->free = mem->total;
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d,
                                                                         unsigned* cur,
                                                                         unsigned* pending) {
  std::lock_guard lock(g_mu);
  ApplyResets();
  if (nvmlReturn_t r = Scripted(Index(d), "nvmlDeviceGetMigMode"); r != NVML_SUCCESS) return r;
  const json::object* g = Gpu(Index(d));
  auto it = g->find("mig");
  if (it == g->end() || it->value().is_null()) return NVML_ERROR_NOT_SUPPORTED;
  *cur = *pending = static_cast<unsigned>(it->value().as_int64());
  if (auto p = g->find("mig_pending"); p != g->end()) {
    *pending = static_cast<unsigned>(p->value().as_int64());
  }
  return NVML_SUCCESS;
}

// MIG: "mig_profiles": [{"id": 0, "name": "MIG 1g.10gb", "slices": 1, "memory_mb": 9856,
// "max": 7, "count": 4}] — the GPU's instance profiles and how many instances of each exist
// (only while "mig" is 1). An id not listed is NOT_SUPPORTED; a struct version other than
// nvml.h's is ARGUMENT_VERSION_MISMATCH, as the real library answers.
static const json::object* MigProfile(nvmlDevice_t d, unsigned id) {
  const json::object* g = Gpu(Index(d));
  if (!g) return nullptr;
  auto it = g->find("mig_profiles");
  if (it == g->end()) return nullptr;
  for (const auto& p : it->value().as_array()) {
    if (p.as_object().at("id").as_int64() == static_cast<int64_t>(id)) return &p.as_object();
  }
  return nullptr;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(
    nvmlDevice_t d, unsigned id, nvmlGpuInstanceProfileInfo_v2_t* info) {
  std::lock_guard lock(g_mu);
  if (nvmlReturn_t r = Scripted(Index(d), "nvmlDeviceGetGpuInstanceProfileInfoV");
      r != NVML_SUCCESS)
    return r;
  if (info->version != kNvmlGpuInstanceProfileInfoV2) return kNvmlErrorArgumentVersionMismatch;
  const json::object* p = MigProfile(d, id);
  if (!p) return id < 13 ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
  info->id = id;
  info->sliceCount = static_cast<unsigned>(p->at("slices").as_int64());
  info->instanceCount = static_cast<unsigned>(p->at("max").as_int64());
  info->memorySizeMB = static_cast<unsigned long long>(p->at("memory_mb").as_int64());
  std::string name(p->at("name").as_string());
  std::snprintf(info->name, sizeof info->name, "%s", name.c_str());
  return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetGpuInstances(
    nvmlDevice_t d, unsigned id, nvmlGpuInstance_t* instances, unsigned* count) {
  std::lock_guard lock(g_mu);
  if (nvmlReturn_t r = Scripted(Index(d), "nvmlDeviceGetGpuInstances"); r != NVML_SUCCESS) return r;
  const json::object* g = Gpu(Index(d));
  auto mig = g->find("mig");
  if (mig == g->end() || !mig->value().is_int64() || mig->value().as_int64() != 1) {
    return NVML_ERROR_NOT_SUPPORTED;  // MIG off
  }
  const json::object* p = MigProfile(d, id);
  if (!p) return NVML_ERROR_NOT_SUPPORTED;
  const auto n = static_cast<unsigned>(p->at("count").as_int64());
  if (*count < static_cast<unsigned>(p->at("max").as_int64())) return NVML_ERROR_INSUFFICIENT_SIZE;
  for (unsigned i = 0; i < n; ++i) {
    instances[i] = reinterpret_cast<nvmlGpuInstance_t>(static_cast<intptr_t>(id * 100 + i + 1));
  }
  *count = n;
  return NVML_SUCCESS;
}

}  // extern "C"

// Telemetry: each reads "telemetry": {"<key>": value or [values]} of the GPU; a missing key is
// NOT_SUPPORTED, and "errors" still apply by function name.
namespace {
nvmlReturn_t Telemetry(nvmlDevice_t d, const char* fn, const char* key, const json::value** out) {
  if (nvmlReturn_t r = Scripted(Index(d), fn); r != NVML_SUCCESS) return r;
  const json::object* g = Gpu(Index(d));
  auto t = g->find("telemetry");
  if (t == g->end()) return NVML_ERROR_NOT_SUPPORTED;
  auto v = t->value().as_object().find(key);
  if (v == t->value().as_object().end()) return NVML_ERROR_NOT_SUPPORTED;
  *out = &v->value();
  return NVML_SUCCESS;
}
template <class T>
nvmlReturn_t Number(nvmlDevice_t d, const char* fn, const char* key, T* out, size_t at = 0) {
  std::lock_guard lock(g_mu);
  const json::value* v = nullptr;
  if (nvmlReturn_t r = Telemetry(d, fn, key, &v); r != NVML_SUCCESS) return r;
  const json::value& n = v->is_array() ? v->as_array().at(at) : *v;
  *out = static_cast<T>(n.to_number<double>());
  return NVML_SUCCESS;
}
}  // namespace

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  nvmlReturn_t r = Number(d, "nvmlDeviceGetUtilizationRates", "utilization", &u->gpu, 0);
  return r == NVML_SUCCESS
             ? Number(d, "nvmlDeviceGetUtilizationRates", "utilization", &u->memory, 1)
             : r;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned* t) {
  return sensor == NVML_TEMPERATURE_GPU ? Number(d, "nvmlDeviceGetTemperature", "temperature", t)
                                        : NVML_ERROR_INVALID_ARGUMENT;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned* mw) {
  return Number(d, "nvmlDeviceGetPowerUsage", "power_mw", mw);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned* mw) {
  return Number(d, "nvmlDeviceGetEnforcedPowerLimit", "power_limit_mw", mw);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d,
                                                             unsigned long long* mj) {
  return Number(d, "nvmlDeviceGetTotalEnergyConsumption", "energy_mj", mj);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned* mhz) {
  if (type == NVML_CLOCK_SM) return Number(d, "nvmlDeviceGetClockInfo", "sm_clock", mhz);
  if (type == NVML_CLOCK_MEM) return Number(d, "nvmlDeviceGetClockInfo", "mem_clock", mhz);
  return NVML_ERROR_NOT_SUPPORTED;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d,
                                                                unsigned long long* r) {
  return Number(d, "nvmlDeviceGetCurrentClocksEventReasons", "clocks_event_reasons", r);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t d, int counter, unsigned* kbs) {
  return Number(d, "nvmlDeviceGetPcieThroughput", "pcie_kbs", kbs,
                counter == NVML_PCIE_UTIL_RX_BYTES);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t d, unsigned* n) {
  return Number(d, "nvmlDeviceGetPcieReplayCounter", "pcie_replay", n);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter,
                                                     unsigned long long* n) {
  // "ecc": [sbe volatile, dbe volatile, sbe aggregate, dbe aggregate]
  return Number(d, "nvmlDeviceGetTotalEccErrors", "ecc", n, counter * 2 + type);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t d, int cause, unsigned* count,
                                                   unsigned long long* addresses) {
  nvmlReturn_t r = Number(d, "nvmlDeviceGetRetiredPages", "retired_pages", count, cause);
  if (r == NVML_SUCCESS && *count > 0 && addresses == nullptr) return NVML_ERROR_INSUFFICIENT_SIZE;
  return r;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d, int* pending) {
  return Number(d, "nvmlDeviceGetRetiredPagesPendingStatus", "retired_pending", pending);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned* corr, unsigned* unc,
                                                   unsigned* pending, unsigned* failure) {
  // "remapped_rows": [correctable, uncorrectable, pending, failure]
  nvmlReturn_t r = Number(d, "nvmlDeviceGetRemappedRows", "remapped_rows", corr, 0);
  if (r != NVML_SUCCESS) return r;
  Number(d, "nvmlDeviceGetRemappedRows", "remapped_rows", unc, 1);
  Number(d, "nvmlDeviceGetRemappedRows", "remapped_rows", pending, 2);
  return Number(d, "nvmlDeviceGetRemappedRows", "remapped_rows", failure, 3);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned link, int* active) {
  std::lock_guard lock(g_mu);
  const json::value* v = nullptr;
  if (nvmlReturn_t r = Telemetry(d, "nvmlDeviceGetNvLinkState", "nvlink_states", &v);
      r != NVML_SUCCESS)
    return r;
  const auto& links = v->as_array();
  if (link >= links.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *active = static_cast<int>(links[link].as_int64());
  return NVML_SUCCESS;
}

// XID events: "xid_events": [{"gpu": 0, "xid": 79}, ...] in the script, each delivered once by
// nvmlEventSetWait_v2; then NVML_ERROR_TIMEOUT, as when nothing is queued.
namespace {
size_t g_next_event = 0;  // guarded by g_mu
}

FAKE_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  *set = reinterpret_cast<nvmlEventSet_t>(static_cast<intptr_t>(0x5e7));
  std::lock_guard lock(g_mu);
  g_next_event = 0;
  return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t) { return NVML_SUCCESS; }
FAKE_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t, unsigned long long,
                                                  nvmlEventSet_t) {
  return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t, nvmlEventData_t* data, unsigned) {
  std::lock_guard lock(g_mu);
  auto it = g_script.find("xid_events");
  if (it == g_script.end() || g_next_event >= it->value().as_array().size()) {
    return NVML_ERROR_TIMEOUT;
  }
  const auto& e = it->value().as_array()[g_next_event++].as_object();
  data->device = reinterpret_cast<nvmlDevice_t>(static_cast<intptr_t>(e.at("gpu").as_int64()) + 1);
  data->eventType = kNvmlEventTypeXidCriticalError;
  data->eventData = static_cast<unsigned long long>(e.at("xid").as_int64());
  return NVML_SUCCESS;
}

// Settings: "settings": {"persistence": 1, "ecc": [current, pending], "compute_mode": 0,
// "power_limit_mw": 72000, "app_clocks": [graphics, memory]} per GPU; a missing key is
// NOT_SUPPORTED. The setters change the script in memory (so the next read shows the new value)
// and append one line per call to $FAKE_NVML_SETTERS when set: "FUNCTION GPU VALUE...", the
// record tests read to see what the agent asked of the driver. "errors" apply by name.
namespace {
json::value* Setting(nvmlDevice_t d, const char* key) {
  if (!g_script.contains("gpus")) return nullptr;
  auto& gpus = g_script.at("gpus").as_array();
  int index = Index(d);
  if (index < 0 || index >= static_cast<int>(gpus.size())) return nullptr;
  auto& g = gpus[index].as_object();
  auto* s = g.if_contains("settings");
  if (!s || !s->is_object()) return nullptr;
  return s->as_object().if_contains(key);
}
template <class T>
nvmlReturn_t GetSetting(nvmlDevice_t d, const char* fn, const char* key, T* out, int at = -1) {
  std::lock_guard lock(g_mu);
  if (nvmlReturn_t r = Scripted(Index(d), fn); r != NVML_SUCCESS) return r;
  json::value* v = Setting(d, key);
  if (!v) return NVML_ERROR_NOT_SUPPORTED;
  const json::value& n = at >= 0 ? v->as_array().at(static_cast<size_t>(at)) : *v;
  *out = static_cast<T>(n.to_number<double>());
  return NVML_SUCCESS;
}
// Records the call and stores `value` under `key` (at `at` of an array when at >= 0).
nvmlReturn_t SetSetting(nvmlDevice_t d, const char* fn, const char* key, json::value value,
                        int at = -1, const std::string& logged = "") {
  std::lock_guard lock(g_mu);
  if (const char* path = std::getenv("FAKE_NVML_SETTERS")) {
    std::ofstream out(path, std::ios::app);
    out << fn << ' ' << Index(d) << ' ' << (logged.empty() ? json::serialize(value) : logged)
        << '\n';
  }
  if (nvmlReturn_t r = Scripted(Index(d), fn); r != NVML_SUCCESS) return r;
  json::value* v = Setting(d, key);
  if (!v) return NVML_ERROR_NOT_SUPPORTED;
  if (at >= 0) {
    v->as_array().at(static_cast<size_t>(at)) = value;
  } else {
    *v = value;
  }
  return NVML_SUCCESS;
}
}  // namespace

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, int* on) {
  return GetSetting(d, "nvmlDeviceGetPersistenceMode", "persistence", on);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t d, int* current, int* pending) {
  {
    std::lock_guard lock(g_mu);
    ApplyResets();
  }
  nvmlReturn_t r = GetSetting(d, "nvmlDeviceGetEccMode", "ecc", current, 0);
  return r == NVML_SUCCESS ? GetSetting(d, "nvmlDeviceGetEccMode", "ecc", pending, 1) : r;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t d, int* mode) {
  return GetSetting(d, "nvmlDeviceGetComputeMode", "compute_mode", mode);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t d, unsigned* mw) {
  return GetSetting(d, "nvmlDeviceGetPowerManagementLimit", "power_limit_mw", mw);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t d, int type, unsigned* mhz) {
  if (type != NVML_CLOCK_GRAPHICS && type != NVML_CLOCK_MEM) return NVML_ERROR_INVALID_ARGUMENT;
  return GetSetting(d, "nvmlDeviceGetApplicationsClock", "app_clocks", mhz,
                    type == NVML_CLOCK_MEM ? 1 : 0);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceSetPersistenceMode(nvmlDevice_t d, int on) {
  return SetSetting(d, "nvmlDeviceSetPersistenceMode", "persistence", on);
}
// The pending mode: the current one changes only with a reset, as on a real GPU.
FAKE_EXPORT nvmlReturn_t nvmlDeviceSetEccMode(nvmlDevice_t d, int on) {
  return SetSetting(d, "nvmlDeviceSetEccMode", "ecc", on, 1);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceSetComputeMode(nvmlDevice_t d, int mode) {
  return SetSetting(d, "nvmlDeviceSetComputeMode", "compute_mode", mode);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t d, unsigned mw) {
  return SetSetting(d, "nvmlDeviceSetPowerManagementLimit", "power_limit_mw", mw);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceSetApplicationsClocks(nvmlDevice_t d, unsigned mem,
                                                         unsigned graphics) {
  nvmlReturn_t r = SetSetting(d, "nvmlDeviceSetApplicationsClocks", "app_clocks", graphics, 0,
                              std::to_string(mem) + " " + std::to_string(graphics));
  if (r != NVML_SUCCESS) return r;
  std::lock_guard lock(g_mu);
  Setting(d, "app_clocks")->as_array().at(1) = mem;
  return NVML_SUCCESS;
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t d, unsigned mode,
                                              nvmlReturn_t* activation) {
  std::lock_guard lock(g_mu);
  if (const char* path = std::getenv("FAKE_NVML_SETTERS")) {
    std::ofstream out(path, std::ios::app);
    out << "nvmlDeviceSetMigMode " << Index(d) << ' ' << mode << '\n';
  }
  if (nvmlReturn_t r = Scripted(Index(d), "nvmlDeviceSetMigMode"); r != NVML_SUCCESS) return r;
  // As on a GPU in use: the new mode is pending until a reset (ApplyResets).
  auto& g = g_script.at("gpus").as_array().at(static_cast<size_t>(Index(d))).as_object();
  g["mig_pending"] = mode;
  *activation = NVML_ERROR_RESET_REQUIRED;
  return NVML_SUCCESS;
}
