// The simulated backend: a node of identical GPUs from the catalogue, with identities derived
// from the hostname so a restarted simulator re-registers the same GPUs.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numbers>
#include <optional>
#include <random>
#include <set>
#include <utility>

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

// One simulated GPU's physics: utilisation and memory follow the job that holds it (its
// profile, model/sim_profile.h; a free GPU idles with nothing in memory), power follows
// utilisation up to the model's TDP with sensor noise, temperature follows power with thermal
// lag, clocks boost under load, and the energy counter integrates power.
class SimGpu {
 public:
  SimGpu(const GpuModelSpec& model, uint64_t seed) : model_(model), rng_(seed) {
    // As a data-center GPU ships: persistence on (nvidia-persistenced), ECC on, the default
    // compute mode, the power limit at the board's TDP, the application clocks of the sample.
    settings.persistence_mode = 1;
    settings.ecc_mode = settings.ecc_pending = 1;
    settings.compute_mode = "default";
    settings.power_limit_w = model.tdp_w;
    settings.app_clock_graphics_mhz = 1980;
    settings.app_clock_mem_mhz = 2619;
  }

  GpuSettings settings;
  int mig_mode = -1;

  // The job that holds this GPU now (job 0: none). The same job again changes nothing; a new
  // one draws its level and memory from its id, so all of a job's GPUs look alike.
  void SetLoad(const proto::GpuLoad& load) {
    if (load.job == load_.job && load.profile == load_.profile) return;
    load_ = load;
    const uint64_t h = Mix(static_cast<uint64_t>(load.job) * 0x9e37ULL + 17);
    const double draw = static_cast<double>(h % 1000) / 1000.0;  // 0..1, the job's own
    const double total_mib = model_.memory_gib * 1024;
    level_ = 0;
    fb_used_mib_ = 0;
    if (load.profile == "training") {
      level_ = 88 + draw * 11;
      fb_used_mib_ = total_mib * (0.70 + draw * 0.25);
    } else if (load.profile == "inference") {
      level_ = 0.7 + draw * 0.3;  // a share of the daily peak
      fb_used_mib_ = total_mib * (0.35 + draw * 0.25);
    } else if (load.profile == "bursty") {
      level_ = 60 + draw * 40;
      fb_used_mib_ = total_mib * (0.15 + draw * 0.35);
    } else if (load.job != 0) {  // idle: a CUDA context and little else
      fb_used_mib_ = total_mib * (0.02 + draw * 0.06);
    }
  }

  void Inject(const proto::Injection& in) {
    if (in.clear) {
      lost_ = false;
      held_temp_.reset();
    }
    if (in.xid) pending_xids_.push_back(*in.xid);
    if (in.ecc_dbe) ecc_dbe_ += *in.ecc_dbe;
    if (in.temperature_c) held_temp_ = *in.temperature_c;
    if (in.lost) lost_ = true;
  }
  // What a GPU reset (or a reboot) clears: a lost GPU answers again, volatile ECC counts
  // start from zero, held faults end.
  void Reset() {
    lost_ = false;
    held_temp_.reset();
    ecc_dbe_ = 0;
    pending_xids_.clear();
  }
  bool lost() const { return lost_; }
  std::vector<int> TakeXids() { return std::exchange(pending_xids_, {}); }

