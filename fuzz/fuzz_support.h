// What every fuzz target shares: a parser may reject its input only with the error its callers
// turn into a clear message (the types each target allows); any other exception, a crash or a
// sanitizer report is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

namespace kvsim::fuzz {

/// Runs `parse`; an exception of one of the `Allowed` types is a proper rejection, any other
/// aborts (libFuzzer saves the input).
template <class... Allowed, class F>
void expect_only(F&& parse) {
  try {
    std::forward<F>(parse)();
  } catch (const std::exception& e) {
    if ((dynamic_cast<const Allowed*>(&e) || ...)) return;
    std::fprintf(stderr, "kvsim fuzz: an input was rejected with %s, not a typed error: %s\n",
                 typeid(e).name(), e.what());
    std::abort();
  }
}

/// The input as text.
inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

/// Splits leading lines "--set key=value" off `text` (the overrides a command line would give);
/// returns the rest.
inline std::string take_overrides(const std::string& text,
                                  std::vector<std::pair<std::string, std::string>>& overrides) {
  std::size_t at = 0;
  const std::string flag = "--set ";
  while (text.compare(at, flag.size(), flag) == 0) {
    const std::size_t end = text.find('\n', at);
    const std::string line = text.substr(
        at + flag.size(), end == std::string::npos ? std::string::npos : end - at - flag.size());
    const std::size_t eq = line.find('=');
    if (eq != std::string::npos) overrides.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    if (end == std::string::npos) return "";
    at = end + 1;
  }
  return text.substr(at);
}

}  // namespace kvsim::fuzz
