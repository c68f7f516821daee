// transfer_cache_async on the SystemC world: the §3.2 loop, the §3.3 task, the §3.4 per-layer
// call (locks, timeout, link failure), with real bytes.
#include <gtest/gtest.h>

#include <array>

#include "impl/copy_executor.h"
#include "impl/data_dist_core.h"
#include "sim/tests/impl_world_support.h"

namespace kvsim::sim::testing {
namespace {

using impl::AnyTransferConfig;
using impl::LayerRange;
using impl::LLMRole;
using impl::LLMStatusCode;
using impl::TransferConfig;
using Results = std::vector<std::optional<LLMStatusCode>>;

class TransferAsync : public ImplWorld {
 protected:
  void pair(std::map<std::string, std::string> p_extra = {}) {
    p_ = make_dist(LLMRole::PROMPT, 1, 0, false, p_extra);
    d_ = make_dist(LLMRole::DECODER, 2, 8, true);
    link(*p_, 2, 8);
  }
  // A decoder `cluster` on `device`, linked from P.
  std::unique_ptr<impl::LLMDataDist> decoder(std::uint64_t cluster, int device) {
    auto d = make_dist(LLMRole::DECODER, cluster, device, true);
    link(*p_, cluster, device);
    return d;
  }
  static std::vector<std::uint64_t> layer_addrs(const TestCache& c, std::int64_t first,
                                                std::int64_t count, std::uint64_t offset = 0) {
    std::vector<std::uint64_t> out;
    for (std::int64_t i = 2 * first; i < 2 * (first + count); ++i) {
      out.push_back(c.addrs[static_cast<std::size_t>(i)] + offset);
    }
    return out;
  }
  std::shared_ptr<ScriptedSync> sync() { return std::make_shared<ScriptedSync>(platform_); }
  // Expects tensor `i` of `dst` to equal its old contents with, for each piece (src_off,
  // dst_off, len), `len` bytes at dst_off taken from tensor `j` of `src` at src_off.
  void expect_tensor(const TestCache& dst, std::size_t i, const std::vector<std::uint8_t>& before,
                     const std::vector<std::array<std::uint64_t, 3>>& pieces, const TestCache& src,
                     std::size_t j) {
    const std::uint64_t size = dst.view.desc.size();
    std::vector<std::uint8_t> expected(
        before.begin() + static_cast<std::ptrdiff_t>(i * size),
        before.begin() + static_cast<std::ptrdiff_t>((i + 1) * size));
    const auto s = read(src.addrs[j], src.view.desc.size());
    for (const auto& [src_off, dst_off, len] : pieces) splice(expected, dst_off, s, src_off, len);
    EXPECT_EQ(read(dst.addrs[i], size), expected) << "dst tensor " << i;
  }