  SampleRow Sample(int index, int64_t now) {
    if (lost_) return SampleRow{now, index};  // a lost GPU answers nothing
    double dt = last_ms_ ? std::clamp((now - last_ms_) / 1000.0, 0.0, 3600.0) : 1.0;
    last_ms_ = now;
    util_ = std::clamp(Utilization(now), 0.0, 100.0);
    busy_ = util_ >= 20;
    double tdp_mw =
        std::min(model_.tdp_w, settings.power_limit_w > 0 ? settings.power_limit_w : model_.tdp_w) *
        1000.0;
    double idle_mw = model_.tdp_w * 100.0;  // a tenth of the TDP
    double power = std::clamp(idle_mw + (tdp_mw - idle_mw) * util_ / 100.0 + Noise(tdp_mw * 0.004),
                              idle_mw * 0.8, tdp_mw);
    double ambient = 28, full_load = model_.max_operating_temp_c - 8;
    double target = ambient + (full_load - ambient) * power / tdp_mw;
    temp_ += (target - temp_) * (1 - std::exp(-dt / 45.0));  // ~45 s thermal time constant
    energy_mj_ += power * dt;
    double total_mib = model_.memory_gib * 1024;
    SampleRow row;
    row.time_ms = now;
    row.gpu = index;
    row.set(Field::kGpuUtil, std::round(util_));
    row.set(Field::kMemCopyUtil,
            busy_ ? std::round(std::clamp(util_ * 0.55 + Noise(3), 0.0, 100.0)) : 0);
    row.set(Field::kFbUsed, std::round(fb_used_mib_));
    row.set(Field::kFbFree, std::round(total_mib - fb_used_mib_));
    double temp = held_temp_ ? *held_temp_ : std::round(temp_);
    row.set(Field::kGpuTemp, temp);
    row.set(Field::kMemoryTemp, temp + 5);
    row.set(Field::kPowerUsage, std::round(power));
    row.set(Field::kPowerLimit,
            settings.power_limit_w > 0 ? settings.power_limit_w * 1000.0 : tdp_mw);
    row.set(Field::kTotalEnergy, std::round(energy_mj_));
    row.set(Field::kSmClock, busy_ ? (temp_ > model_.max_operating_temp_c - 3 ? 1755 : 1980) : 345);
    row.set(Field::kMemClock, busy_ ? 2619 : 1593);
    row.set(Field::kClocksEventReasons, busy_ ? 0 : 1);  // GpuIdle when idle
    row.set(Field::kPcieTx, busy_ ? std::round(12'000 + Noise(800)) : 2);
    row.set(Field::kPcieRx, busy_ ? std::round(48'000 + Noise(3'000)) : 3);
    row.set(Field::kPcieReplay, 0);
    row.set(Field::kEccSbeVolatile, 0);
    row.set(Field::kEccDbeVolatile, ecc_dbe_);
    row.set(Field::kEccSbeAggregate, 0);
    row.set(Field::kEccDbeAggregate, ecc_dbe_);
    if (model_.architecture == "ampere" || model_.architecture == "hopper" ||
        model_.architecture == "blackwell" || model_.architecture == "ada-lovelace") {
      row.set(Field::kRemappedCorrectable, 0);  // Ampere and later remap rows
      row.set(Field::kRemappedUncorrectable, 0);
      row.set(Field::kRemapPending, 0);
      row.set(Field::kRemapFailure, 0);
    } else {
      row.set(Field::kRetiredSbe, 0);  // older GPUs retire pages
      row.set(Field::kRetiredDbe, 0);
      row.set(Field::kRetiredPending, 0);
    }
    if (model_.nvlink_generation > 0) row.set(Field::kNvlinkLinksDown, 0);
    return row;
  }

 private:
  // What the job's profile does at `now`.
  double Utilization(int64_t now) {
    const std::string& p = load_.profile;
    const int64_t ran = std::max<int64_t>(0, now - load_.since_ms);
    if (load_.job == 0 || p == "idle" || p.empty()) return rng_() % 30 == 0 ? 1 : 0;
    if (p == "training") {
      // Steady, with a checkpoint every 30 minutes (a minute of little compute).
      if (ran % 1'800'000 >= 1'740'000) return 8 + Noise(4);
      return level_ + Noise(3);
    }
    if (p == "inference") {
      // Requests follow the day: quietest at 03:00 UTC, busiest at 15:00.
      const double hour = static_cast<double>(now % 86'400'000) / 3'600'000.0;
      const double rhythm = 0.5 - 0.5 * std::cos(2 * std::numbers::pi * (hour - 3) / 24);
      return 8 + 80 * rhythm * level_ + Noise(5);
    }
    // bursty: two-minute spells, a quarter of them busy, the same on all of the job's GPUs.
    const uint64_t spell = static_cast<uint64_t>(ran / 120'000);
    const bool burst = Mix(static_cast<uint64_t>(load_.job) * 1'000'003ULL + spell) % 4 == 0;
    return burst ? level_ + Noise(8) : (rng_() % 5 == 0 ? 2 : 0);
  }
  double Noise(double amplitude) {
    return (static_cast<double>(rng_() % 2001) / 1000.0 - 1.0) * amplitude;
  }

  const GpuModelSpec& model_;
  std::mt19937_64 rng_;
  bool busy_ = false;
  proto::GpuLoad load_;  // job 0: free
  double level_ = 0;     // the job's utilisation level (inference: its share of the peak)
  double util_ = 0, fb_used_mib_ = 0, temp_ = 32, energy_mj_ = 0;
  int64_t last_ms_ = 0;
  // Injected faults.
  bool lost_ = false;
  std::optional<double> held_temp_;
  double ecc_dbe_ = 0;
  std::vector<int> pending_xids_;
};

// The CUDA version a simulated driver reports: the newest its branch supports (data/compat.yaml).
std::string CudaOfDriver(const std::string& version) {
  int major = std::atoi(version.c_str());
  for (auto [min, cuda] : std::initializer_list<std::pair<int, const char*>>{{580, "13.0"},
                                                                             {575, "12.9"},
                                                                             {570, "12.8"},
                                                                             {560, "12.6"},
                                                                             {555, "12.5"},
                                                                             {550, "12.4"},
                                                                             {545, "12.3"},
                                                                             {535, "12.2"},
                                                                             {530, "12.1"},
                                                                             {525, "12.0"}}) {
    if (major >= min) return cuda;
  }
  return "11.8";
}

class SimBackend : public GpuBackend {
 public:
  explicit SimBackend(SimNodeSpec spec) : spec_(std::move(spec)) {
    if (spec_.cuda_driver_version.empty()) {
      spec_.cuda_driver_version = CudaOfDriver(spec_.driver_version);
    }
    uint64_t seed = std::hash<std::string>{}(spec_.hostname);
    for (int i = 0; i < spec_.gpu_count; ++i) {
      gpus_.emplace_back(*spec_.model, Mix(seed + i));
      gpus_.back().mig_mode = spec_.model->mig_supported ? 0 : -1;
      if (spec_.power_limit_w > 0) gpus_.back().settings.power_limit_w = spec_.power_limit_w;
    }
  }
  Status Inject(int gpu, const proto::Injection& injection) override {
    if (injection.gpu_part()) {
      if (gpu < 0 || gpu >= static_cast<int>(gpus_.size())) {
        return MakeError(ErrorCode::kNotFound, "no GPU " + std::to_string(gpu) + " on this node");
      }
      for (const auto& [setting, value] : injection.settings) {
        if (auto set = Set(gpu, setting, value); !set.ok()) return set.error();
      }
      gpus_[gpu].Inject(injection);
    }
    for (const auto& [fact, value] : injection.facts) facts_[fact] = value;
    for (const auto& entry : injection.packages_add) {
      size_t eq = entry.find('=');
      spec_.extra_packages[entry.substr(0, eq)] = entry.substr(eq + 1);
      removed_.erase(entry.substr(0, eq));
    }
    for (const auto& name : injection.packages_remove) {
      spec_.extra_packages.erase(name);
      removed_.insert(name);
    }
    return {};
  }
  // The setting takes effect at once: a simulated reset makes ECC and MIG modes current.
  Result<std::string> ApplySetting(int gpu, const std::string& setting,
                                   const std::string& value) override {
    if (gpu < 0 || gpu >= static_cast<int>(gpus_.size())) {
      return MakeError(ErrorCode::kNotFound, "no GPU " + std::to_string(gpu) + " on this node");
    }
    // As NVML refuses a limit outside the board's constraints (here: a quarter of the TDP to
    // the TDP); an injected one, set "by hand", is not checked.
    if (setting == "power_limit_w") {
      int w = std::atoi(value.c_str());
      if (w < spec_.model->tdp_w / 4 || w > spec_.model->tdp_w) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "power_limit_w " + value + " is outside this GPU's range (" +
                             std::to_string(spec_.model->tdp_w / 4) + " to " +
                             std::to_string(spec_.model->tdp_w) + " W)");
      }
    }
    GF_TRY(Set(gpu, setting, value));
    bool reset = setting == "ecc_mode" || setting == "mig_mode";
    return "simulated: GPU " + std::to_string(gpu) + " " + setting + " set to " + value +
           (reset ? " (and the GPU reset)" : "");
  }
  void AdjustFacts(NodeFacts& f) override {
    f.image_id = "gpufleet-sim-node:2026.11";
    std::vector<DeviceFile> files{{"/dev/nvidia-uvm", "0666", "root"},
                                  {"/dev/nvidiactl", "0666", "root"}};
    for (int i = 0; i < spec_.gpu_count; ++i) {
      files.push_back({"/dev/nvidia" + std::to_string(i), "0666", "root"});
    }
    std::sort(files.begin(), files.end(),
              [](const DeviceFile& a, const DeviceFile& b) { return a.path < b.path; });
    f.device_files = std::move(files);
    for (const auto& [fact, value] : facts_) {
      if (fact == "kernel") f.kernel = value;
      if (fact == "os") f.os = value;
      if (fact == "image_id") f.image_id = value;
    }
  }
  Result<std::string> Remediate(int gpu, const std::string& action) override {
    if (action == "reboot_node") {
      for (auto& g : gpus_) g.Reset();
      return std::string("simulated reboot: every GPU reset");
    }
    if (gpu < 0 || gpu >= static_cast<int>(gpus_.size())) {
      return MakeError(ErrorCode::kNotFound, "no GPU " + std::to_string(gpu) + " on this node");
    }
    gpus_[gpu].Reset();
    return "simulated reset of GPU " + std::to_string(gpu);
  }
  std::vector<proto::GpuEvent> Events(int64_t time_ms) override {
    std::vector<proto::GpuEvent> out;
    if (faulty_ && !gpus_.empty() && time_ms - last_faulty_xid_ms_ >= 10000) {
      last_faulty_xid_ms_ = time_ms;
      out.push_back({time_ms, static_cast<int>(rng_() % gpus_.size()), "xid", 13});
    }
    for (size_t i = 0; i < gpus_.size(); ++i) {
      for (int xid : gpus_[i].TakeXids()) out.push_back({time_ms, static_cast<int>(i), "xid", xid});
    }
    return out;
  }
  Status SetLoads(const std::vector<proto::GpuLoad>& loads) override {
    for (const auto& l : loads) {
      if (l.gpu < 0 || l.gpu >= static_cast<int>(gpus_.size())) {
        return MakeError(ErrorCode::kNotFound, "no GPU " + std::to_string(l.gpu) + " on this node");
      }
    }
    for (size_t i = 0; i < gpus_.size(); ++i) {
      proto::GpuLoad load{static_cast<int>(i)};  // free unless listed
      for (const auto& l : loads) {
        if (l.gpu == static_cast<int>(i)) load = l;
      }
      gpus_[i].SetLoad(load);
    }
    return {};
  }
  SampleRow Sample(int index, int64_t time_ms) override {
    if (index < 0 || index >= static_cast<int>(gpus_.size())) return SampleRow{time_ms, index};
    return gpus_[index].Sample(index, time_ms);
  }
  std::optional<std::vector<Nic>> Nics() override {
    // An 8-GPU board has its InfiniBand adapters (two here, one port each, in the default
    // partition); smaller nodes none.
    if (spec_.gpu_count < 8) return std::vector<Nic>{};
    const std::map<int, std::vector<std::string>> pkeys{{1, {"0xffff"}}};
    return std::vector<Nic>{{"mlx5_0", nic_firmware_, "MT_0000000838", "MT4129", pkeys},
                            {"mlx5_1", nic_firmware_, "MT_0000000838", "MT4129", pkeys}};
  }

