#pragma once
// Schema migrations, in order. Portable SQL; `{ID}` stands for the dialect's auto-increment
// primary key column type, filled in by the backend.

#include <string_view>
#include <vector>

namespace gpufleet::migrations {

struct Migration {
  int version;
  std::string_view sql;  // statements separated by ";\n"
};

const std::vector<Migration>& All();

}  // namespace gpufleet::migrations
