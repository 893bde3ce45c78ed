#pragma once
// The subset of NVML's C API the agent calls, declared by the project itself (Debian has no
// NVML headers) so the build needs no CUDA or driver. Types and values follow NVML's nvml.h;
// struct layouts must match it exactly. The library is loaded at run time (nvml_backend.cpp).

#include <cstdint>

extern "C" {

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;

enum : nvmlReturn_t {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_UNKNOWN = 999,
};

constexpr unsigned kNvmlDeviceUuidBufferSize = 96;
constexpr unsigned kNvmlDeviceNameBufferSize = 96;
constexpr unsigned kNvmlSerialBufferSize = 30;
constexpr unsigned kNvmlVbiosBufferSize = 32;
constexpr unsigned kNvmlInforomBufferSize = 16;
constexpr unsigned kNvmlGspFirmwareBufferSize = 0x40;
// nvmlInforomObject_t: which InfoROM object's version nvmlDeviceGetInforomVersion reads.
enum nvmlInforomObject_t { NVML_INFOROM_OEM = 0, NVML_INFOROM_ECC = 1, NVML_INFOROM_POWER = 2 };
constexpr unsigned kNvmlDriverBufferSize = 80;

typedef struct nvmlPciInfo_st {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlUtilization_st {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

typedef int nvmlEnableState_t;  // NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1

enum : int {
  NVML_TEMPERATURE_GPU = 0,
  NVML_CLOCK_GRAPHICS = 0,
  NVML_CLOCK_SM = 1,
  NVML_CLOCK_MEM = 2,
  NVML_PCIE_UTIL_TX_BYTES = 0,
  NVML_PCIE_UTIL_RX_BYTES = 1,
  NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
  NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
  NVML_VOLATILE_ECC = 0,
  NVML_AGGREGATE_ECC = 1,
  NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
  NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1,
};
constexpr unsigned kNvmlNvlinkMaxLinks = 18;

// nvmlComputeMode_t
enum : int {
  NVML_COMPUTEMODE_DEFAULT = 0,
  NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,  // deprecated
  NVML_COMPUTEMODE_PROHIBITED = 2,
  NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
};

typedef struct nvmlEventSet_st* nvmlEventSet_t;
constexpr unsigned long long kNvmlEventTypeXidCriticalError = 0x8;
typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

// MIG: a GPU instance, and what one of a GPU's instance profiles is
// (NVML_GPU_INSTANCE_PROFILE_1_SLICE = 0 ... 12 in current headers; an id the GPU does not
// have answers NOT_SUPPORTED or INVALID_ARGUMENT).
typedef struct nvmlGpuInstance_st* nvmlGpuInstance_t;
typedef struct nvmlGpuInstanceProfileInfo_v2_st {
  unsigned int version;  // kNvmlGpuInstanceProfileInfoV2
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;  // the most instances of it the GPU can hold
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
  char name[96];  // "MIG 1g.10gb"
} nvmlGpuInstanceProfileInfo_v2_t;
static_assert(sizeof(nvmlGpuInstanceProfileInfo_v2_t) == 152, "nvml.h's layout");
// NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2): the size, and the version in the top byte.
constexpr unsigned kNvmlGpuInstanceProfileInfoV2 =
    static_cast<unsigned>(sizeof(nvmlGpuInstanceProfileInfo_v2_t)) | (2u << 24);
constexpr unsigned kNvmlGpuInstanceProfileIds = 16;  // ids tried: 0..15
constexpr nvmlReturn_t kNvmlErrorArgumentVersionMismatch = 25;

}  // extern "C"

// Function pointer types, one per entry point.
using NvmlInitFn = nvmlReturn_t (*)();
using NvmlShutdownFn = nvmlReturn_t (*)();
using NvmlErrorStringFn = const char* (*)(nvmlReturn_t);
using NvmlSystemGetDriverVersionFn = nvmlReturn_t (*)(char*, unsigned);
using NvmlSystemGetCudaDriverVersionFn = nvmlReturn_t (*)(int*);
using NvmlDeviceGetCountFn = nvmlReturn_t (*)(unsigned*);
using NvmlDeviceGetHandleByIndexFn = nvmlReturn_t (*)(unsigned, nvmlDevice_t*);
using NvmlDeviceGetStringFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned);
using NvmlDeviceGetInforomVersionFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlInforomObject_t, char*,
                                                       unsigned);
// The buffer is NVML_GSP_FIRMWARE_VERSION_BUF_SIZE (0x40) bytes; no length is passed.
using NvmlDeviceGetGspFirmwareVersionFn = nvmlReturn_t (*)(nvmlDevice_t, char*);
using NvmlDeviceGetPciInfoFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);
using NvmlDeviceGetMemoryInfoFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using NvmlDeviceGetMigModeFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*);
using NvmlDeviceGetGpuInstanceProfileInfoVFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned,
                                                                nvmlGpuInstanceProfileInfo_v2_t*);
// (device, profile id, instances[capacity], in: capacity, out: how many there are)
using NvmlDeviceGetGpuInstancesFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlGpuInstance_t*,
                                                     unsigned*);
using NvmlDeviceGetUtilizationRatesFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*);
using NvmlDeviceGetTemperatureFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*);
using NvmlDeviceGetUintFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);
using NvmlDeviceGetUllFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using NvmlDeviceGetClockInfoFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*);
using NvmlDeviceGetPcieThroughputFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*);
using NvmlDeviceGetTotalEccErrorsFn = nvmlReturn_t (*)(nvmlDevice_t, int, int, unsigned long long*);
using NvmlDeviceGetRetiredPagesFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*,
                                                     unsigned long long*);
using NvmlDeviceGetEnableStateFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlEnableState_t*);
using NvmlDeviceGetRemappedRowsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*, unsigned*,
                                                     unsigned*);
using NvmlDeviceGetNvLinkStateFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlEnableState_t*);
// Settings: getters and the setters drift remediation calls (root only on a real node).
using NvmlDeviceGetEccModeFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlEnableState_t*,
                                                nvmlEnableState_t*);
using NvmlDeviceGetComputeModeFn = nvmlReturn_t (*)(nvmlDevice_t, int*);
using NvmlDeviceSetEnableStateFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlEnableState_t);
using NvmlDeviceSetComputeModeFn = nvmlReturn_t (*)(nvmlDevice_t, int);
using NvmlDeviceSetPowerManagementLimitFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned);
// (device, memClockMHz, graphicsClockMHz): memory first, as nvml.h has it.
using NvmlDeviceSetApplicationsClocksFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned);
using NvmlDeviceSetMigModeFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlReturn_t*);
using NvmlEventSetCreateFn = nvmlReturn_t (*)(nvmlEventSet_t*);
using NvmlEventSetFreeFn = nvmlReturn_t (*)(nvmlEventSet_t);
using NvmlDeviceRegisterEventsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long,
                                                    nvmlEventSet_t);
using NvmlEventSetWaitFn = nvmlReturn_t (*)(nvmlEventSet_t, nvmlEventData_t*, unsigned);