  std::unique_ptr<impl::LLMDataDist> p_;
  std::unique_ptr<impl::LLMDataDist> d_;
};

TEST_F(TransferAsync, C2CSendsEachLayerAfterItsSynchronizeLayerInOrder) {
  pair();
  const auto desc = int8_desc(6, 2, 4096);  // 3 layers, 2 rows of 4 KiB
  const TestCache src = register_cache(*p_, 0, desc, 1);
  const TestCache dst = register_cache(*d_, 8, desc, 2);
  const auto before = snapshot(dst);
  // Row 1 of the source to row 1 of the destination: dst_addrs carry the row offset (§3.2).
  std::vector<AnyTransferConfig> configs = {
      TransferConfig(2, layer_addrs(dst, 0, 3, 4096), std::nullopt, 1)};
  auto s = sync();
  platform_.log.clear();
  auto task = p_->cache_manager().transfer_cache_async(src.view, s, configs);
  EXPECT_EQ(task.synchronize(), LLMStatusCode::LLM_SUCCESS);
  EXPECT_EQ(task.get_results(), (Results{LLMStatusCode::LLM_SUCCESS}));
  EXPECT_EQ(s->calls, (std::vector<std::int64_t>{0, 1, 2}));
  for (const auto& t : s->timeouts_seen) EXPECT_FALSE(t.has_value());
  EXPECT_EQ(platform_.log, (std::vector<std::string>{"sync 0", "post 2", "done", "sync 1", "post 2",
                                                     "done", "sync 2", "post 2", "done"}));
  for (std::size_t i = 0; i < 6; ++i) expect_tensor(dst, i, before, {{4096, 4096, 4096}}, src, i);
  // One-sided puts are posted by the source device (§3.4).
  for (const PostRecord& post : platform_.posts) EXPECT_EQ(post.device, 0);
}

TEST_F(TransferAsync, C2BCutsTheTensorIntoBlocksWithARemainder) {
  pair();
  const TestCache src = register_cache(*p_, 0, int8_desc(2, 1, 10000), 1);
  const TestCache dst = register_cache(*d_, 8, int8_desc(2, 8, 4096), 2, /*blocks=*/true);
  const auto before = snapshot(dst);
  std::vector<AnyTransferConfig> configs = {TransferConfig(2, dst.addrs, LayerRange{0, 1})};
  impl::TransferBlockArgs blocks;
  blocks.dst_block_indices = std::vector<std::int64_t>{5, 2, 7};
  blocks.dst_block_memory_size = 4096;
  auto task = p_->cache_manager().transfer_cache_async(src.view, sync(), configs, blocks);
  ASSERT_EQ(task.synchronize(), LLMStatusCode::LLM_SUCCESS);
  ASSERT_EQ(platform_.posts.size(), 1u);
  EXPECT_EQ(platform_.posts[0].descriptors.size(), 6u);
  EXPECT_EQ(platform_.posts[0].descriptors[2].length, 10000u - 8192u);
  for (std::size_t i = 0; i < 2; ++i) {
    expect_tensor(dst, i, before,
                  {{0, 5 * 4096, 4096}, {4096, 2 * 4096, 4096}, {8192, 7 * 4096, 10000 - 8192}},
                  src, i);
  }
}

TEST_F(TransferAsync, B2BPostsOneDescriptorPerMaximalRun) {
  pair();
  const auto desc = int8_desc(4, 12, 512);  // 2 layers, 12 blocks of 512 bytes
  const TestCache src = register_cache(*p_, 0, desc, 1, true);
  const TestCache dst = register_cache(*d_, 8, desc, 2, true);
  const auto before = snapshot(dst);
  std::vector<AnyTransferConfig> configs = {TransferConfig(2, dst.addrs)};
  impl::TransferBlockArgs blocks;
  blocks.src_block_indices = std::vector<std::int64_t>{0, 1, 2, 5, 7, 8};
  blocks.dst_block_indices = std::vector<std::int64_t>{3, 4, 5, 0, 9, 10};
  auto task = p_->cache_manager().transfer_cache_async(src.view, sync(), configs, blocks);
  ASSERT_EQ(task.synchronize(), LLMStatusCode::LLM_SUCCESS);
  ASSERT_EQ(platform_.posts.size(), 2u);
  for (std::size_t layer = 0; layer < 2; ++layer) {
    std::vector<impl::CopyDescriptor> expected;
    for (std::size_t t = 2 * layer; t < 2 * layer + 2; ++t) {
      expected.push_back({src.addrs[t] + 0 * 512, dst.addrs[t] + 3 * 512, 3 * 512});
      expected.push_back({src.addrs[t] + 5 * 512, dst.addrs[t] + 0 * 512, 512});
      expected.push_back({src.addrs[t] + 7 * 512, dst.addrs[t] + 9 * 512, 2 * 512});
    }
    EXPECT_EQ(platform_.posts[layer].descriptors, expected) << "layer " << layer;
  }
  for (std::size_t i = 0; i < 4; ++i) {
    expect_tensor(dst, i, before,
                  {{0, 3 * 512, 3 * 512}, {5 * 512, 0, 512}, {7 * 512, 9 * 512, 1024}}, src, i);
  }
}

TEST_F(TransferAsync, B2BBlockMemorySizeDefaultsToTheSourceBlockAndMustEqualIt) {
  pair();
  const auto desc = int8_desc(2, 4, 512);
  const TestCache src = register_cache(*p_, 0, desc, 1, true);
  const TestCache dst = register_cache(*d_, 8, desc, 2, true);
  for (const std::int64_t bms : {0, 512, 256}) {
    std::vector<AnyTransferConfig> configs = {TransferConfig(2, dst.addrs)};
    impl::TransferBlockArgs blocks;
    blocks.src_block_indices = std::vector<std::int64_t>{1};
    blocks.dst_block_indices = std::vector<std::int64_t>{2};
    blocks.dst_block_memory_size = bms;
    const std::size_t posts = platform_.posts.size();
    auto task = p_->cache_manager().transfer_cache_async(src.view, sync(), configs, blocks);
    if (bms == 256) {
      EXPECT_EQ(task.get_results(), (Results{LLMStatusCode::LLM_PARAM_INVALID}));
      EXPECT_EQ(platform_.posts.size(), posts);
    } else {
      EXPECT_EQ(task.synchronize(), LLMStatusCode::LLM_SUCCESS) << bms;
      EXPECT_EQ(read(dst.addrs[1] + 1024, 512), read(src.addrs[1] + 512, 512));
    }
  }
}

TEST_F(TransferAsync, SynchronizeLayerOnlyForCoveredLayersConfigsInListOrder) {
  pair();
  auto d3 = decoder(3, 9);
  const auto desc = int8_desc(8, 1, 2048);  // 4 layers
  const TestCache src = register_cache(*p_, 0, desc, 1);
  const TestCache dst2 = register_cache(*d_, 8, desc, 2);
  const TestCache dst3 = register_cache(*d3, 9, desc, 3);
  const auto before3 = snapshot(dst3);
  // Layer 1 into cluster 3's layer 2 slot (the addresses decide), layer 3 into cluster 2.
  std::vector<AnyTransferConfig> configs = {
      TransferConfig(3, layer_addrs(dst3, 2, 1), LayerRange{1, 2}),
      TransferConfig(2, layer_addrs(dst2, 3, 1), LayerRange{3, 4})};
  auto s = sync();
  auto task = p_->cache_manager().transfer_cache_async(src.view, s, configs);
  EXPECT_EQ(task.get_results(), (Results{LLMStatusCode::LLM_SUCCESS, LLMStatusCode::LLM_SUCCESS}));
  EXPECT_EQ(s->calls, (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(read(dst3.addrs[4], 2048), read(src.addrs[2], 2048));
  EXPECT_EQ(read(dst3.addrs[5], 2048), read(src.addrs[3], 2048));
  EXPECT_EQ(read(dst3.addrs[2], 2048),
            std::vector<std::uint8_t>(before3.begin() + 2 * 2048, before3.begin() + 3 * 2048));
  EXPECT_EQ(read(dst2.addrs[6], 2048), read(src.addrs[6], 2048));
}

TEST_F(TransferAsync, FalseAbortsTheJobParamInvalidForThatLayerNoneForTheRest) {
  pair();
  auto d3 = decoder(3, 9);
  auto d4 = decoder(4, 10);
  const auto desc = int8_desc(6, 1, 1024);
  const TestCache src = register_cache(*p_, 0, desc, 1);
  const TestCache a = register_cache(*d_, 8, desc, 2);
  const TestCache b = register_cache(*d3, 9, desc, 3);
  const TestCache c = register_cache(*d4, 10, desc, 4);
  const auto before_a = snapshot(a);
  std::vector<AnyTransferConfig> configs = {
      TransferConfig(2, a.addrs, LayerRange{0, 3}),
      TransferConfig(3, layer_addrs(b, 1, 2), LayerRange{1, 3}),
      TransferConfig(4, layer_addrs(c, 2, 1), LayerRange{2, 3})};
  auto s = sync();
  s->answers[1] = false;
  auto task = p_->cache_manager().transfer_cache_async(src.view, s, configs);
  EXPECT_EQ(task.get_results(), (Results{LLMStatusCode::LLM_PARAM_INVALID,
                                         LLMStatusCode::LLM_PARAM_INVALID, std::nullopt}));
  EXPECT_EQ(task.synchronize(), LLMStatusCode::LLM_PARAM_INVALID);
  EXPECT_EQ(s->calls, (std::vector<std::int64_t>{0, 1}));
  ASSERT_EQ(platform_.posts.size(), 1u);
  EXPECT_EQ(read(a.addrs[0], 1024), read(src.addrs[0], 1024));
  EXPECT_EQ(read(a.addrs[2], 1024),
            std::vector<std::uint8_t>(before_a.begin() + 2048, before_a.begin() + 3072));
}

TEST_F(TransferAsync, PerLayerTimeoutIsSyncKvTimeoutFromTheLayerStart) {
  pair({{impl::kOptionSyncKvCacheWaitTime, "1"}});
  // 32 MiB per layer over 200 Gb/s RoCE takes about 1.4 ms.
  const auto desc = int8_desc(4, 1, 16 * static_cast<std::int64_t>(kMiB));
  const TestCache src = register_cache(*p_, 0, desc, 1);
  const TestCache dst = register_cache(*d_, 8, desc, 2);
  std::vector<AnyTransferConfig> configs = {TransferConfig(2, dst.addrs)};
  auto s = sync();
  const Time t0 = platform_.now();
  auto task = p_->cache_manager().transfer_cache_async(src.view, s, configs);
  EXPECT_EQ(task.synchronize(), LLMStatusCode::LLM_TIMEOUT);
  EXPECT_EQ(platform_.now(), t0 + impl::from_ms(1));
  EXPECT_EQ(task.get_results(), (Results{LLMStatusCode::LLM_TIMEOUT}));
  EXPECT_EQ(s->calls, (std::vector<std::int64_t>{0}));
}

TEST_F(TransferAsync, TaskWaitTimeoutDoesNotCancelTheTransfer) {
  pair();
  const auto desc = int8_desc(2, 1, 4096);
  const TestCache src = register_cache(*p_, 0, desc, 1);
  const TestCache dst = register_cache(*d_, 8, desc, 2);
  std::vector<AnyTransferConfig> configs = {TransferConfig(2, dst.addrs)};
  auto s = sync();
  s->delay = impl::from_ms(5);
  const Time t0 = platform_.now();
  auto task = p_->cache_manager().transfer_cache_async(src.view, s, configs);
  EXPECT_EQ(task.synchronize(2), LLMStatusCode::LLM_TIMEOUT);
  EXPECT_EQ(platform_.now(), t0 + impl::from_ms(2));
  EXPECT_EQ(task.get_results(1), (Results{LLMStatusCode::LLM_TIMEOUT}));
  EXPECT_EQ(platform_.now(), t0 + impl::from_ms(3));
  EXPECT_FALSE(task.done());
  EXPECT_THROW(task.synchronize(-1), impl::ValueError);
  EXPECT_EQ(task.synchronize(), LLMStatusCode::LLM_SUCCESS);
  EXPECT_GT(platform_.now(), t0 + impl::from_ms(5));
  EXPECT_EQ(read(dst.addrs[1], 4096), read(src.addrs[1], 4096));
}

TEST_F(TransferAsync, LinkDownMidLayerGivesSuspectRemoteErrorAndKeepsCompletedLayers) {
  pair();
  const auto desc = int8_desc(6, 1, 4 * static_cast<std::int64_t>(kMiB));
  const TestCache src = register_cache(*p_, 0, desc, 1);
  const TestCache dst = register_cache(*d_, 8, desc, 2);
  const auto before = snapshot(dst);
  std::vector<AnyTransferConfig> configs = {TransferConfig(2, dst.addrs)};
  auto s = sync();
  Time fault = 0;
  s->on_call = [&](std::int64_t layer) {
    if (layer != 1) return;
    fault = platform_.now() + 100 * kUs;
    world_.fabric().schedule_link_event("roce n0d0", fault, {model::LinkEvent::Kind::kDown});
  };
  auto task = p_->cache_manager().transfer_cache_async(src.view, s, configs);
  EXPECT_EQ(task.synchronize(), impl::kCopyFailedStatus);
  EXPECT_EQ(task.synchronize(), LLMStatusCode::LLM_SUSPECT_REMOTE_ERROR);
  EXPECT_EQ(platform_.now(), fault + world_.spec().fault_detection_time);
  EXPECT_EQ(s->calls, (std::vector<std::int64_t>{0, 1}));
  const std::uint64_t size = desc.size();
  EXPECT_EQ(read(dst.addrs[0], size), read(src.addrs[0], size));
  EXPECT_EQ(read(dst.addrs[1], size), read(src.addrs[1], size));
  for (std::size_t i = 4; i < 6; ++i) {
    EXPECT_EQ(
        read(dst.addrs[i], size),
        std::vector<std::uint8_t>(before.begin() + static_cast<std::ptrdiff_t>(i * size),
                                  before.begin() + static_cast<std::ptrdiff_t>((i + 1) * size)));
  }
}

TEST_F(TransferAsync, UnlinkDuringALayerWaitsForTheLinkLock) {
  pair();
  const auto desc = int8_desc(4, 1, 8 * static_cast<std::int64_t>(kMiB));
  const TestCache src = register_cache(*p_, 0, desc, 1);
  const TestCache dst = register_cache(*d_, 8, desc, 2);
  std::vector<AnyTransferConfig> configs = {TransferConfig(2, dst.addrs)};
  auto s = sync();
  auto task = p_->cache_manager().transfer_cache_async(src.view, s, configs);
  platform_.sleep(100 * kUs);  // layer 0 is on the wire
  ASSERT_EQ(platform_.posts.size(), 1u);
  ASSERT_FALSE(platform_.posts[0].finished);
  const auto [code, codes] = p_->unlink_clusters({cluster_info(2, 8)});
  EXPECT_EQ(code, LLMStatusCode::LLM_SUCCESS);
  ASSERT_TRUE(platform_.posts[0].finished);
  EXPECT_EQ(platform_.now(), *platform_.posts[0].finished + platform_.round_trip(0, 8));
  EXPECT_EQ(task.get_results(), (Results{LLMStatusCode::LLM_NOT_YET_LINK}));
  EXPECT_EQ(s->calls, (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(read(dst.addrs[1], desc.size()), read(src.addrs[1], desc.size()));
  EXPECT_FALSE(d_->core()->find_link(1));
}

TEST_F(TransferAsync, UnknownCacheAndUnlinkedClusterFailAtTheFirstLayer) {
  pair();
  const auto desc = int8_desc(2, 1, 1024);
  const TestCache src = register_cache(*p_, 0, desc, 1);
  const TestCache dst = register_cache(*d_, 8, desc, 2);
  impl::CacheView unknown = src.view;
  unknown.cache_id = 999;
  std::vector<AnyTransferConfig> configs = {TransferConfig(2, dst.addrs)};
  auto task = p_->cache_manager().transfer_cache_async(unknown, sync(), configs);
  EXPECT_EQ(task.get_results(), (Results{LLMStatusCode::LLM_KV_CACHE_NOT_EXIST}));
  std::vector<AnyTransferConfig> unlinked = {TransferConfig(7, dst.addrs)};
  auto task2 = p_->cache_manager().transfer_cache_async(src.view, sync(), unlinked);
  EXPECT_EQ(task2.get_results(), (Results{LLMStatusCode::LLM_NOT_YET_LINK}));
  EXPECT_TRUE(platform_.posts.empty());
}

TEST_F(TransferAsync, TransfersOfOneProcessAreSerializedLayerByLayer) {
  pair();
  auto d3 = decoder(3, 9);
  const auto desc = int8_desc(4, 1, 2 * static_cast<std::int64_t>(kMiB));
  const TestCache src = register_cache(*p_, 0, desc, 1);
  const TestCache a = register_cache(*d_, 8, desc, 2);
  const TestCache b = register_cache(*d3, 9, desc, 3);
  std::vector<AnyTransferConfig> ca = {TransferConfig(2, a.addrs, LayerRange{0, 2})};
  std::vector<AnyTransferConfig> cb = {TransferConfig(3, b.addrs, LayerRange{0, 2})};
  auto t1 = p_->cache_manager().transfer_cache_async(src.view, sync(), ca);
  auto t2 = p_->cache_manager().transfer_cache_async(src.view, sync(), cb);
  EXPECT_EQ(t1.synchronize(), LLMStatusCode::LLM_SUCCESS);
  EXPECT_EQ(t2.synchronize(), LLMStatusCode::LLM_SUCCESS);
  ASSERT_EQ(platform_.posts.size(), 4u);
  for (std::size_t i = 1; i < 4; ++i) {
    EXPECT_GE(platform_.posts[i].posted, *platform_.posts[i - 1].finished) << i;
  }
  // Layers interleave on the process-wide transfer mutex: task 1 L0, task 2 L0, ...
  EXPECT_EQ(platform_.posts[1].descriptors[0].dst_addr, b.addrs[0]);
  ASSERT_EQ(t2.diagnostics().size(), 1u);
  EXPECT_EQ(t2.diagnostics()[0].kind, impl::DiagnosticKind::kConcurrentTransfer);
  EXPECT_TRUE(t1.diagnostics().empty());
}

TEST_F(TransferAsync, V1WaitsWithWaitProcessTimeoutAndNeedsRolePrompt) {
  const std::map<std::string, std::string> v1 = {
      {impl::kOptionEnableCacheManager, "0"},
      {impl::kOptionSyncKvCacheWaitTime, "1"},
      {impl::kOptionMemPoolConfig, "{\"memory_size\": 134217728}"}};
  // v1: the prompt listens and the decoder links (llm.listenIpInfo, Impl::LinkClusters).
  p_ = make_dist(LLMRole::PROMPT, 1, 0, true, v1);
  d_ = make_dist(LLMRole::DECODER, 2, 8, false, v1);
  link(*d_, 1, 0);
  const auto desc = int8_desc(2, 1, 32 * static_cast<std::int64_t>(kMiB));
  const impl::KvCache src = p_->kv_cache_manager().allocate_cache(desc);
  const impl::KvCache dst = d_->kv_cache_manager().allocate_cache(desc);
  std::vector<AnyTransferConfig> configs = {TransferConfig(2, dst.per_device_tensor_addrs()[0])};
  auto task = p_->kv_cache_manager().transfer_cache_async(src, sync(), configs);
  EXPECT_EQ(task.get_results(), (Results{LLMStatusCode::LLM_WAIT_PROCESS_TIMEOUT}));
  EXPECT_EQ(task.synchronize(0), LLMStatusCode::LLM_WAIT_PROCESS_TIMEOUT);
  std::vector<AnyTransferConfig> back = {TransferConfig(1, src.per_device_tensor_addrs()[0])};
  EXPECT_THROW(d_->kv_cache_manager().transfer_cache_async(dst, sync(), back), impl::LLMException);
}

}  // namespace
}  // namespace kvsim::sim::testing
