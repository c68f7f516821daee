// A RunResult as bytes, so that a point simulated in a child process (kvsim sweep, kvsim.run from
// Python) comes back to the parent exactly: times in ps, doubles bit for bit.
#pragma once

#include <string>

#include "sim/runner.h"

namespace kvsim::sim {

/// The version of kvsim's result files (result.json, result.cbor, sweep.json); a reader refuses
/// any other.
inline constexpr int kResultSchema = 1;

/// Everything in `result` except its scenario, which the parent already has.
std::string encode_result(const RunResult& result);
/// The result `encode_result` was given, with `scenario` put back. Throws std::runtime_error if
/// the bytes are not an encoded result of this schema.
RunResult decode_result(const std::string& bytes, Scenario scenario);

}  // namespace kvsim::sim
