#pragma once
// The driver / CUDA / GPU architecture / GPU Operator compatibility matrix (data/compat.yaml,
// built in; an applied copy replaces it) and the check of a target driver against a pool's
// needs: every rule that fails, with its reason and the table's source. Plain data and logic; the
// controller supplies the pool's GPU models and today's date.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/types.h"

namespace gpufleet {

// Compares dotted versions field by field, numerically where both fields are numbers (so
// 570.133.20 > 570.133.07 and 96.00.A5 > 96.00.51 as text): <0, 0 or >0. A missing field is 0.
int CompareVersions(std::string_view a, std::string_view b);
// "12.8", "1.33", "570.26": digits separated by single dots.
bool DottedNumber(std::string_view s);
// "580.95.05" -> "R580"; empty when the version does not start with a number.
std::string DriverBranch(std::string_view version);
// "R580", "r580" or "580" -> "R580"; empty when it is none of those.
std::string NormalizeBranch(std::string_view text);

struct CompatBranch {
  std::string branch;        // "R580"
  std::string type;          // "pb", "ltsb", "nfb"
  std::string eol;           // "2028-06"; empty when none is published
  bool eol_undated = false;  // listed as end of life without a date
  int cuda_major = 0;        // highest CUDA major without the forward-compat package; 0 unknown
  // Whether it is end of life on `today` ("YYYY-MM-DD"): a dated one is supported through its
  // month.
  bool EndOfLife(std::string_view today) const {
    return eol_undated || (!eol.empty() && today.substr(0, 7) > eol);
  }
};

struct CompatCuda {
  std::string cuda;  // "12.8", "12.8.1"
  std::string min_driver;
};

struct CompatArchitecture {
  std::string architecture;  // as data/gpu-models.yaml names it: "hopper", "ada-lovelace"
  std::string min_driver;    // empty: no minimum
  std::string last_branch;   // empty: still supported
};

struct CompatModel {
  std::string model;  // catalogue id
  std::string min_driver, min_vbios, min_inforom;
};

struct CompatOperator {
  std::string version;  // "v25.10.1"
  std::vector<std::string> drivers;
  std::string container_toolkit;
  std::string kubernetes_min, kubernetes_max;  // "1.30", "1.35"
};

// What a pool asks of its drivers (fleet file `tier`, `requires`, `driver_branch`; a pool's
// fields override its cluster's).
struct CompatNeeds {
  std::string tier = "production";  // "production", "staging" or "development"
  std::string cuda;                 // "12.8": the CUDA its workloads are built with
  std::string gpu_operator;         // "v25.10.1"
  std::string kubernetes;           // "1.33"
  std::string driver_branch;        // pinned: "R580"
  bool operator==(const CompatNeeds&) const = default;
};

// A cluster's or pool's fields as needs (tier production when unset).
CompatNeeds ToNeeds(const Lifecycle& l);
// A pool's needs: its own fields, and its cluster's where it sets none.
CompatNeeds EffectiveNeeds(const Cluster& cluster, const Pool& pool);

struct CompatRule {
  std::string rule;    // "cuda", "branch-eol", "branch-type", "architecture", "pin", ...
  std::string reason;  // "CUDA 12.8 needs >= 570.26, 550.54.15 is older"
  std::string source;  // the table's source line
};

struct CompatResult {
  bool ok = true;
  std::vector<CompatRule> failed, passed;
};

// What a check is about: the target driver, the pool's needs, the architectures and catalogue
// ids of its GPUs, and today (for end of life), as "YYYY-MM-DD".
struct CompatQuery {
  std::string driver;
  CompatNeeds needs;
  std::vector<std::string> models;         // catalogue ids, each once
  std::vector<std::string> architectures;  // each once
  std::string today;
};

class CompatMatrix {
 public:
  // Errors name the source, the line and the field.
  static Result<std::shared_ptr<const CompatMatrix>> Parse(std::string_view yaml,
                                                           std::string_view source);
  static std::shared_ptr<const CompatMatrix> Builtin();  // data/compat.yaml
  static std::string_view BuiltinText();

  CompatResult Check(const CompatQuery& query) const;

  const CompatBranch* FindBranch(std::string_view branch) const;
  // The minimum driver of a CUDA version: its own row, else the row of its GA ("12.8" for
  // "12.8.2" when 12.8.2 has none). Null when the matrix does not know the version.
  const CompatCuda* FindCuda(std::string_view cuda) const;
  const CompatOperator* FindOperator(std::string_view version) const;

  const std::vector<CompatBranch>& branches() const { return branches_; }
  const std::vector<CompatCuda>& cuda() const { return cuda_; }
  const std::vector<CompatArchitecture>& architectures() const { return architectures_; }
  const std::vector<CompatModel>& models() const { return models_; }
  const std::vector<CompatOperator>& operators() const { return operators_; }
  // The source line of each table: "branches", "cuda", "architectures", "models", "gpu_operator".
  const std::string& source(std::string_view table) const;

 private:
  std::vector<CompatBranch> branches_;
  std::vector<CompatCuda> cuda_;
  std::vector<CompatArchitecture> architectures_;
  std::vector<CompatModel> models_;
  std::vector<CompatOperator> operators_;
  std::string branches_source_, cuda_source_, architectures_source_, models_source_,
      operators_source_;
};

// Checks the needs' form (a tier that is none of the three, a CUDA or Kubernetes version that is
// not digits and dots, a branch that is not "R" and digits): "" when they are fine, else
// "FIELD: why". Whether the matrix knows them is the check's business: it may be replaced.
std::string ValidateNeeds(const CompatNeeds& needs);

}  // namespace gpufleet
