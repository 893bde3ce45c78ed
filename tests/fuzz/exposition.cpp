// The Prometheus text exposition format the scraper reads from dcgm-exporter and node exporters:
// any text a target serves is parsed within its limits or refused, never crashing.

#include "scrape/exposition.h"

#include "fuzz.h"

using namespace gpufleet;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  scrape::ExpoLimits limits;
  limits.max_samples = 10'000;
  auto samples = scrape::ParseExposition(fuzz::Text(data, size), limits);
  if (samples.ok() && samples->size() > limits.max_samples) {
    fuzz::Fail("more samples than the limit");
  }
  return 0;
}
