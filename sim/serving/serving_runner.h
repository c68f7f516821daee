// The serving runner: an xPyD cluster (scenario sections `instances:` and `serving:`) serving the
// workload through the real API, as a disaggregated engine drives it. Prefill instances queue and
// batch requests to a token budget and compute layer by layer; each request's KV moves rank to
// rank with transfer_cache_async (layer-wise push) or with pull_blocks from the decode side after
// prefill; decode instances admit requests whose KV has landed and step them, bound by HBM reads.
// It sits above the world and below the study runner, and never reaches under the API.
#pragma once

#include <string>
#include <vector>

#include "sim/runner.h"
#include "sim/scenario.h"

namespace kvsim::sim::serving {

/// Runs `scenario` (its `serving` set) on a fresh World. Throws std::runtime_error if the setup
/// fails or a request can never be served (more blocks than a cache holds).
RunResult run_serving(const Scenario& scenario, const RunOptions& options);

/// The names of the instances of `scenario`: prefill0, prefill1, ..., decode0, ...
std::vector<std::string> instance_names(const Scenario& scenario);

/// The nodes the instances of `scenario` occupy on `spec` (prefill first, then decode).
std::vector<int> serving_nodes(const Scenario& scenario, const model::TopologySpec& spec);

}  // namespace kvsim::sim::serving
