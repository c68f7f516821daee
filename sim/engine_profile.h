// Serving-engine profiles (scenarios/engines.yaml): what an engine adds to each request around
// prefill, KV transfer and decode (router or proxy hops, scheduling, the KV bootstrap handshake,
// the first token's way out). Data only: the runners apply the costs in simulated time.
#pragma once

#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "model/topology.h"
#include "model/units.h"

namespace kvsim::sim {

/// One engine's per-request costs; "none" (all zero) is a bare API run with no engine.
struct EngineProfile {
  std::string name = "none";
  model::SimTime request_overhead = 0;  ///< arrival to prefill start (router/proxy hop, scheduling)
  /// From arrival, beside prefill: the decode side's handshake with the prefill side; KV moves
  /// only after it (SGLang's bootstrap; 0 where the engine has none).
  model::SimTime bootstrap = 0;
  /// Prefill end to the decode side asking for KV (a sequential proxy's second hop, vLLM's).
  model::SimTime handoff = 0;
  /// The connector's own cost of one request's transfer, before its bytes move (transfer
  /// engine batch submission, metadata, completion polling): counted as transfer time.
  model::SimTime transfer_overhead = 0;
  /// KV ready to the first token, besides the decode step itself: scheduling, sampling, stream.
  model::SimTime first_token_overhead = 0;
  /// Each decode step's host work per running request, in series with the device step
  /// (sampling, output processing, the scheduler's per-sequence bookkeeping).
  model::SimTime decode_request_overhead = 0;
  /// The engine's first decode step produces the first token (false for "none": TTFT = KV ready).
  bool decodes = false;
  /// The engine's default KV cache dtype ("auto") is the model's activation dtype, bf16, however
  /// its weights are quantized (profile key kv_cache_dtype: auto); false: as model.dtype.
  bool kv_in_activation_dtype = false;
  /// The decode side allocates a request's blocks as its tokens come and, when none is free,
  /// preempts the newest running request (profile key decode_blocks: incremental); false
  /// (reserve, the default): each request reserves its prompt and whole output on admission.
  bool incremental_decode_blocks = false;
  /// The profile's `uncertain:` ranges (keys as in the profile: "request_overhead", ...).
  std::vector<model::UncertainParameter> uncertain;

  /// The costs by key, as the profile file and a scenario's serving: section name them.
  auto costs() { return cost_fields(*this); }
  auto costs() const { return cost_fields(*this); }
  /// When the decode side asks for the KV of a request that arrived at `arrival` and ended
  /// prefill at `prefill_end`: after the handoff, and not before the bootstrap.
  model::SimTime kv_ask(model::SimTime arrival, model::SimTime prefill_end) const {
    return std::max(prefill_end + handoff, arrival + bootstrap);
  }

 private:
  template <typename Self>
  static std::array<std::pair<const char*, decltype(&std::declval<Self&>().handoff)>, 6>
  cost_fields(Self& e) {
    return {{{"request_overhead", &e.request_overhead},
             {"bootstrap", &e.bootstrap},
             {"handoff", &e.handoff},
             {"transfer_overhead", &e.transfer_overhead},
             {"first_token_overhead", &e.first_token_overhead},
             {"decode_request_overhead", &e.decode_request_overhead}}};
  }
};

/// Path of the engine library: $KVSIM_ENGINES or the source tree's scenarios/engines.yaml.
std::string engine_library_path();
/// Engine `name` from the library; ModelError(kUnknownPreset) naming the choices, kFormat for a
/// bad file. "none" is always there.
EngineProfile load_engine(const std::string& name);
/// Names in the library, sorted ("none" included).
std::vector<std::string> available_engines();

}  // namespace kvsim::sim
