// HCCL rank tables and llm.LocalCommRes JSON (impl/rank_table.h): rejected only with the
// library's typed errors (LLMException LLM_PARAM_INVALID naming the field).
#include "fuzz/fuzz_support.h"
#include "impl/errors.h"
#include "impl/rank_table.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvsim::impl;
  kvsim::fuzz::expect_only<TypeError, ValueError, RuntimeError>(
      [&] { parse_rank_table(kvsim::fuzz::text_of(data, size)); });
  return 0;
}
