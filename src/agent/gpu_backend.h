#pragma once
// GpuBackend: where a node agent learns about its GPUs. Two implementations: NVML (the real
// driver library, loaded with dlopen) and sim (a simulated node for demos and load tests).
// A backend is used from one thread at a time.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/catalog.h"
#include "model/profile.h"
#include "model/types.h"
#include "proto/proto.h"

namespace gpufleet {

struct DriverInfo {
  std::string driver_version;       // "550.54.15"
  std::string cuda_driver_version;  // "12.4"
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  virtual std::string Name() const = 0;  // "nvml" or "sim"
  virtual bool Simulated() const = 0;
  virtual Result<DriverInfo> Driver() = 0;
  // Every GPU the node has. A GPU that fails mid-read (e.g. GPU_IS_LOST) is still listed, with
  // what could be read and Gpu::error set; only a failure to enumerate at all is an error.
  virtual Result<std::vector<Gpu>> Inventory() = 0;
  // Reads every telemetry field of GPU `index`, stamped `time_ms`. A field the GPU does not
  // support (or that fails) is left absent, never reported as zero.
  virtual SampleRow Sample(int index, int64_t time_ms) = 0;
  // Events since the last call (XID errors), stamped `time_ms` when the source has no time.
  virtual std::vector<proto::GpuEvent> Events(int64_t time_ms) { return {}; }
  // Fault injection, for simulated GPUs only.
  virtual Status Inject(int gpu, const proto::Injection& injection) {
    return MakeError(ErrorCode::kConflict, "fault injection is for simulated GPUs");
  }
  // Which GPUs jobs hold and how they behave (proto::kSimLoadAction), for simulated GPUs only:
  // they follow their job, the others idle.
  virtual Status SetLoads(const std::vector<proto::GpuLoad>& loads) {
    return MakeError(ErrorCode::kConflict, "job profiles are for simulated GPUs");
  }
  // A remediation action ("reset_gpu", "reboot_node") done by the backend itself: simulated
  // GPUs come back clean. Real nodes run the agent's configured commands instead.
  virtual Result<std::string> Remediate(int gpu, const std::string& action) {
    return MakeError(ErrorCode::kConflict, "this backend does not remediate by itself");
  }
  // Sets one of a GPU's settings (drift remediation "auto": persistence_mode, ecc_mode,
  // compute_mode, power_limit_w, application_clocks, mig_mode; values as ParseGpuSetting takes
  // them) and says what it did.
  virtual Result<std::string> ApplySetting(int gpu, const std::string& setting,
                                           const std::string& value) {
    return MakeError(ErrorCode::kUnavailable, "this backend cannot change GPU settings");
  }
  // Facts the backend knows itself (a simulated node's kernel, image and device files), set over
  // the host's; real backends change nothing.
  virtual void AdjustFacts(NodeFacts& facts) {}
  // The node's InfiniBand / RoCE adapters, where the backend knows them itself (simulated
  // nodes); nullopt: read them from sysfs (ReadNics).
  virtual std::optional<std::vector<Nic>> Nics() { return std::nullopt; }
  // The node's installed packages (name -> upstream version), where the backend knows them
  // itself (simulated nodes); nullopt: read the package database under the agent's root.
  virtual std::optional<std::map<std::string, std::string>> Packages() { return std::nullopt; }
  // A node action (proto::kNodeActions) that a simulated backend carries out itself: what it
  // will report and how long it takes. A reboot's effects (a new driver or firmware becoming
  // the running one) wait for Boot(). Real backends: nullopt (the agent runs its programs).
  struct SimulatedAction {
    int64_t duration_ms = 0;
    bool ok = true;
    std::string message;
    bool reboot = false;  // the node goes away for duration_ms, then Boot()
  };
  virtual std::optional<SimulatedAction> Simulate(const proto::Command& command) {
    return std::nullopt;
  }
  virtual void Boot() {}
};

// Loads NVML from `library_path` (empty: $GPUFLEET_NVML_LIBRARY, then libnvidia-ml.so.1) and
// initialises it. Fails with kUnavailable and one clear line when the library is missing.
Result<std::unique_ptr<GpuBackend>> OpenNvmlBackend(const std::string& library_path);

struct SimNodeSpec {
  std::string hostname;
  const GpuModelSpec* model = nullptr;  // from the catalogue; required
  int gpu_count = 8;
  std::string driver_version = "550.54.15";
  std::string cuda_driver_version = "12.4";  // empty: the newest the driver's branch supports
  std::string container_toolkit = "1.19.1";  // the nvidia-container-toolkit package's version
  // Installed beside the simulated node's base packages (name -> version).
  std::map<std::string, std::string> extra_packages;
  int power_limit_w = 0;  // every GPU's at start; 0: the model's TDP
  // A simulated GPU's serial and UUID follow from the node's name and its index; a slot listed
  // here holds the GPU of another node's index instead (slot -> {hostname, index}): a GPU
  // moved from that node, as a technician would move one.
  std::map<int, std::pair<std::string, int>> gpus_from;
  // How long simulated node actions take, and the share of them that fail (0..1).
  struct ActionTimes {
    int64_t install_ms = 10000;  // install-driver
    int64_t flash_ms = 20000;    // flash-gpu-firmware, flash-nic-firmware
    int64_t reboot_ms = 15000;   // offline time of a reboot
    int64_t reset_ms = 2000;     // reset-gpu
    int64_t validate_ms = 5000;  // validate
    double failure_rate = 0;
  } actions;
};
std::unique_ptr<GpuBackend> MakeSimBackend(SimNodeSpec spec);

// Facts about this host that do not come from the GPU backend.
NodeFacts HostFacts();
// The InfiniBand / RoCE adapters under SYSFS/class/infiniband (sysfs_root is "/sys" on a real
// node, a fixture tree in tests), by name: each one's fw_ver, board_id and hca_type, trimmed; a
// file that cannot be read is left empty (unknown), and each port's partition keys
// (ports/N/pkeys/*, the non-zero ones). None when the directory is absent.
std::vector<Nic> ReadNics(const std::string& sysfs_root);
// The installed packages of the dpkg status file under `root` ("/" on a real node, a fixture
// tree in tests): name -> version ("1.17.3-1"), only those whose Status ends "installed".
// Empty when the file is absent (not a dpkg system).
std::map<std::string, std::string> ReadDpkgPackages(const std::string& root);
// The OS image id under `root`: ROOT/etc/gpufleet/image-id (written by the image builder), else
// os-release's IMAGE_ID[:IMAGE_VERSION]; empty when neither says (unknown).
std::string ReadImageId(const std::string& root);
// The GPU device files ROOT/dev/nvidia* (not directories), by path, with their permission bits
// and group (named from ROOT/etc/group); nullopt when ROOT/dev cannot be read.
std::optional<std::vector<DeviceFile>> ReadDeviceFiles(const std::string& root);
// Whether `root` has a dpkg status file (a Debian or Ubuntu system).
bool DpkgStatusExists(const std::string& root);
// The installed packages of the rpm database under `root`: ROOT/var/lib/rpm/rpmdb.sqlite (RPM
// 4.16 and later: RHEL 9, Rocky and Alma 9, Fedora 33 and later), each package's header read
// for its name, epoch, version and release: name -> "[EPOCH:]VERSION-RELEASE". nullopt when
// there is no such database or it cannot be read (the Berkeley DB of RHEL 8 is not read).
std::optional<std::map<std::string, std::string>> ReadRpmPackages(const std::string& root);

// The node's package database under a root: dpkg's status file, else the rpm database; read
// again only when its files' sizes or modification times changed (the agent looks every
// minute, and the database is megabytes on a full image). nullopt when there is neither (the
// list is unknown, not empty).
class PackageDatabase {
 public:
  explicit PackageDatabase(std::string root) : root_(std::move(root)) {}
  std::optional<std::map<std::string, std::string>> Read();
  int parses() const { return parses_; }  // how many times a database was read

 private:
  std::string root_;
  std::string stamp_;  // the files' path, size and modification time at the last read
  std::optional<std::map<std::string, std::string>> packages_;
  int parses_ = 0;
};  // "1.17.3-1" -> "1.17.3", "1:2.36-9" -> "2.36": the upstream version, for the bulletins.
std::string UpstreamVersion(std::string_view debian_version);
// The package that carries the NVIDIA Container Toolkit's version.
inline constexpr std::string_view kContainerToolkitPackage = "nvidia-container-toolkit";
// The toolkit's upstream version among `packages` (as ReadDpkgPackages gives them); empty when
// it is not installed.
std::string ContainerToolkitVersion(const std::map<std::string, std::string>& packages);

}  // namespace gpufleet
