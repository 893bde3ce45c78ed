#pragma once
// Remote write's receivers as configured: `--remote-write URL` or a controller configuration
// file's `remote_write:` list (docs/configuration.md). Light: the controller's options hold them.

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace gpufleet::remote {

struct ReceiverConfig {
  std::string name;  // the `receiver` label and the cursor's file; default: host[:port]/path
  std::string url;   // http:// or https://
  std::string bearer_token;
  std::string basic_user, basic_password;
  std::string ca_file;  // https: trust this CA instead of the system's store
  // Series selectors (`DCGM_FI_DEV_GPU_UTIL{pool="a"}`, `{cluster="train"}`); a series goes
  // when one matches; none: every series.
  std::vector<std::string> match;
  int shards = 4;
  size_t max_samples_per_send = 10'000;
  int64_t timeout_ms = 30'000;
};

// `--remote-write URL`: a receiver with the defaults. kInvalidArgument for a URL that is not
// http(s), or credentials on plain HTTP to a host that is not loopback.
Result<ReceiverConfig> ReceiverFromUrl(const std::string& url);
// The `remote_write:` list of a controller configuration file; errors name the file, the entry
// and the key.
Result<std::vector<ReceiverConfig>> ParseReceivers(const std::string& yaml,
                                                   const std::string& filename);
Status Validate(ReceiverConfig& receiver);  // fills the defaults; errors name the receiver

}  // namespace gpufleet::remote
