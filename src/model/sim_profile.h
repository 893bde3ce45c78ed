#pragma once
// How a simulated GPU behaves while a job holds it (a job's `sim_profile`): the simulator's
// GPUs follow their job, and a free GPU idles at idle power.

#include <array>
#include <string_view>

namespace gpufleet {

// "training": steady, near full; "inference": a daily rhythm (busiest in the afternoon UTC);
// "bursty": development work, short bursts between long idle spells; "idle": holds its GPUs
// and does nothing (a notebook left open).
inline constexpr std::array<std::string_view, 4> kSimProfiles{"training", "inference", "bursty",
                                                              "idle"};
inline bool IsSimProfile(std::string_view p) {
  for (auto k : kSimProfiles) {
    if (k == p) return true;
  }
  return false;
}

}  // namespace gpufleet
