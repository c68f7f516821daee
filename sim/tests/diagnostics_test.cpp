// Diagnostics of the quirks the real library hides, faithful by default and errors in strict
// mode (kvsim.Strict=1).
#include <gtest/gtest.h>

#include "impl/data_dist_core.h"
#include "sim/tests/impl_world_support.h"

namespace kvsim::sim::testing {
namespace {

using impl::AnyTransferConfig;
using impl::DiagnosticError;
using impl::DiagnosticKind;
using impl::LayerRange;
using impl::LLMRole;
using impl::LLMStatusCode;
using impl::TransferConfig;
using Results = std::vector<std::optional<LLMStatusCode>>;

const std::map<std::string, std::string> kStrict = {{impl::kOptionKvsimStrict, "1"}};

class Diagnostics : public ImplWorld {
 protected:
  void pair(std::map<std::string, std::string> extra = {}) {
    p_ = make_dist(LLMRole::PROMPT, 1, 0, false, extra);
    d_ = make_dist(LLMRole::DECODER, 2, 8, true, extra);
    desc_ = std::make_unique<impl::CacheDesc>(int8_desc(4, 1, 4096));
    src_ = std::make_unique<TestCache>(register_cache(*p_, 0, *desc_, 1));
    dst_ = std::make_unique<TestCache>(register_cache(*d_, 8, *desc_, 2));
    link(*p_, 2, 8);
  }
  std::shared_ptr<ScriptedSync> sync() { return std::make_shared<ScriptedSync>(platform_); }
  std::size_t world_count(DiagnosticKind kind) {
    return world_.directory().diagnostics().count(kind);
  }
  // Expects `fn` to raise a DiagnosticError of `kind` with `status` naming `argument`.
  template <class Fn>
  void expect_strict(Fn&& fn, DiagnosticKind kind, LLMStatusCode status,
                     const std::string& argument) {
    try {
      fn();
      ADD_FAILURE() << "no DiagnosticError";
    } catch (const DiagnosticError& e) {
      EXPECT_EQ(e.diagnostic().kind, kind);
      EXPECT_EQ(e.status_code(), status);
      EXPECT_EQ(e.argument(), argument);
      EXPECT_NE(std::string(e.what()).find(argument), std::string::npos);
    }
  }