  std::optional<std::map<std::string, std::string>> Packages() override {
    // A GPU node's base: the data-center GPU manager, the fabric manager of its driver, SSH.
    std::map<std::string, std::string> out{
        {"datacenter-gpu-manager", "1:3.3.9"},
        {"nvidia-fabricmanager", spec_.driver_version + "-1"},
        {"openssh-server", "1:9.2p1-2+deb12u7"},
    };
    for (const auto& [name, version] : spec_.extra_packages) out[name] = version;
    if (!spec_.container_toolkit.empty()) {
      out[std::string(kContainerToolkitPackage)] = spec_.container_toolkit;
    }
    for (const auto& name : removed_) out.erase(name);
    return out;
  }

  std::optional<SimulatedAction> Simulate(const proto::Command& cmd) override {
    const auto& t = spec_.actions;
    SimulatedAction out;
    std::string version = cmd.args.empty() ? "" : cmd.args[0];
    if (cmd.action == "install-driver") {
      out.duration_ms = t.install_ms;
      out.message = "simulated install of driver " + version + ": active after a reboot";
    } else if (cmd.action == "flash-gpu-firmware" || cmd.action == "flash-nic-firmware") {
      out.duration_ms = t.flash_ms;
      out.message =
          std::string("simulated flash of ") +
          (cmd.action == "flash-gpu-firmware" ? "the GPUs' VBIOS " : "the NICs' firmware ") +
          version + ": active after a reboot";
    } else if (cmd.action == "reboot") {
      out.duration_ms = t.reboot_ms;
      out.reboot = true;
      out.message = "simulated reboot";
    } else if (cmd.action == "reset-gpu") {
      out.duration_ms = t.reset_ms;
      out.message = "simulated reset of GPU " + version;
    } else if (cmd.action == "validate") {
      out.duration_ms = t.validate_ms;
      out.ok = !faulty_;
      out.message =
          faulty_ ? "simulated diagnostic: FAIL (XIDs under load)" : "simulated diagnostic: PASS";
    } else {
      return std::nullopt;
    }
    if (t.failure_rate > 0 && !out.reboot &&
        static_cast<double>(rng_() % 10000) < t.failure_rate * 10000) {
      out.ok = false;
      out.message = "simulated failure of " + cmd.action;
      return out;
    }
    if (!out.ok) return out;
    if (cmd.action == "install-driver") pending_driver_.emplace(version, cmd.sim_faulty);
    if (cmd.action == "flash-gpu-firmware") pending_vbios_.emplace(version, cmd.sim_faulty);
    if (cmd.action == "flash-nic-firmware") pending_nic_.emplace(version, cmd.sim_faulty);
    if (cmd.action == "reset-gpu") {
      int gpu = version.empty() ? -1 : std::atoi(version.c_str());
      if (gpu < 0 || gpu >= static_cast<int>(gpus_.size())) {
        out.ok = false;
        out.message = "no GPU '" + version + "' on this node";
        return out;
      }
      gpus_[gpu].Reset();
    }
    return out;
  }

