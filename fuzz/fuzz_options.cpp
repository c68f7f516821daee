// init() option maps (impl/types.h parse_engine_options, impl/data_dist_core.h
// parse_kvsim_settings, memory pool JSON, IP strings): one "key=value" per line. Rejected only
// with the library's typed errors.
#include "fuzz/fuzz_support.h"
#include "impl/data_dist_core.h"
#include "impl/errors.h"
#include "impl/types.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvsim::impl;
  const std::string text = kvsim::fuzz::text_of(data, size);
  std::map<std::string, std::string> options;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string line = text.substr(at, end - at);
    const std::size_t eq = line.find('=');
    if (eq != std::string::npos) options[line.substr(0, eq)] = line.substr(eq + 1);
    at = end + 1;
  }
  kvsim::fuzz::expect_only<TypeError, ValueError, RuntimeError>([&] {
    const EngineOptions engine = parse_engine_options(options);
    parse_kvsim_settings(options, engine);
  });
  for (const auto& option : options) {
    const std::string& key = option.first;
    const std::string& value = option.second;
    kvsim::fuzz::expect_only<TypeError, ValueError, RuntimeError>([&] { ip_to_int(value); });
    kvsim::fuzz::expect_only<TypeError, ValueError, RuntimeError>(
        [&] { parse_mem_pool_config(key, value, key.size() % 2 == 0); });
  }
  return 0;
}
