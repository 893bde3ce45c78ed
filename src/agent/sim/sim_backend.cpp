// The simulated backend: a node of identical GPUs from the catalogue, with identities derived
// from the hostname so a restarted simulator re-registers the same GPUs.

#include <cstdio>
#include <functional>

#include "agent/gpu_backend.h"

namespace gpufleet {
namespace {

// Typical PCI bus numbers of an 8-GPU HGX board.
constexpr unsigned kBusIds[] = {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb};

uint64_t Mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class SimBackend : public GpuBackend {
 public:
  explicit SimBackend(SimNodeSpec spec) : spec_(std::move(spec)) {}
  std::string Name() const override { return "sim"; }
  bool Simulated() const override { return true; }
  Result<DriverInfo> Driver() override {
    return DriverInfo{spec_.driver_version, spec_.cuda_driver_version};
  }
  Result<std::vector<Gpu>> Inventory() override {
    std::vector<Gpu> gpus;
    uint64_t seed = std::hash<std::string>{}(spec_.hostname);
    for (int i = 0; i < spec_.gpu_count; ++i) {
      uint64_t a = Mix(seed + static_cast<uint64_t>(i) * 2 + 1);
      uint64_t b = Mix(a);
      char uuid[64];
      std::snprintf(uuid, sizeof uuid, "GPU-%08x-%04x-%04x-%04x-%012llx",
                    static_cast<unsigned>(a >> 32), static_cast<unsigned>((a >> 16) & 0xffff),
                    static_cast<unsigned>(a & 0xffff), static_cast<unsigned>(b >> 48),
                    static_cast<unsigned long long>(b & 0xffffffffffffULL));
      char serial[32];
      std::snprintf(serial, sizeof serial, "16522%08llu",
                    static_cast<unsigned long long>(b % 100000000ULL));
      char bus[32];
      unsigned bus_no = i < 8 ? kBusIds[i] : 0xe0 + static_cast<unsigned>(i);
      std::snprintf(bus, sizeof bus, "00000000:%02X:00.0", bus_no);
      Gpu g;
      g.index = i;
      g.uuid = uuid;
      g.serial = serial;
      g.name = spec_.model->nvml_names.empty() ? spec_.model->name : spec_.model->nvml_names[0];
      g.pci_bus_id = bus;
      g.memory_total_bytes =
          static_cast<uint64_t>(spec_.model->memory_gib * 1024.0 * 1024.0 * 1024.0);
      g.vbios_version = "96.00.74.00.01";
      g.inforom_version = "G520.0200.00.05";
      g.mig_mode = spec_.model->mig_supported ? 0 : -1;
      gpus.push_back(std::move(g));
    }
    return gpus;
  }

 private:
  SimNodeSpec spec_;
};

}  // namespace

std::unique_ptr<GpuBackend> MakeSimBackend(SimNodeSpec spec) {
  return std::make_unique<SimBackend>(std::move(spec));
}

}  // namespace gpufleet
