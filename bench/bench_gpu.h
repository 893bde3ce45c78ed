#pragma once
// Simulated GPU telemetry with realistic noise for the benchmarks: the values NVML gives
// (integers: %, MiB, degC, MHz, mW, mJ, KB/s, counts) at 1 Hz.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

namespace gpufleet::bench {

// The 16 fields, in this order: GPU util %, memory util %, FB used and free MiB, GPU and
// memory temperature, power and enforced limit mW, total energy mJ, SM and memory clock MHz,
// PCIe TX and RX KB/s, PCIe replays, ECC SBE and DBE volatile.
constexpr int kBenchFields = 16;

// One GPU's telemetry: busy and idle phases of ~10 minutes; power follows utilisation up to
// TDP with sensor noise, temperature follows power with lag, memory steps with jobs.
class GpuModel {
 public:
  explicit GpuModel(uint64_t seed) : rng_(seed) {}
  void Next(double out[kBenchFields]) {
    if (rng_() % 600 == 0) busy_ = !busy_, fb_ = busy_ ? 20'000 + rng_() % 60'000 : 0;
    util_ = busy_ ? std::clamp(util_ + Noise(3), 70.0, 100.0) : (rng_() % 20 == 0 ? 1 : 0);
    double power_mw = 70'000 + util_ * 6'300 + Noise(2'500);
    temp_ += (30 + power_mw / 10'000 - temp_) * 0.02;
    energy_ += static_cast<int64_t>(power_mw);
    out[0] = util_;                                           // gpu util %
    out[1] = busy_ ? std::round(util_ * 0.6 + Noise(2)) : 0;  // memory util %
    out[2] = fb_;                                             // fb used MiB
    out[3] = 81'559 - fb_;                                    // fb free MiB
    out[4] = std::round(temp_);                               // gpu temp
    out[5] = std::round(temp_ + 6);                           // memory temp
    out[6] = std::round(power_mw);                            // power mW
    out[7] = 700'000;                                         // enforced limit mW
    out[8] = static_cast<double>(energy_);                    // total energy mJ
    out[9] = busy_ ? (rng_() % 50 == 0 ? 1755 : 1980) : 345;  // SM clock MHz
    out[10] = busy_ ? 2619 : 1593;                            // memory clock MHz
    out[11] = busy_ ? std::round(12'000 + Noise(800)) : 2;    // PCIe TX KB/s
    out[12] = busy_ ? std::round(48'000 + Noise(3'000)) : 3;  // PCIe RX KB/s
    out[13] = 0;                                              // PCIe replays
    out[14] = sbe_ += (rng_() % 100'000 == 0);                // ECC SBE volatile
    out[15] = 0;                                              // ECC DBE volatile
  }

 private:
  double Noise(double amplitude) {
    return std::round((static_cast<double>(rng_() % 2001) / 1000.0 - 1.0) * amplitude);
  }
  std::mt19937_64 rng_;
  bool busy_ = false;
  double util_ = 0, fb_ = 0, temp_ = 35, sbe_ = 0;
  int64_t energy_ = 4'000'000'000;
};

}  // namespace gpufleet::bench
