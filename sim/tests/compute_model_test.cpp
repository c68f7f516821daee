// The compute model's roofline against hand-computed layer costs of known shapes.
#include "sim/compute_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/preset.h"

namespace kvsim::sim {
namespace {

// A device with round numbers: 1000 TFLOPS, 1 TB/s of HBM reads, 100 GB/s all-reduce.
ComputeModel round_device() {
  ComputeModel c;
  c.peak_flops = 1e15;
  c.spec.gemm_efficiency = 0.8;
  c.spec.attention_efficiency = 0.5;
  c.spec.elementwise_passes = 10;
  c.spec.layer_overhead = 20 * model::kUs;
  c.hbm_rate = 1e12;
  c.allreduce_rate = 1e11;
  c.allreduce_step = model::kUs;
  return c;
}

LlmModel dense() {
  LlmModel m;
  m.layers = 10;
  m.hidden = 4096;
  m.intermediate = 16384;
  m.heads = 32;
  m.kv_heads = 8;
  m.head_dim = 128;
  return m;
}

TEST(ComputeModel, GemmsTurnComputeBoundAtTheRidgeTokens) {
  // 2 t K N / (P e) = 2 K N / B at t = P e / B: 800 tokens on the round device.
  const ComputeModel c = round_device();
  const LayerCost l = c.prefill_layer(dense(), 800, 1, 2);
  EXPECT_NEAR(l.gemm, l.weights, 1e-12);
}

TEST(ComputeModel, ALayerIsTheRooflineOfGemmsAndWeightsPlusTheRest) {
  const ComputeModel c = round_device();
  const LlmModel m = dense();
  const double params = m.attention_params_per_layer() + m.expert_params();
  for (const std::uint64_t t : {1ull, 64ull, 4096ull}) {
    const LayerCost l = c.prefill_layer(m, t, 1, 2);
    const double td = static_cast<double>(t);
    EXPECT_NEAR(l.gemm, 2 * td * params / (1e15 * 0.8), 1e-12);
    EXPECT_NEAR(l.weights, params * 2 / 1e12, 1e-12);
    EXPECT_NEAR(l.elementwise, 10 * td * 4096 * 2 / 1e12, 1e-12);
    EXPECT_NEAR(l.attention, 2 * td * td * 32 * 128 / (1e15 * 0.5), 1e-12);
    EXPECT_EQ(l.allreduce, 0);  // one rank
    EXPECT_NEAR(l.total(), std::max(l.gemm, l.weights) + l.elementwise + l.attention + 20e-6,
                1e-12);
  }
  // One token reads the weights; thousands compute.
  EXPECT_GT(c.prefill_layer(m, 1, 1, 2).weights, c.prefill_layer(m, 1, 1, 2).gemm);
  EXPECT_LT(c.prefill_layer(m, 4096, 1, 2).weights, c.prefill_layer(m, 4096, 1, 2).gemm);
}

TEST(ComputeModel, TensorParallelismShardsWorkAndAddsTwoRingAllReducesPerLayer) {
  const ComputeModel c = round_device();
  const LlmModel m = dense();
  const LayerCost one = c.prefill_layer(m, 2048, 1, 2), eight = c.prefill_layer(m, 2048, 8, 2);
  EXPECT_NEAR(eight.gemm, one.gemm / 8, 1e-12);
  EXPECT_NEAR(eight.attention, one.attention / 8, 1e-12);
  EXPECT_NEAR(eight.elementwise, one.elementwise, 1e-12);  // activations are whole on every rank
  const double bytes = 2048.0 * 4096 * 2;
  EXPECT_NEAR(eight.allreduce, 2 * (14.0 / 8 * bytes / 1e11 + 14 * 1e-6), 1e-12);
}

TEST(ComputeModel, ExpertsAreReadOnlyWhenTouched) {
  const ComputeModel c = round_device();
  LlmModel moe = dense();
  moe.intermediate = 1536;
  moe.experts = 128;
  moe.experts_active = 8;
  // One token touches its 8 experts; many tokens touch nearly all 128.
  const double attn = moe.attention_params_per_layer(), expert = moe.expert_params();
  EXPECT_NEAR(c.prefill_layer(moe, 1, 1, 2).weights, (attn + 8 * expert) * 2 / 1e12, 1e-12);
  EXPECT_NEAR(c.prefill_layer(moe, 100000, 1, 2).weights, (attn + 128 * expert) * 2 / 1e12, 1e-9);
  // Their FLOPs are the active experts' whatever the tokens.
  EXPECT_NEAR(c.prefill_layer(moe, 1600, 1, 2).gemm,
              2 * 1600.0 * (attn + 8 * expert) / (1e15 * 0.8), 1e-12);
}

TEST(ComputeModel, ADecodeStepReadsWeightsAndKvOnce) {
  const ComputeModel c = round_device();
  const LlmModel m = dense();
  const double weights = (m.attention_params_per_layer() + m.expert_params()) * 2 * m.layers;
  EXPECT_NEAR(c.decode_step(m, 1, 2, 1, 1e9), (weights + 1e9) / 1e12 + 10 * 20e-6, 1e-12);
}

TEST(ComputeModel, EveryPresetWithComputeGivesAPositiveModel) {
  for (const char* name : {"atlas-a2", "atlas-a3", "cloudmatrix384", "dgx-h100", "dgx-h200",
                           "hgx-h800", "hgx-h20", "aws-p5en"}) {
    const ComputeModel c = ComputeModel::from(model::load_preset(name), "bf16");
    EXPECT_GT(c.peak_flops, 0) << name;
    EXPECT_GT(c.hbm_rate, 0) << name;
    EXPECT_GT(c.allreduce_rate, 0) << name;
    EXPECT_GT(c.prefill_layer(dense(), 1024, 8, 2).total(), 0) << name;
  }
}

}  // namespace
}  // namespace kvsim::sim
