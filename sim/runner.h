// Runs a scenario with the real implementation on the model: tensor-parallel prompt and decode
// ranks with their own LLMDataDist, caches registered once, one prefill instance serving the
// workload, and each request's KV moved layer-wise (transfer_cache_async) or after prefill
// (pull_blocks). Collects per-request timings, link usage, diagnostics and a trace.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/units.h"
#include "sim/scenario.h"

namespace kvsim::model {
class Fabric;
}

namespace kvsim::sim {

/// One request's outcome. Times are simulated, in ps.
struct RequestResult {
  int id = 0;
  std::uint64_t prompt_tokens = 0;
  model::SimTime arrival = 0;
  model::SimTime prefill_start = 0;
  model::SimTime transfer_start = 0;  ///< the first layer computed: KV may start to move
  model::SimTime prefill_end = 0;     ///< the last layer computed
  model::SimTime transfer_end = 0;    ///< the last rank's KV landed on the decode side
  std::uint64_t bytes = 0;            ///< KV bytes moved, all ranks
  bool ok = false;
  std::string status;     ///< "LLM_SUCCESS" or the first failure
  bool verified = false;  ///< decode bytes equal prompt bytes, checked after the transfer
  bool checked = true;    ///< verification ran (serving studies may verify a stated fraction)

  // Serving studies only (zero in single-request runs).
  std::uint64_t output_tokens = 0;
  int prefill_instance = -1;
  int decode_instance = -1;
  model::SimTime decode_start = 0;  ///< admitted to a decode batch
  model::SimTime first_token = 0;   ///< first token out of the decode instance
  model::SimTime completion = 0;    ///< last token out
  int retries = 0;                  ///< transfers tried again after a failure (serving.recovery)
  int recomputes = 0;   ///< computed again after its KV or queue died (serving.recovery.recompute)
  int preemptions = 0;  ///< decode blocks taken back for other requests, then computed again

  /// Transfer time not hidden behind prefill compute: from the later of prefill's end and the
  /// decode side asking for the KV (an engine's handoff is not transfer time).
  model::SimTime exposed() const {
    const model::SimTime from = std::max(prefill_end, transfer_start);
    return transfer_end > from ? transfer_end - from : 0;
  }
  /// Arrival to KV ready on the decode side.
  model::SimTime kv_ready() const { return transfer_end - arrival; }
  /// Arrival to the first token: out of the decode instance in serving studies (as a P/D proxy
  /// streams it), else KV ready (single-request runs model no decode).
  model::SimTime ttft() const { return first_token > 0 ? first_token - arrival : kv_ready(); }
  /// Waiting for a prefill batch.
  model::SimTime queueing() const { return prefill_start - arrival; }
  /// Time per output token after the first (0 for one-token outputs).
  model::SimTime tpot() const {
    return output_tokens > 1 && completion > first_token
               ? (completion - first_token) / (output_tokens - 1)
               : 0;
  }
  /// KV bytes over the transfer window (first layer computed to KV ready), bytes/s.
  double effective_bandwidth() const {
    const model::SimTime window = transfer_end - transfer_start;
    return window > 0 ? static_cast<double>(bytes) / model::to_seconds(window) : 0;
  }
};

/// One prefill layer's compute span.
struct ComputeSpan {
  int request = 0;
  int layer = 0;
  model::SimTime start = 0;
  model::SimTime end = 0;
};

/// Bytes and utilisation of one link over the run.
struct LinkUsage {
  std::string name;
  std::string type;
  double bytes = 0;        ///< both directions
  double utilization = 0;  ///< busier direction: bytes / (effective bandwidth x run time)
};

/// One sampled quantity of a serving run (queue lengths, link utilisation), at RunResult's
/// sample_times.
struct TimeSeries {
  std::string name;  ///< "prefill0 queue", "decode1 running", "roce n0d0 util", ...
  std::vector<double> values;
};

/// Everything a run produces.
struct RunResult {
  Scenario scenario;
  std::vector<RequestResult> requests;
  std::vector<ComputeSpan> compute;
  std::vector<LinkUsage> links;  ///< links that carried bytes, busiest first
  std::vector<std::string> diagnostics;
  model::SimTime end = 0;
  std::string trace_json;  ///< Chrome trace (empty unless asked for)
  double line_rate = 0;    ///< nominal bytes/s of the KV path's link (for reports)
  double effective_rate = 0;
  // Serving studies: sampled state over time, and diagnostics counted by kind.
  std::vector<model::SimTime> sample_times;
  std::vector<TimeSeries> series;
  int relinks = 0;   ///< links the serving engine made again after failures (serving.recovery)
  int restarts = 0;  ///< serving instances killed and started again (process_killed)
};

/// Options of run_scenario.
struct RunOptions {
  bool trace = true;
  /// Called after each request with (done, total).
  std::function<void(std::size_t, std::size_t)> progress;
  /// Called with the fabric before the run starts, to attach an observer in place of the trace
  /// (which needs the fabric's one observer slot): cross-validation records the run's flows.
  /// Requires trace = false.
  std::function<void(model::Fabric&)> attach;
};

class World;

/// Diagnostics listed one by one up to this many; beyond, the first of each kind and counts.
inline constexpr std::size_t kDiagnosticsListed = 200;

/// Fills result.links (bytes and utilisation up to result.end) and result.diagnostics from a
/// world after its run.
void collect_world_results(World& world, RunResult& result);

/// Runs the scenario on a fresh World (the serving runner when scenario.serving is set). Throws
/// std::runtime_error if the setup fails (a link that does not come up, memory that does not fit),
/// naming the rank and the call.
RunResult run_scenario(const Scenario& scenario, const RunOptions& options = {});

}  // namespace kvsim::sim
