// The seed example of the issue (40 layers, one TransferConfig to cluster 2 whose addresses come
// from a registered decoder cache, a synchronizer that returns True) over RoCE and over HCCS, and
// the overlap of layer-wise transfer with a simulated prefill.
#include <gtest/gtest.h>

#include "model/units.h"
#include "sim/tests/impl_world_support.h"

namespace kvsim::sim::testing {
namespace {

using impl::LLMRole;
using impl::LLMStatusCode;
using impl::TransferConfig;

constexpr std::int64_t kLayers = 40;
constexpr std::uint64_t kTensorBytes = kMiB / 4;  // one row: K (or V) of one layer

class AlwaysReady final : public impl::LayerSynchronizer {
 public:
  bool synchronize_layer(std::int64_t, std::optional<std::int64_t>) override { return true; }
};

// Releases layer L when the simulated prefill has computed it (the documented per-layer event
// pattern of spec 8: the model records events[l], synchronize_layer waits on it).
class PrefillEvents final : public impl::LayerSynchronizer {
 public:
  PrefillEvents(impl::Platform& p, std::int64_t layers) {
    for (std::int64_t i = 0; i < layers; ++i) done.push_back(p.make_signal());
  }
  bool synchronize_layer(std::int64_t layer, std::optional<std::int64_t>) override {
    return done[static_cast<std::size_t>(layer)]->wait_for(impl::kForever);
  }
  std::vector<std::unique_ptr<impl::Signal>> done;
};

class SeedExample : public ImplWorld, public ::testing::WithParamInterface<int> {
 protected:
  // The model's idle-path time of one layer: one batch of two descriptors (K, V).
  impl::Time layer_time(int decoder_device) const {
    const model::TopologySpec& s = world_.spec();
    const bool remote = decoder_device / s.devices_per_node != 0;
    const model::LinkSpec& link = remote ? s.scale_out : s.scale_up;
    // A push: the prompt's engine writes, at the tier's own cost if it has one.
    const model::SimTime cost = link.path.descriptor_cost.value_or(s.dma.descriptor_cost);
    const double bottleneck = std::min({link.effective(), s.hbm_bandwidth, s.dma.bandwidth});
    return s.dma.batch_setup + 2 * cost + model::transfer_time(2.0 * kTensorBytes, bottleneck) +
           link.latency;
  }
};

TEST_P(SeedExample, CompletesWithSuccessInExactlyTheModelsTime) {
  const int decoder_device = GetParam();
  auto prompt = make_dist(LLMRole::PROMPT, 1, 0, false);
  auto decoder = make_dist(LLMRole::DECODER, 2, decoder_device, true);
  link(*prompt, 2, decoder_device);
  const auto desc = int8_desc(2 * kLayers, 1, kTensorBytes);
  const TestCache kv_cache = register_cache(*prompt, 0, desc, 7);
  const TestCache decoder_cache = register_cache(*decoder, decoder_device, desc, 8);

  std::vector<impl::AnyTransferConfig> configs = {
      TransferConfig(2, decoder_cache.addrs, impl::LayerRange{0, kLayers, 1}, 0)};
  auto sync = std::make_shared<AlwaysReady>();
  const impl::Time start = platform_.now();
  auto task = prompt->cache_manager().transfer_cache_async(kv_cache.view, sync, configs);
  EXPECT_EQ(task.synchronize(), LLMStatusCode::LLM_SUCCESS);
  const impl::Time duration = platform_.now() - start;
  EXPECT_EQ(task.get_results(),
            (std::vector<std::optional<LLMStatusCode>>{LLMStatusCode::LLM_SUCCESS}));
  EXPECT_EQ(snapshot(decoder_cache), snapshot(kv_cache));
  // Layers go one after another; each is one idle-path batch.
  EXPECT_EQ(duration, static_cast<impl::Time>(kLayers) * layer_time(decoder_device));
  EXPECT_TRUE(world_.directory().diagnostics().entries().empty());
}

INSTANTIATE_TEST_SUITE_P(Paths, SeedExample, ::testing::Values(8, 1), [](const auto& p) {
  return p.param == 8 ? std::string("RoceTwoA2Nodes") : "HccsOneNode";
});

class Overlap : public SeedExample {};

TEST_P(Overlap, ExposedTimeIsAtMostTheLastLayersOwnTransferTime) {
  auto prompt = make_dist(LLMRole::PROMPT, 1, 0, false);
  auto decoder = make_dist(LLMRole::DECODER, 2, 8, true);
  link(*prompt, 2, 8);
  const auto desc = int8_desc(2 * kLayers, 1, kTensorBytes);
  const TestCache kv_cache = register_cache(*prompt, 0, desc, 7);
  const TestCache decoder_cache = register_cache(*decoder, 8, desc, 8, false, std::nullopt);
  const impl::Time transfer = layer_time(8);
  const impl::Time compute = transfer * static_cast<impl::Time>(GetParam()) / 4;  // >= transfer
  ASSERT_GE(compute, transfer);

  auto sync = std::make_shared<PrefillEvents>(platform_, kLayers);
  const impl::Time start = platform_.now();
  impl::Time prefill_end = 0;
  platform_.spawn("prefill", [&] {
    for (std::int64_t l = 0; l < kLayers; ++l) {
      platform_.sleep(compute);
      sync->done[static_cast<std::size_t>(l)]->set();
    }
    prefill_end = platform_.now();
  });
  std::vector<impl::AnyTransferConfig> configs = {TransferConfig(2, decoder_cache.addrs)};
  auto task = prompt->cache_manager().transfer_cache_async(kv_cache.view, sync, configs);
  ASSERT_EQ(task.synchronize(), LLMStatusCode::LLM_SUCCESS);
  const impl::Time exposed = platform_.now() - prefill_end;
  EXPECT_EQ(prefill_end - start, static_cast<impl::Time>(kLayers) * compute);
  EXPECT_LE(static_cast<double>(exposed), 1.05 * static_cast<double>(transfer));
  EXPECT_GE(exposed, transfer);  // the last layer cannot start before it is computed
  EXPECT_EQ(snapshot(decoder_cache), snapshot(kv_cache));
}

// Per-layer compute = 1x, 1.5x and 3x the per-layer transfer time.
INSTANTIATE_TEST_SUITE_P(ComputeOverTransfer, Overlap, ::testing::Values(4, 6, 12));

}  // namespace
}  // namespace kvsim::sim::testing
