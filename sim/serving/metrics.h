// Serving metrics over a run's requests: latency percentiles, SLO attainment and goodput in
// DistServe's sense (requests that meet both the TTFT and the TPOT SLO), and throughput.
#pragma once

#include <cstddef>
#include <vector>

#include "sim/runner.h"

namespace kvsim::sim::serving {

/// A latency distribution, in microseconds (nearest-rank percentiles).
struct Percentiles {
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};

/// Nearest-rank percentiles of `values` (any order); zeros for an empty list.
Percentiles percentiles(std::vector<double> values);

/// A serving run in numbers. Latencies over the requests that succeeded.
struct ServingMetrics {
  std::size_t requests = 0;
  std::size_t succeeded = 0;
  std::size_t checked = 0;   ///< verified byte for byte (the run's verify fraction)
  std::size_t verified = 0;  ///< of those, bytes equal
  Percentiles ttft;
  Percentiles kv_ready;       ///< arrival to KV on the decode side
  Percentiles exposed;        ///< KV transfer after prefill ended
  Percentiles queueing;       ///< arrival to prefill start
  Percentiles tpot;           ///< over requests with more than one output token
  Percentiles e2e;            ///< arrival to last token
  double slo_attainment = 0;  ///< share of requests meeting both SLOs
  double goodput_rps = 0;     ///< requests meeting both SLOs per second of the run
  double throughput_rps = 0;  ///< requests completed per second of the run
};

/// The metrics of a serving run (scenario.serving set; SLOs from it).
ServingMetrics serving_metrics(const RunResult& result);

}  // namespace kvsim::sim::serving