  // What was installed or flashed runs from now on; a faulty version makes the GPUs raise
  // XIDs (13, graphics engine exception) every 10 s.
  void Boot() override {
    auto take = [](std::optional<std::pair<std::string, bool>>& pending, std::string& into,
                   bool& faulty) {
      if (!pending) return;
      into = pending->first;
      faulty = pending->second;
      pending.reset();
    };
    if (pending_driver_) spec_.cuda_driver_version = CudaOfDriver(pending_driver_->first);
    take(pending_driver_, spec_.driver_version, driver_faulty_);
    take(pending_vbios_, vbios_, vbios_faulty_);
    take(pending_nic_, nic_firmware_, nic_faulty_);
    faulty_ = driver_faulty_ || vbios_faulty_ || nic_faulty_;
    for (auto& g : gpus_) g.Reset();
  }

  std::string Name() const override { return "sim"; }
  bool Simulated() const override { return true; }
  Result<DriverInfo> Driver() override {
    return DriverInfo{spec_.driver_version, spec_.cuda_driver_version};
  }
  Result<std::vector<Gpu>> Inventory() override {
    std::vector<Gpu> gpus;
    for (int i = 0; i < spec_.gpu_count; ++i) {
      auto from = spec_.gpus_from.find(i);
      const std::string& host = from == spec_.gpus_from.end() ? spec_.hostname : from->second.first;
      int index = from == spec_.gpus_from.end() ? i : from->second.second;
      uint64_t a = Mix(std::hash<std::string>{}(host) + static_cast<uint64_t>(index) * 2 + 1);
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
      g.minor_number = i;
      g.memory_total_bytes =
          static_cast<uint64_t>(spec_.model->memory_gib * 1024.0 * 1024.0 * 1024.0);
      g.vbios_version = vbios_;
      g.inforom_version = "G520.0200.00.05";
      if (i < static_cast<int>(gpus_.size())) {
        g.mig_mode = gpus_[i].mig_mode;
        // A simulated MIG-enabled GPU is split into its smallest instances, as mig-parted's
        // all-1g configurations do; with MIG off it has none.
        if (g.mig_mode == 0) g.mig_layout.emplace();
        if (g.mig_mode == 1 && !spec_.model->mig_profiles.empty()) {
          g.mig_layout = std::map<std::string, int>{
              {spec_.model->mig_profiles.front(), spec_.model->mig_max_instances}};
        }
        g.settings = gpus_[i].settings;
        if (gpus_[i].lost()) g.error = "GPU_IS_LOST";
      }
      gpus.push_back(std::move(g));
    }
    return gpus;
  }

