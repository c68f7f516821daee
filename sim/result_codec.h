// A RunResult as bytes, so that a point simulated in a child process (kvsim sweep, kvsim.run from
// Python) comes back to the parent exactly: times in ps, doubles bit for bit.
#pragma once

#include <string>

#include "sim/runner.h"

namespace kvsim::sim {

/// Everything in `result` except its scenario, which the parent already has.
std::string encode_result(const RunResult& result);
/// The result `encode_result` was given, with `scenario` put back. Throws std::runtime_error if
/// the bytes are not an encoded result.
RunResult decode_result(const std::string& bytes, Scenario scenario);

}  // namespace kvsim::sim
