#pragma once
// The files of tests/fixtures/ as text, for the tests of any component: a fleet file a test
// builds its registry from is tests/fixtures/fleets/NAME.yaml, read with FleetFixture("NAME").
// A file that cannot be read throws (the test fails with its path). Header-only.

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#ifndef GPUFLEET_SOURCE_DIR
#error "tests that read fixtures are compiled with GPUFLEET_SOURCE_DIR"
#endif

namespace gpufleet::testing {

inline std::string FixtureText(std::string_view path) {
  std::string full = std::string(GPUFLEET_SOURCE_DIR) + "/tests/fixtures/" + std::string(path);
  std::ifstream in(full);
  if (!in) throw std::runtime_error("cannot read the fixture " + full);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline std::string FleetFixture(std::string_view name) {
  return FixtureText("fleets/" + std::string(name) + ".yaml");
}

}  // namespace gpufleet::testing
