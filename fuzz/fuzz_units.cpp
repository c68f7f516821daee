// Values with units, as presets, scenarios and --set give them (model/units.h): rejected only
// with ModelError.
#include "fuzz/fuzz_support.h"
#include "model/errors.h"
#include "model/units.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvsim::model;
  const std::string text = kvsim::fuzz::text_of(data, size);
  kvsim::fuzz::expect_only<ModelError>([&] { parse_bytes(text); });
  kvsim::fuzz::expect_only<ModelError>([&] { parse_bandwidth(text); });
  kvsim::fuzz::expect_only<ModelError>([&] { parse_time(text); });
  kvsim::fuzz::expect_only<ModelError>([&] { parse_quantity(text); });
  return 0;
}
