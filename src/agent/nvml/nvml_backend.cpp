// The NVML backend: dlopen("libnvidia-ml.so.1"), resolve the versioned entry points (newest
// first, as nvml.h maps them), and read each GPU's identity. Per-GPU failures are recorded on
// that GPU so one lost GPU does not hide the others.

#include <dlfcn.h>

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

class NvmlBackend : public GpuBackend {
 public:
  ~NvmlBackend() override {
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
    pci_ = Sym<NvmlDeviceGetPciInfoFn>(
        {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"});
    memory_ = Sym<NvmlDeviceGetMemoryInfoFn>({"nvmlDeviceGetMemoryInfo"});
    mig_ = Sym<NvmlDeviceGetMigModeFn>({"nvmlDeviceGetMigMode"});
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

 private:
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
    if (pci_) {
      nvmlPciInfo_t pci{};
      if (note(pci_(dev, &pci)) == NVML_SUCCESS) g.pci_bus_id = pci.busId;
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
    return g;
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
  NvmlDeviceGetPciInfoFn pci_ = nullptr;
  NvmlDeviceGetMemoryInfoFn memory_ = nullptr;
  NvmlDeviceGetMigModeFn mig_ = nullptr;
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