 private:
  Status Set(int gpu, const std::string& setting, const std::string& value) {
    GpuSettingValue v;
    GF_TRY_ASSIGN(v, ParseGpuSetting(setting, value));
    SimGpu& g = gpus_[gpu];
    if (setting == "persistence_mode") g.settings.persistence_mode = v.number;
    if (setting == "ecc_mode") g.settings.ecc_mode = g.settings.ecc_pending = v.number;
    if (setting == "compute_mode") g.settings.compute_mode = value;
    if (setting == "power_limit_w") g.settings.power_limit_w = v.number;
    if (setting == "application_clocks") {
      g.settings.app_clock_graphics_mhz = v.number;
      g.settings.app_clock_mem_mhz = v.second;
    }
    if (setting == "mig_mode") {
      if (!spec_.model->mig_supported) {
        return MakeError(ErrorCode::kInvalidArgument, "this GPU model has no MIG");
      }
      g.mig_mode = v.number;
    }
    return {};
  }

  SimNodeSpec spec_;
  std::vector<SimGpu> gpus_;
  std::map<std::string, std::string> facts_;  // injected over the host's
  std::set<std::string> removed_;             // packages injected away
  std::mt19937_64 rng_{std::hash<std::string>{}(spec_.hostname) ^ 0x5eedULL};
  std::string vbios_ = "96.00.74.00.01";
  std::string nic_firmware_ = "28.39.1002";
  // Installed or flashed, active at the next Boot(): the version and whether it is faulty.
  std::optional<std::pair<std::string, bool>> pending_driver_, pending_vbios_, pending_nic_;
  bool driver_faulty_ = false, vbios_faulty_ = false, nic_faulty_ = false;
  bool faulty_ = false;  // a faulty version runs: the GPUs raise XIDs
  int64_t last_faulty_xid_ms_ = 0;
};

}  // namespace

std::unique_ptr<GpuBackend> MakeSimBackend(SimNodeSpec spec) {
  return std::make_unique<SimBackend>(std::move(spec));
}

}  // namespace gpufleet
