// Hardware presets with overrides (model/preset.h): rejected only with ModelError.
#include "fuzz/fuzz_support.h"
#include "model/errors.h"
#include "model/preset.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::pair<std::string, std::string>> overrides;
  const std::string yaml = kvsim::fuzz::take_overrides(kvsim::fuzz::text_of(data, size), overrides);
  kvsim::fuzz::expect_only<kvsim::model::ModelError>(
      [&] { kvsim::model::parse_preset(yaml, "fuzz-preset.yaml", overrides); });
  return 0;
}
