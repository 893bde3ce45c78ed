#pragma once
// NVIDIA security bulletins (data/security-bulletins.yaml, built in, and bulletins imported from
// NVIDIA's own CSAF 2.0 documents) and the judgement of a node's software against them: which
// CVEs apply, the version that fixes each on the node's branch, or that the branch is end of
// life. Plain data and logic; the controller supplies the node's versions and today's date.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/compat.h"

namespace gpufleet {

// The components a bulletin names that gpufleet can judge from a node's facts.
inline constexpr std::string_view kComponentDriver = "driver";
inline constexpr std::string_view kComponentContainerToolkit = "container-toolkit";
inline constexpr std::string_view kComponentGpuOperator = "gpu-operator";

struct BulletinFix {
  std::string component;  // "driver", "container-toolkit", "gpu-operator"
  std::string branch;     // the driver branch ("R580"); empty for the other components
  std::string fixed;      // the first version that has the fix: "580.95.05"
  bool operator==(const BulletinFix&) const = default;
};

struct BulletinCve {
  std::string id;  // "CVE-2025-23280"
  double cvss = 0;
  int cwe = 0;  // 0 when not given
  std::string summary;
  // "bare-metal", or "vgpu" for a CVE whose only Linux rows are vGPU host or guest drivers:
  // kept so that a search finds it, never matched against a bare-metal node.
  std::string platform = "bare-metal";
  std::vector<BulletinFix> fixes;
  bool operator==(const BulletinCve&) const = default;
};

struct Bulletin {
  std::string id;                  // NVIDIA's bulletin number: "5703"
  std::string product;             // "GPU Display Driver", "Container Toolkit"
  std::string published;           // "YYYY-MM-DD"
  std::string origin = "builtin";  // or "imported"
  std::vector<BulletinCve> cves;
  bool operator==(const Bulletin&) const = default;
};

class BulletinSet {
 public:
  // A file like data/security-bulletins.yaml. Errors name the source, the line and the field.
  static Result<BulletinSet> Parse(std::string_view yaml, std::string_view source);
  static std::shared_ptr<const BulletinSet> Builtin();  // data/security-bulletins.yaml
  static std::string_view BuiltinText();

  // Adds `b`, replacing a bulletin of the same id.
  void Put(Bulletin b);
  const std::vector<Bulletin>& bulletins() const { return bulletins_; }
  const Bulletin* Find(std::string_view id) const;

 private:
  std::vector<Bulletin> bulletins_;  // ordered by publication date, then id
};

// Reads one of NVIDIA's CSAF 2.0 security advisories (the `<id>.json` of
// github.com/NVIDIA/product-security) as published: the product tree's Linux data-center
// ("Tesla") driver rows per branch, the Container Toolkit and GPU Operator rows, the CVSS v3
// score (v4 where a CVE has no v3), `product_status.fixed`. Windows, GeForce, RTX/Quadro and
// other products are skipped; a CVE whose only Linux rows are vGPU ones is kept with platform
// "vgpu". A malformed document is refused with the JSON path of the problem
// ("$.vulnerabilities[2].scores[0].cvss_v3.baseScore: not a number").
Result<Bulletin> ParseCsafAdvisory(std::string_view json_text);

// What a node runs, as far as the bulletins care; an empty version is unknown.
struct NodeSoftware {
  std::string driver;             // "580.95.05"
  std::string container_toolkit;  // "1.17.8"
};

struct Exposure {
  std::string cve;
  double cvss = 0;
  std::string component;
  std::string bulletin;
  // The version that fixes it on the node's branch, or "branch end of life: move to a
  // supported branch" when the CVE has no row for an end-of-life or unknown branch.
  std::string fixed_in;
};

inline constexpr std::string_view kMoveBranch = "branch end of life: move to a supported branch";

struct VulnVerdict {
  std::string branch;  // "R580"; empty when the driver is unknown
  // "ok", "exposed" or "unsupported_branch" (the driver's branch is end of life or not in the
  // matrix: no bulletin vouches for it).
  std::string status = "ok";
  std::vector<Exposure> cves;  // highest CVSS first
  // What fixes the node: "driver 580.159.03", "container-toolkit 1.17.8, driver 580.159.03",
  // kMoveBranch, or empty when nothing is to be done.
  std::string fix;
  std::string fixed_driver;  // the driver version that fixes every driver CVE; empty if none
  double max_cvss = 0;
};

// The node's CVEs under the matching rule of lifecycle-facts.md: a CVE with a row for the
// node's branch applies when the version is lower than the row's fix; a CVE without a row
// applies, with kMoveBranch as its fix, when the branch was already end of life (or is unknown)
// on the bulletin's publication date; otherwise the branch is not affected. The status is
// "unsupported_branch" when the branch is end of life on `today` ("YYYY-MM-DD"). vGPU-only CVEs
// never apply.
VulnVerdict JudgeNode(const BulletinSet& bulletins, const CompatMatrix& matrix,
                      const NodeSoftware& software, std::string_view today);

// The newest driver version that any bulletin names as a fix on `branch` ("R580"): the release
// that fixes every published driver CVE of that branch. Empty when no bulletin has a row for it.
std::string LatestFixedDriver(const BulletinSet& bulletins, std::string_view branch);

// The driver a pool's nodes should move to so that no published driver CVE applies:
// `pinned_branch`'s latest fix when the pool pins a supported branch, else the latest fix of
// `current_branch` (the branch most of its nodes run) when that one is supported, else of the
// newest supported long-term branch (an end-of-life branch gets no fixes). Empty `target` when
// no bulletin names a fix on the branch chosen.
struct FixTarget {
  std::string branch;
  std::string target;
  std::string why;  // "the pool pins R580", "the nodes' branch", "R535 is end of life: ..."
};
FixTarget ChooseFixTarget(const BulletinSet& bulletins, const CompatMatrix& matrix,
                          std::string_view pinned_branch, std::string_view current_branch,
                          std::string_view today);

}  // namespace gpufleet
