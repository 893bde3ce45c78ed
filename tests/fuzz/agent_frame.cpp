// Agent frames: what any holder of a join token (or anyone, for a hello) can send the controller
// over the agent WebSocket. proto::Decode must never throw nor crash, and what it accepts must
// encode and decode again to the same message.
//
// "The same" allows a number's last bit: Boost.JSON 1.81 (Debian 12) does not round every
// decimal to the nearest double (1.011111111111111e+96 reads 1 ULP off), so a value may move
// by a bit on each trip; anything more is a failure.

#include <boost/json.hpp>
#include <cmath>
#include <string>

#include "fuzz.h"
#include "proto/proto.h"

using namespace gpufleet;
namespace json = boost::json;

namespace {

bool Same(const json::value& a, const json::value& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.to_number<double>(), y = b.to_number<double>();
    return x == y || std::abs(x - y) <= 1e-12 * std::max(std::abs(x), std::abs(y));
  }
  if (a.kind() != b.kind()) return false;
  if (a.is_array()) {
    const auto &x = a.as_array(), &y = b.as_array();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!Same(x[i], y[i])) return false;
    }
    return true;
  }
  if (a.is_object()) {
    const auto &x = a.as_object(), &y = b.as_object();
    if (x.size() != y.size()) return false;
    for (const auto& [k, v] : x) {
      const json::value* w = y.if_contains(k);
      if (!w || !Same(v, *w)) return false;
    }
    return true;
  }
  return a == b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto message = proto::Decode(fuzz::Text(data, size));
  if (!message.ok()) return 0;
  const std::string wire = proto::Encode(*message);
  auto again = proto::Decode(wire);
  if (!again.ok()) fuzz::Fail("an accepted frame does not decode once encoded", wire);
  const std::string wire_again = proto::Encode(*again);
  if (wire_again != wire && !Same(json::parse(wire), json::parse(wire_again))) {
    fuzz::Fail("an accepted frame changes on a round trip", wire + "\n" + wire_again);
  }
  return 0;
}
