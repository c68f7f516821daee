// Request workloads for serving studies: real traces (Mooncake JSONL, Azure LLM inference CSV,
// kvsim's own arrival_ms,prompt_tokens CSV) and synthetic arrivals (Poisson or gamma at a rate,
// fixed, uniform or lognormal lengths), with the transforms a study needs (rate scaling, a time
// window, capped prompt lengths, a request limit). Pure data: no simulation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "model/units.h"

namespace kvsim::sim::serving {

/// One request of a workload. Times are simulated ps from the workload's start.
struct WorkloadRequest {
  model::SimTime arrival = 0;
  std::uint64_t prompt_tokens = 0;
  std::uint64_t output_tokens = 0;      ///< 0 where the source does not say
  std::vector<std::uint64_t> hash_ids;  ///< Mooncake's prefix-block hashes (512-token blocks)
};

/// A trace file's format.
enum class TraceFormat {
  kAuto,      ///< by content: a JSON object per line is Mooncake, a TIMESTAMP header is Azure
  kKvsim,     ///< "arrival_ms,prompt_tokens" per line ('#' comments, optional header)
  kMooncake,  ///< JSONL: timestamp (ms), input_length, output_length, hash_ids
  kAzure,     ///< CSV: TIMESTAMP (absolute date-time), ContextTokens, GeneratedTokens
};
/// "auto", "kvsim", "mooncake", "azure"; throws std::invalid_argument naming the choices.
TraceFormat trace_format_from_string(const std::string& text);

/// What to keep of a trace, applied in this order: the window (on the trace's own clock,
/// then shifted to start at 0), the rate scaling (arrivals divided by it), the prompt cap
/// (longer prompts are cut to it) and the limit (the first requests only).
struct TraceOptions {
  TraceFormat format = TraceFormat::kAuto;
  std::optional<model::SimTime> window_from;
  std::optional<model::SimTime> window_to;
  double rate_scale = 1.0;
  std::optional<std::uint64_t> max_prompt_tokens;
  std::optional<std::size_t> limit;
};

/// Bounds on a trace, checked as it is read: lines, bytes per line, tokens per request.
inline constexpr int kMaxTraceLines = 10'000'000;
inline constexpr std::size_t kMaxTraceLineBytes = 1 << 20;
inline constexpr std::uint64_t kMaxTraceTokens = 1 << 24;

/// Reads a trace file (a regular file). Throws std::invalid_argument "path:line: rule" on the
/// first bad line or bound, and if nothing is left after the options.
std::vector<WorkloadRequest> read_trace(const std::string& path, const TraceOptions& options = {});
/// Reads a trace from a stream (seekable when the format is kAuto); `origin` names it in errors.
std::vector<WorkloadRequest> parse_trace(std::istream& in, const std::string& origin,
                                         const TraceOptions& options = {});

/// A length distribution, in tokens.
struct LengthSpec {
  enum class Kind { kFixed, kUniform, kLognormal } kind = Kind::kFixed;
  std::uint64_t value = 0;  ///< kFixed
  std::uint64_t min = 0;    ///< kUniform: [min, max]; kLognormal: a floor
  std::uint64_t max = 0;    ///< kUniform; kLognormal: a ceiling
  double median = 0;        ///< kLognormal
  double sigma = 0;         ///< kLognormal: of the underlying normal
};

/// Synthetic arrivals: `count` requests, inter-arrival gaps from the process at `rate` per
/// second (kUniform: exactly 1/rate apart), lengths drawn from the specs, from a seeded
/// generator whose algorithms are fixed here (the same seed gives the same workload anywhere).
struct SyntheticSpec {
  enum class Process { kUniform, kPoisson, kGamma } process = Process::kUniform;
  double rate = 1.0;  ///< requests per second
  /// kUniform: the exact gap, when given (it wins over rate, and may be 0: all at once).
  std::optional<model::SimTime> interval;
  double cv = 1.0;  ///< kGamma: coefficient of variation of the gaps (1 = Poisson)
  std::size_t count = 1;
  LengthSpec prompt;
  LengthSpec output;
  std::uint64_t seed = 1;
};

/// Throws std::invalid_argument naming the bad field.
std::vector<WorkloadRequest> synthesize(const SyntheticSpec& spec);

}  // namespace kvsim::sim::serving
