#include "store/store.h"

namespace gpufleet {

std::string_view ToString(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kOperator:
      return "operator";
    case Role::kAdmin:
      return "admin";
  }
  return "viewer";
}

std::optional<Role> ParseRole(std::string_view text) {
  if (text == "viewer") return Role::kViewer;
  if (text == "operator") return Role::kOperator;
  if (text == "admin") return Role::kAdmin;
  return std::nullopt;
}

}  // namespace gpufleet