  std::unique_ptr<impl::LLMDataDist> p_;
  std::unique_ptr<impl::LLMDataDist> d_;
  std::unique_ptr<impl::CacheDesc> desc_;
  std::unique_ptr<TestCache> src_;
  std::unique_ptr<TestCache> dst_;
};

TEST_F(Diagnostics, SynchronizerExceptionLeavesNoneAndSuccessFaithfully) {
  pair();
  std::vector<AnyTransferConfig> configs = {TransferConfig(2, dst_->addrs, LayerRange{0, 2})};
  auto s = sync();
  s->throw_at = 1;
  auto task = p_->cache_manager().transfer_cache_async(src_->view, s, configs);
  EXPECT_EQ(task.synchronize(), LLMStatusCode::LLM_SUCCESS);
  EXPECT_EQ(task.get_results(), (Results{std::nullopt}));
  ASSERT_EQ(task.diagnostics().size(), 1u);
  EXPECT_EQ(task.diagnostics()[0].kind, DiagnosticKind::kSynchronizerException);
  EXPECT_EQ(task.diagnostics()[0].task_id, task.id());
  EXPECT_NE(task.diagnostics()[0].message.find("model step failed"), std::string::npos);
  EXPECT_EQ(world_count(DiagnosticKind::kSynchronizerException), 1u);
  EXPECT_EQ(platform_.posts.size(), 1u);  // layer 0 went out
}

TEST_F(Diagnostics, StrictSynchronizerExceptionFailsTheLayersConfigs) {
  pair(kStrict);
  std::vector<AnyTransferConfig> configs = {TransferConfig(2, dst_->addrs, LayerRange{0, 2})};
  auto s = sync();
  s->throw_at = 0;
  auto task = p_->cache_manager().transfer_cache_async(src_->view, s, configs);
  EXPECT_EQ(task.synchronize(), LLMStatusCode::LLM_FAILED);
  EXPECT_EQ(task.get_results(), (Results{LLMStatusCode::LLM_FAILED}));
  EXPECT_TRUE(platform_.posts.empty());
}

TEST_F(Diagnostics, AliasedResultsShareASlot) {
  pair();
  std::vector<AnyTransferConfig> configs = {
      TransferConfig(2, dst_->addrs, LayerRange{0, 2}),
      TransferConfig(2, {dst_->addrs[0], dst_->addrs[1]}, LayerRange{0, 1})};
  auto s = sync();
  s->answers[1] = false;
  auto task = p_->cache_manager().transfer_cache_async(src_->view, s, configs);
  // Config 1 finished at layer 0, but config 0's failure at layer 1 overwrote their shared slot.
  EXPECT_EQ(task.get_results(),
            (Results{LLMStatusCode::LLM_PARAM_INVALID, LLMStatusCode::LLM_PARAM_INVALID}));
  ASSERT_EQ(task.diagnostics().size(), 1u);
  EXPECT_EQ(task.diagnostics()[0].kind, DiagnosticKind::kResultAliased);
  EXPECT_EQ(task.diagnostics()[0].peer_cluster_id, 2u);
}

TEST_F(Diagnostics, StrictAliasedResultsRaiseAndChangeNothing) {
  pair(kStrict);
  std::vector<AnyTransferConfig> configs = {TransferConfig(2, dst_->addrs),
                                            TransferConfig(2, dst_->addrs)};
  auto s = sync();
  // The None ranges are diagnosed first (config 0), before the aliasing.
  expect_strict([&] { p_->cache_manager().transfer_cache_async(src_->view, s, configs); },
                DiagnosticKind::kSrcLayerRangeMutated, LLMStatusCode::LLM_PARAM_INVALID,
                "transfer_configs[0].src_layer_range");
  EXPECT_FALSE(impl::src_layer_range_of(configs[0]).has_value());
  configs = {TransferConfig(2, dst_->addrs, LayerRange{0, 2}),
             TransferConfig(2, dst_->addrs, LayerRange{0, 2})};
  expect_strict([&] { p_->cache_manager().transfer_cache_async(src_->view, s, configs); },
                DiagnosticKind::kResultAliased, LLMStatusCode::LLM_PARAM_INVALID,
                "transfer_configs[1].dst_cluster_id");
  platform_.sleep(impl::from_ms(1));
  EXPECT_TRUE(s->calls.empty());
  EXPECT_EQ(p_->core()->tasks_in_flight, 0);
}

TEST_F(Diagnostics, MutatedSrcLayerRangeIsKeptAndRecorded) {
  pair();
  std::vector<AnyTransferConfig> configs = {TransferConfig(2, dst_->addrs)};
  auto task = p_->cache_manager().transfer_cache_async(src_->view, sync(), configs);
  EXPECT_EQ(impl::src_layer_range_of(configs[0]), (LayerRange{0, 2}));
  EXPECT_EQ(task.synchronize(), LLMStatusCode::LLM_SUCCESS);
  ASSERT_EQ(task.diagnostics().size(), 1u);
  EXPECT_EQ(task.diagnostics()[0].kind, DiagnosticKind::kSrcLayerRangeMutated);
  EXPECT_EQ(world_count(DiagnosticKind::kSrcLayerRangeMutated), 1u);
}

TEST_F(Diagnostics, StrictConcurrentTransferIsLinkBusy) {
  pair(kStrict);
  std::vector<AnyTransferConfig> configs = {TransferConfig(2, dst_->addrs, LayerRange{0, 2})};
  auto s = sync();
  s->delay = impl::from_ms(1);
  auto task = p_->cache_manager().transfer_cache_async(src_->view, s, configs);
  expect_strict([&] { p_->cache_manager().transfer_cache_async(src_->view, sync(), configs); },
                DiagnosticKind::kConcurrentTransfer, LLMStatusCode::LLM_LINK_BUSY,
                "transfer_cache_async");
  EXPECT_EQ(task.synchronize(), LLMStatusCode::LLM_SUCCESS);
}

TEST_F(Diagnostics, DstOutsideThePeerFailsTheLayerAndSendsNothing) {
  pair();
  const auto stray = alloc_tensors(3, *desc_, 9);  // device 3 is not the peer's device
  const auto before = read(stray[0], 4096);
  std::vector<AnyTransferConfig> configs = {
      TransferConfig(2, {stray[0], stray[1]}, LayerRange{0, 1})};
  auto task = p_->cache_manager().transfer_cache_async(src_->view, sync(), configs);
  EXPECT_EQ(task.get_results(), (Results{LLMStatusCode::LLM_FAILED}));
  ASSERT_EQ(task.diagnostics().size(), 1u);
  EXPECT_EQ(task.diagnostics()[0].kind, DiagnosticKind::kDstOutsidePeer);
  EXPECT_TRUE(platform_.posts.empty());
  EXPECT_EQ(read(stray[0], 4096), before);
}

// Sixteen block descriptors per tensor: the destination check goes by spans and halves a bad one,
// and must still name the first stray descriptor, here the first of the second tensor.
TEST_F(Diagnostics, DstOutsideThePeerIsFoundAmongManyBlockDescriptors) {
  pair();
  const auto blocks_desc = int8_desc(2, 32, 256);  // one layer, 32 blocks of 256 bytes
  const TestCache src = register_cache(*p_, 0, blocks_desc, 11, true);
  const auto good = alloc_tensors(8, blocks_desc, 12);
  const auto stray = alloc_tensors(3, blocks_desc, 13);
  impl::TransferBlockArgs blocks;
  std::vector<std::int64_t> every_other;
  for (std::int64_t b = 0; b < 32; b += 2) every_other.push_back(b);
  blocks.src_block_indices = every_other;
  blocks.dst_block_indices = std::vector<std::int64_t>(every_other.rbegin(), every_other.rend());
  std::vector<AnyTransferConfig> ok = {TransferConfig(2, {good[0], good[1]}, LayerRange{0, 1})};
  auto fine = p_->cache_manager().transfer_cache_async(src.view, sync(), ok, blocks);
  EXPECT_EQ(fine.get_results(), (Results{LLMStatusCode::LLM_SUCCESS}));
  EXPECT_TRUE(fine.diagnostics().empty());
  std::vector<AnyTransferConfig> bad = {TransferConfig(2, {good[0], stray[1]}, LayerRange{0, 1})};
  auto task = p_->cache_manager().transfer_cache_async(src.view, sync(), bad, blocks);
  EXPECT_EQ(task.get_results(), (Results{LLMStatusCode::LLM_FAILED}));
  ASSERT_EQ(task.diagnostics().size(), 1u);
  EXPECT_EQ(task.diagnostics()[0].kind, DiagnosticKind::kDstOutsidePeer);
  const std::string first_stray = "[" + std::to_string(stray[1] + 30 * 256) + ", +256)";
  EXPECT_NE(task.diagnostics()[0].message.find(first_stray), std::string::npos)
      << task.diagnostics()[0].message;
}

TEST_F(Diagnostics, KeyConfigIndexesDstLayersByAbsoluteLayer) {
  const std::map<std::string, std::string> remote = {
      {impl::kOptionEnableRemoteCacheAccessible, "1"}};
  pair(remote);
  const auto desc6 = int8_desc(6, 1, 4096);
  // Registered after the link: not remote accessible by default; register before linking.
  auto p2 = make_dist(LLMRole::PROMPT, 5, 1, false, remote);
  auto d2 = make_dist(LLMRole::DECODER, 6, 9, true, remote);
  const TestCache src = register_cache(*p2, 1, desc6, 3);
  const TestCache dst = register_cache(*d2, 9, desc6, 4);
  const auto before = snapshot(dst);
  link(*p2, 6, 9);
  std::vector<AnyTransferConfig> configs = {impl::TransferWithCacheKeyConfig(
      impl::CacheKeyByIdAndIndex(6, dst.view.cache_id, 0), LayerRange{1, 3}, LayerRange{0, 2})};
  auto task = p2->cache_manager().transfer_cache_async(src.view, sync(), configs);
  EXPECT_EQ(task.synchronize(), LLMStatusCode::LLM_SUCCESS);
  EXPECT_EQ(task.get_results(), (Results{std::nullopt}));
  ASSERT_EQ(task.diagnostics().size(), 2u);
  EXPECT_EQ(task.diagnostics()[0].kind, DiagnosticKind::kKeyConfigLayerIndex);
  EXPECT_EQ(task.diagnostics()[1].kind, DiagnosticKind::kSynchronizerException);
  // Layer 1 went to dst layer list(range(0, 2))[1] = 1, not 0; layer 2 raised IndexError.
  EXPECT_EQ(read(dst.addrs[2], 4096), read(src.addrs[2], 4096));
  EXPECT_EQ(read(dst.addrs[0], 4096),
            std::vector<std::uint8_t>(before.begin(), before.begin() + 4096));
}

TEST_F(Diagnostics, V1PullDuringATransferOnTheLinkIsDiagnosedAndStrictlyLinkBusy) {
  for (const bool strict : {false, true}) {
    std::map<std::string, std::string> v1 = {
        {impl::kOptionEnableCacheManager, "0"},
        {impl::kOptionMemPoolConfig, "{\"memory_size\": 16777216}"}};
    if (strict) v1[impl::kOptionKvsimStrict] = "1";
    const std::uint64_t base = strict ? 10 : 20;
    // v1: the prompt listens, the decoder links, the prompt transfers and the decoder pulls.
    auto p = make_dist(LLMRole::PROMPT, base + 1, strict ? 2 : 4, true, v1);
    auto d = make_dist(LLMRole::DECODER, base + 2, strict ? 10 : 12, false, v1);
    link(*d, base + 1, strict ? 2 : 4);
    const auto desc = int8_desc(2, 1, 4096);
    const impl::CacheKey key{base + 1, 7};
    const impl::KvCache src = p->kv_cache_manager().allocate_cache(desc, {key});
    const impl::KvCache remote = d->kv_cache_manager().allocate_cache(desc);
    std::vector<AnyTransferConfig> configs = {
        TransferConfig(base + 2, remote.per_device_tensor_addrs()[0], LayerRange{0, 1})};
    auto s = sync();
    s->delay = impl::from_ms(1);
    auto task = p->kv_cache_manager().transfer_cache_async(src, s, configs);
    const impl::KvCache local = d->kv_cache_manager().allocate_cache(desc);
    if (strict) {
      expect_strict([&] { d->kv_cache_manager().pull_cache(key, local); },
                    DiagnosticKind::kLinkCallOverlap, LLMStatusCode::LLM_LINK_BUSY, "pull_cache");
    } else {
      d->kv_cache_manager().pull_cache(key, local);
      EXPECT_EQ(world_count(DiagnosticKind::kLinkCallOverlap), 1u);
    }
    EXPECT_EQ(task.synchronize(), LLMStatusCode::LLM_SUCCESS);
  }
}

TEST_F(Diagnostics, UnalignedRegistrationAndFinalizeWhileBusy) {
  pair();
  const auto addr = platform_.allocate(0, impl::Placement::DEVICE, 8192, 4096);
  ASSERT_TRUE(addr);
  const auto desc = int8_desc(1, 1, 4096);
  const std::uint64_t unaligned = *addr % (2 * kMiB) == 0 ? *addr + 4096 : *addr;
  p_->cache_manager().register_cache(desc, {unaligned});
  EXPECT_EQ(world_count(DiagnosticKind::kUnalignedRegistration), 1u);

  std::vector<AnyTransferConfig> configs = {TransferConfig(2, dst_->addrs, LayerRange{0, 2})};
  auto s = sync();
  s->delay = impl::from_ms(1);
  auto task = p_->cache_manager().transfer_cache_async(src_->view, s, configs);
  p_->finalize();
  EXPECT_EQ(world_count(DiagnosticKind::kFinalizeWhileBusy), 1u);
  // The per-layer call after finalize fails (§3.4: not initialized).
  EXPECT_EQ(task.get_results(), (Results{LLMStatusCode::LLM_FAILED}));
}

TEST_F(Diagnostics, StrictUnalignedRegistrationRaisesAndRegistersNothing) {
  pair(kStrict);
  const auto addr = platform_.allocate(0, impl::Placement::DEVICE, 8192, 4096);
  ASSERT_TRUE(addr);
  const std::uint64_t unaligned = *addr % (2 * kMiB) == 0 ? *addr + 4096 : *addr;
  const std::size_t before = p_->core()->caches().entries().size();
  expect_strict([&] { p_->cache_manager().register_cache(int8_desc(1, 1, 4096), {unaligned}); },
                DiagnosticKind::kUnalignedRegistration, LLMStatusCode::LLM_PARAM_INVALID,
                "addrs[0]");
  EXPECT_EQ(p_->core()->caches().entries().size(), before);
}

}  // namespace
}  // namespace kvsim::sim::testing
