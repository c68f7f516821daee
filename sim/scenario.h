// Scenario files (scenarios/*.yaml): hardware preset and overrides, model, cache layout, workload,
// prefill compute model, transfer method, API generation and faults. Parsed strictly: unknown
// keys and bad values fail with file, line and key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/fabric.h"
#include "model/preset.h"
#include "sim/compute_model.h"
#include "sim/engine_profile.h"
#include "sim/fault_plan.h"
#include "sim/llm_model.h"
#include "sim/serving/block_pool.h"
#include "sim/serving/workload.h"

namespace kvsim::sim {

/// One request of the workload (arrival, prompt and output tokens, Mooncake prefix hashes).
using Request = serving::WorkloadRequest;

/// How KV moves from prefill to decode.
enum class TransferMethod {
  kLayerwise,   ///< transfer_cache_async, each layer as soon as it is computed (spec 3)
  kPullBlocks,  ///< whole request after prefill: decode pulls with pull_blocks (spec 8,
                ///< vLLM-Ascend)
  kPushBlocks,  ///< each layer as soon as it is computed, with a synchronous push_blocks per
                ///< layer in remote-accessible mode (spec 8, xLLM); serving studies only
};

/// A serving study's cluster and policies (scenario sections `instances:` and `serving:`): N
/// prefill and M decode instances of model.tensor_parallel ranks each, serving the workload as an
/// engine would. Values marked [I] in scenarios/README.md are choices, not measurements.
struct ServingSpec {
  int prefill_instances = 1;
  int decode_instances = 1;
  /// How arrivals pick a prefill instance and prefilled requests a decode instance.
  enum class Router {
    kRoundRobin,
    kLeastLoaded,  ///< prefill: fewest queued tokens; decode: most free KV blocks
  } router = Router::kLeastLoaded;
  std::uint64_t token_budget = 16384;  ///< prompt tokens per prefill batch (at least one request)
  int decode_batch = 256;              ///< requests per decode step
  /// KV blocks per rank's cache on either side; none: as many as fit in the HBM left after the
  /// weights, times memory_utilization.
  std::optional<std::int64_t> cache_blocks;
  double memory_utilization = 0.9;  ///< [I] vLLM's gpu_memory_utilization default
  double decode_efficiency = 0.7;   ///< [I] achieved / peak HBM bandwidth in a decode step
  double verify_fraction = 1.0;  ///< every k-th request (k = round(1/f)) is verified byte for byte
  model::SimTime slo_ttft = 2'000'000'000'000;  ///< DistServe-style SLOs for goodput
  model::SimTime slo_tpot = 100'000'000'000;
  /// What the engine does when a request's KV transfer fails on a rank (serving.recovery). The
  /// default gives the request up (lost), as an engine that never handles transfer errors does.
  struct Recovery {
    int retries = 0;                        ///< transfers after the first, per request and rank
    model::SimTime pause = 5 * model::kMs;  ///< before each retry
    /// Unlink and link the rank pair again before each retry: the library leaves a link whose
    /// transfer failed unusable until then (impl::mark_transport_failure).
    bool relink = false;
    std::int64_t link_timeout_ms = 100;  ///< each link_clusters attempt of a relink
    /// Up to this many times per request, a request whose KV or place in a queue died with an
    /// instance (process_killed), or whose transfer failed for good, is computed again from its
    /// prompt and the tokens it has made instead of lost (vLLM's kv_load_failure_policy
    /// "recompute"; Dynamo's migration_limit). 0: lost.
    int recompute = 0;
  } recovery;
};

/// "layerwise", "pull_blocks" or "push_blocks".
const char* to_string(TransferMethod method);

/// A parsed scenario.
struct Scenario {
  std::string origin;                                    ///< file path or "<text>"
  std::vector<std::pair<std::string, std::string>> set;  ///< the --set overrides it was read with
  std::string question;                                  ///< the question this scenario answers
  std::string preset;
  std::vector<model::Override> hardware_overrides;
  LlmModel model;
  int tensor_parallel = 1;
  std::uint32_t dtype_bytes = 2;
  std::string dtype = "bf16";
  /// The KV cache's dtype (cache.kv_dtype): by default model.dtype, or bf16 for quantized
  /// weights (int8, fp8) under an engine whose KV cache keeps the activation dtype (vLLM, SGLang).
  std::string kv_dtype = "bf16";
  std::uint32_t kv_dtype_bytes = 2;
  bool paged = false;
  std::uint32_t block_tokens = 0;  ///< paged only
  /// Paged only: how the engine hands out block ids (cache.block_table; default vLLM's queue).
  BlockOrder block_order = BlockOrder::kVllm;
  /// Where each side's cache lives (cache.prompt_memory / decode_memory: device or host DRAM).
  bool prompt_on_host = false;
  bool decode_on_host = false;
  std::vector<Request> requests;
  std::optional<model::SimTime> layer_time;  ///< given per-layer prefill time, else computed
  double device_tflops = 0;                  ///< dense TFLOPS of one device
  double compute_efficiency = 0;             ///< achieved / peak, in (0, 1]
  bool prefill_from_preset = false;          ///< no prefill: section: the preset's compute
  ComputeModel compute;  ///< the preset's compute (prices prefill when prefill_from_preset)
  /// The serving engine around the API (serving.engine; "none": a bare API run).
  EngineProfile engine;
  TransferMethod method = TransferMethod::kLayerwise;
  int api_version = 2;
  /// llm.SyncKvCacheWaitTime of every engine in ms, when the scenario sets it (library default
  /// 1000 ms, spec 2): a whole-request pull longer than that fails with LLM_TIMEOUT.
  std::optional<std::int64_t> sync_kv_timeout_ms;
  int prompt_node = 0;
  int decode_node = 1;
  std::vector<FaultSpec> faults;
  /// Devices whose allocations fail for a while (set by a fault campaign's device_oom draws).
  std::vector<MemoryFaultSpec> memory_faults;
  /// Devices whose transfer queues stop draining for a while (a campaign's queue_stall draws).
  std::vector<QueueStallSpec> queue_stalls;
  /// Devices whose copy completions come late for a while (a campaign's completion_delay draws).
  std::vector<CompletionDelaySpec> completion_delays;
  /// Serving instances killed and restarted (set by a fault campaign's process_killed draws).
  std::vector<ProcessFaultSpec> process_faults;
  /// What `kvsim run --faults SEEDS` draws from (a fault_plan: section), if given.
  std::optional<FaultPlan> fault_plan;
  /// Set for serving studies (an `instances:` section); else the single-request runner.
  std::optional<ServingSpec> serving;
  /// The scenario's own sweep (a `sweep:` section of dotted keys and value lists), which
  /// `kvsim sweep` runs when no --set is given.
  std::vector<std::pair<std::string, std::vector<std::string>>> sweep;

  /// Per-layer prefill time of one request on one rank.
  model::SimTime prefill_layer_time(std::uint64_t prompt_tokens) const;
  /// One decode step of `batch` requests holding `kv_tokens` tokens of KV, on one rank, with the
  /// engine's host work per request.
  model::SimTime decode_step_time(std::uint64_t batch, std::uint64_t kv_tokens) const;
};

/// A "dotted.key=value" change applied to the scenario's YAML before parsing (sweeps, --set).
/// Keys under hardware. other than hardware.preset are preset overrides.
using ScenarioOverride = std::pair<std::string, std::string>;

/// Loads a scenario file (relative trace paths resolve against its folder).
Scenario load_scenario(const std::string& path,
                       const std::vector<ScenarioOverride>& overrides = {});
/// Parses scenario text; `origin` names it in errors; `base_dir` resolves trace paths.
Scenario parse_scenario(const std::string& text, const std::string& origin,
                        const std::vector<ScenarioOverride>& overrides = {},
                        const std::string& base_dir = ".");

}  // namespace kvsim::sim
