// The model library (sim/llm_model.h): the first line names the model to read from the rest.
// Rejected only with ModelError.
#include "fuzz/fuzz_support.h"
#include "model/errors.h"
#include "sim/llm_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = kvsim::fuzz::text_of(data, size);
  const std::size_t nl = text.find('\n');
  const std::string name = text.substr(0, nl);
  const std::string yaml = nl == std::string::npos ? "" : text.substr(nl + 1);
  kvsim::fuzz::expect_only<kvsim::model::ModelError>(
      [&] { kvsim::sim::parse_model(yaml, "fuzz-models.yaml", name); });
  return 0;
}
