#include "controller/leader.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "common/crypto.h"

namespace gpufleet {

Result<std::string> ControllerId(const std::string& data_dir) {
  const std::string path = data_dir + "/controller.id";
  std::ifstream in(path);
  std::string id;
  if (in && std::getline(in, id) && !id.empty()) return id;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || !host[0]) std::snprintf(host, sizeof host, "x");
  id = std::string(host) + "-" + RandomHex(4);
  std::ofstream out(path, std::ios::trunc);
  out << id << "\n";
  if (!out.flush()) return MakeError(ErrorCode::kUnavailable, "cannot write " + path);
  return id;
}

}  // namespace gpufleet
