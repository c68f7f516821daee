// Prices one tensor-parallel rank's prefill layer and decode step from a device preset's compute
// figures: a roofline of the layer's GEMMs at their achieved FLOP rate and its weights (and the
// experts the tokens touch) read from HBM, then activations' HBM passes, causal attention, tensor
// parallelism's two all-reduces and a fixed kernel cost per layer, in series. Pure arithmetic over
// a model shape and a preset: it touches no world, no cache and no clock.
#pragma once

#include <cstdint>
#include <string>

#include "model/topology.h"
#include "sim/llm_model.h"

namespace kvsim::sim {

/// One layer's prefill time on one rank, split by what it is spent on (seconds).
struct LayerCost {
  double gemm = 0;         ///< projections and MLP at their achieved FLOP rate
  double weights = 0;      ///< reading the layer's weights (and experts touched) from HBM
  double elementwise = 0;  ///< norms, RoPE, activation and residual adds over the activations
  double attention = 0;    ///< causal attention
  double allreduce = 0;    ///< two TP all-reduces of the layer's output
  double overhead = 0;     ///< fixed per-layer kernel cost
  /// GEMMs overlap their weight reads (a roofline); the other parts follow in series.
  double total() const;
};

/// The device's compute as a preset states it, resolved for one scenario dtype.
struct ComputeModel {
  double peak_flops = 0;      ///< dense FLOP/s of one device at the dtype
  model::ComputeSpec spec;    ///< efficiencies and overheads
  double hbm_rate = 0;        ///< achieved HBM bytes/s (bandwidth x hbm_efficiency)
  double allreduce_rate = 0;  ///< bus bytes/s of a TP all-reduce (scale-up x allreduce_efficiency)
  model::SimTime allreduce_step = 0;  ///< latency of one ring step (the scale-up link's)

  /// From a preset (its compute:, hbm: and scale_up: sections); peak 0 if the dtype is not given.
  static ComputeModel from(const model::TopologySpec& preset, const std::string& dtype);

  /// One prefill layer over `tokens` prompt tokens on one of `tp` ranks.
  LayerCost prefill_layer(const LlmModel& m, std::uint64_t tokens, int tp,
                          std::uint32_t dtype_bytes) const;
  /// One decode step of `batch` requests holding `kv_bytes` of KV on one rank: every layer's
  /// weights (the experts the batch touches), the LM head and the KV are read once, plus
  /// per-layer costs.
  double decode_step(const LlmModel& m, int tp, std::uint32_t dtype_bytes, std::uint64_t batch,
                     double kv_bytes) const;
};

}  // namespace kvsim::sim
