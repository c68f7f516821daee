#include "sim/compute_model.h"

#include <algorithm>
#include <cmath>

#include "model/units.h"

namespace kvsim::sim {

namespace {

// Experts of `experts` a batch of `tokens` tokens, each routed to `active` of them, touches on
// average (uniform routing [I]): E * (1 - (1 - k/E)^t).
double experts_touched(const LlmModel& m, double tokens) {
  if (m.experts <= m.experts_active) return m.experts_active;
  const double miss = 1.0 - static_cast<double>(m.experts_active) / m.experts;
  return m.experts * (1.0 - std::pow(miss, tokens));
}

// Ring all-reduce of `bytes` over `tp` ranks: 2 (tp - 1) / tp of the bytes cross each link, in
// 2 (tp - 1) steps (NCCL's ring; the bus-bandwidth convention of nccl-tests' PERFORMANCE.md).
double allreduce_s(const ComputeModel& c, double bytes, int tp) {
  if (tp <= 1) return 0;
  const double steps = 2.0 * (tp - 1);
  return steps / tp * bytes / c.allreduce_rate + steps * model::to_seconds(c.allreduce_step);
}

}  // namespace

double LayerCost::total() const {
  return std::max(gemm, weights) + elementwise + attention + allreduce + overhead;
}

ComputeModel ComputeModel::from(const model::TopologySpec& preset, const std::string& dtype) {
  ComputeModel c;
  c.spec = preset.compute;
  c.peak_flops = preset.compute.tflops(dtype) * 1e12;
  c.hbm_rate = preset.hbm_bandwidth * preset.compute.hbm_efficiency;
  c.allreduce_rate = preset.scale_up.bandwidth * preset.compute.allreduce_efficiency;
  c.allreduce_step = preset.scale_up.latency;
  return c;
}

LayerCost ComputeModel::prefill_layer(const LlmModel& m, std::uint64_t tokens, int tp,
                                      std::uint32_t dtype_bytes) const {
  const double t = static_cast<double>(tokens);
  LayerCost c;
  if (tokens == 0) return c;
  // Each token passes the projections and its experts; the weights are read once per layer.
  c.gemm = 2.0 * t * m.active_params_per_layer() / tp / (peak_flops * spec.gemm_efficiency);
  c.weights = (m.attention_params_per_layer() + m.expert_params() * experts_touched(m, t)) *
              dtype_bytes / tp / hbm_rate;
  const double activations = t * m.hidden * dtype_bytes;  // one pass, not sharded by TP
  c.elementwise = spec.elementwise_passes * activations / hbm_rate;
  c.attention = 2.0 * t * t * m.heads * m.head_dim / tp /
                (peak_flops * spec.attention_efficiency);   // causal: half of 4 t^2 h d
  c.allreduce = 2.0 * allreduce_s(*this, activations, tp);  // after attention and after the MLP
  c.overhead = model::to_seconds(spec.layer_overhead);
  return c;
}

double ComputeModel::decode_step(const LlmModel& m, int tp, std::uint32_t dtype_bytes,
                                 std::uint64_t batch, double kv_bytes) const {
  const double b = static_cast<double>(batch);
  // Every layer's weights (the experts the batch touches) and the vocabulary-parallel LM head.
  const double weights =
      ((m.attention_params_per_layer() + m.expert_params() * experts_touched(m, b)) * m.layers +
       static_cast<double>(m.vocab) * m.hidden) *
      dtype_bytes / tp;
  const double per_layer = model::to_seconds(spec.layer_overhead) +
                           2.0 * allreduce_s(*this, b * m.hidden * dtype_bytes, tp);
  return (weights + kv_bytes) / hbm_rate + per_layer * m.layers;
}

}  // namespace kvsim::sim
