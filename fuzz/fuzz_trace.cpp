// Request traces (sim/serving/workload.h): the first byte picks the format (auto, kvsim,
// Mooncake JSONL, Azure CSV) and a limit, the rest is the file. Rejected only with
// std::invalid_argument "origin:line: rule".
#include <sstream>

#include "fuzz/fuzz_support.h"
#include "sim/serving/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvsim::sim::serving;
  if (size == 0) return 0;
  TraceOptions o;
  o.format = static_cast<TraceFormat>(data[0] % 4);
  if (data[0] & 0x10) o.limit = 1 + (data[0] >> 5);
  if (data[0] & 0x08) o.rate_scale = 0.5;
  std::istringstream in(kvsim::fuzz::text_of(data + 1, size - 1));
  kvsim::fuzz::expect_only<std::invalid_argument>([&] { parse_trace(in, "fuzz.trace", o); });
  return 0;
}
