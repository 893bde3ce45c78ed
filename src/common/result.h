#pragma once
// Result<T> and Status: expected failures as values (bad input, not found, NVML, store and
// network errors). Exceptions from libraries are caught at the adapter that calls them.

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gpufleet {

// One enum of failure categories for the whole project; each maps to one HTTP status and one
// CLI exit code, so a failure keeps its meaning from the store through the API to the CLI.
enum class ErrorCode {
  kInvalidArgument,   // 400: the caller's input is wrong
  kUnauthenticated,   // 401
  kPermissionDenied,  // 403
  kNotFound,          // 404
  kMethodNotAllowed,  // 405
  kConflict,          // 409: the request clashes with current state
  kTooLarge,          // 413
  kUnavailable,       // 503: a dependency (NVML, network, controller) is not there
  kInternal,          // 500: a bug or an unexpected failure below us
};

std::string_view ErrorCodeName(ErrorCode code);  // "invalid_argument", ...
int HttpStatus(ErrorCode code);

struct Error {
  ErrorCode code;
  std::string message;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  // By value, so `for (auto& x : F().value())` does not dangle when F() is a temporary.
  T value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const Error& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    assert(!ok_);
    return error_;
  }

 private:
  Error error_{ErrorCode::kInternal, {}};
  bool ok_ = true;
};

// Assigns a Result's value to `lhs`, or returns its error from the enclosing function.
#define GF_TRY_ASSIGN(lhs, expr)           \
  do {                                     \
    auto _gf_r = (expr);                   \
    if (!_gf_r.ok()) return _gf_r.error(); \
    lhs = std::move(_gf_r.value());        \
  } while (0)

// Returns a failed Status/Result's error from the enclosing function.
#define GF_TRY(expr)                       \
  do {                                     \
    auto _gf_s = (expr);                   \
    if (!_gf_s.ok()) return _gf_s.error(); \
  } while (0)

inline Error MakeError(ErrorCode code, std::string message) {
  return Error{code, std::move(message)};
}

}  // namespace gpufleet
