// Scenario files with --set overrides (sim/scenario.h): rejected only with ModelError, which
// kvsim turns into exit 2 naming file, line and key.
#include "fuzz/fuzz_support.h"
#include "model/errors.h"
#include "sim/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::pair<std::string, std::string>> overrides;
  const std::string yaml = kvsim::fuzz::take_overrides(kvsim::fuzz::text_of(data, size), overrides);
  // Relative trace paths resolve as the library scenarios' do, to short copies of the traces.
  kvsim::fuzz::expect_only<kvsim::model::ModelError>([&] {
    kvsim::sim::parse_scenario(yaml, "fuzz.yaml", overrides,
                               KVSIM_SOURCE_DIR "/fuzz/scenario_base/library");
  });
  return 0;
}
