// Stateful rules of caches and links (spec §4): registration limits and register-before-link,
// pools, link_clusters / unlink_clusters, pulls, pushes and local copies, with real bytes.
#include <gtest/gtest.h>

#include "impl/data_dist_core.h"
#include "impl/tests/expect_error.h"
#include "sim/tests/impl_world_support.h"

namespace kvsim::sim::testing {
namespace {

using impl::LayerRange;
using impl::LLMRole;
using impl::LLMStatusCode;
using impl::testing::Raises;
using impl::testing::RaisesLLM;
using impl::testing::RaisesParamInvalid;

class CachesLinks : public ImplWorld {
 protected:
  void pair(std::map<std::string, std::string> extra = {}) {
    p_ = make_dist(LLMRole::PROMPT, 1, 0, false, extra);
    d_ = make_dist(LLMRole::DECODER, 2, 8, true, extra);
  }
  impl::CacheManager& pm() { return p_->cache_manager(); }
  impl::CacheManager& dm() { return d_->cache_manager(); }

  std::unique_ptr<impl::LLMDataDist> p_;
  std::unique_ptr<impl::LLMDataDist> d_;
};

TEST_F(CachesLinks, LinkClustersReportsPerClusterAndTakesTwoRoundTrips) {
  pair();
  auto d3 = make_dist(LLMRole::DECODER, 3, 1, true);
  const Time t0 = platform_.now();
  auto [code, codes] = p_->link_clusters({cluster_info(2, 8), cluster_info(3, 1)});
  EXPECT_EQ(code, LLMStatusCode::LLM_SUCCESS);
  EXPECT_EQ(codes,
            (std::vector<LLMStatusCode>{LLMStatusCode::LLM_SUCCESS, LLMStatusCode::LLM_SUCCESS}));
  EXPECT_EQ(platform_.now(), t0 + 2 * platform_.round_trip(0, 8));  // the slower, RoCE one
  EXPECT_TRUE(d_->core()->find_link(1));
  std::tie(code, codes) = d_->link_clusters({cluster_info(1, 0), cluster_info(9, 5)}, 500);
  // D already has the link P made; nobody listens on device 5.
  EXPECT_EQ(codes, (std::vector<LLMStatusCode>{LLMStatusCode::LLM_ALREADY_LINK,
                                               LLMStatusCode::LLM_LINK_FAILED}));
  EXPECT_EQ(code, LLMStatusCode::LLM_ALREADY_LINK);
  impl::LLMClusterInfo wrong_id = cluster_info(4, 8);
  std::tie(code, codes) = p_->link_clusters({wrong_id});
  EXPECT_EQ(codes, (std::vector<LLMStatusCode>{LLMStatusCode::LLM_LINK_FAILED}));
  const std::vector<impl::LLMClusterInfo> many(17, cluster_info(2, 8));
  EXPECT_EQ(p_->link_clusters(many).first, LLMStatusCode::LLM_CLUSTER_NUM_EXCEED_LIMIT);
  EXPECT_TRUE(Raises<impl::ValueError>([&] { p_->link_clusters({}, -1); }, "timeout"));
  std::tie(code, codes) = p_->unlink_clusters({cluster_info(2, 8), cluster_info(7, 8)});
  EXPECT_EQ(codes, (std::vector<LLMStatusCode>{LLMStatusCode::LLM_SUCCESS,
                                               LLMStatusCode::LLM_NOT_YET_LINK}));
  EXPECT_FALSE(d_->core()->find_link(1));
}

// v1 (hicann/ge link_manager.cc): link_clusters and unlink_clusters of one process hold one
// timed lock, waited for at most `timeout` read as microseconds; v2 has no such lock.
TEST_F(CachesLinks, V1LinkCallsWaitForEachOtherThenReturnProcessingLink) {
  const std::map<std::string, std::string> v1 = {{impl::kOptionKvsimApiVersion, "1"}};
  pair(v1);
  auto d3 = make_dist(LLMRole::DECODER, 3, 1, true, v1);
  const Time t0 = platform_.now();
  const Time link2 = 2 * platform_.round_trip(0, 8);
  std::vector<impl::LinkResult> got(3);
  std::vector<Time> ended(3);
  const std::vector<std::int64_t> timeouts = {3000, 0, 3000};
  platform_.spawn("link_2", [&] {
    got[0] = p_->link_clusters({cluster_info(2, 8)}, timeouts[0]);
    ended[0] = platform_.now();
  });
  platform_.spawn("link_3_no_wait", [&] {
    got[1] = p_->link_clusters({cluster_info(3, 1)}, timeouts[1]);
    ended[1] = platform_.now();
  });
  platform_.spawn("unlink_2_waits", [&] {
    got[2] = p_->unlink_clusters({cluster_info(2, 8)}, timeouts[2]);
    ended[2] = platform_.now();
  });
  world_.platform().run_until_idle();
  EXPECT_EQ(got[0].first, LLMStatusCode::LLM_SUCCESS);
  EXPECT_EQ(ended[0], t0 + link2);
  EXPECT_EQ(got[1], (impl::LinkResult{LLMStatusCode::LLM_PROCESSING_LINK, {}}));
  EXPECT_EQ(ended[1], t0);
  EXPECT_EQ(got[2].first, LLMStatusCode::LLM_SUCCESS);
  EXPECT_EQ(ended[2], t0 + link2 + platform_.round_trip(0, 8));
  EXPECT_FALSE(p_->core()->find_link(3));
  EXPECT_FALSE(p_->core()->find_link(2));
  // A wait longer than the timeout in microseconds gives up.
  const Time t1 = platform_.now();
  platform_.spawn("link_2_again", [&] { got[0] = p_->link_clusters({cluster_info(2, 8)}); });
  platform_.spawn("link_3_1us", [&] {
    got[1] = p_->link_clusters({cluster_info(3, 1)}, 1);
    ended[1] = platform_.now();
  });
  world_.platform().run_until_idle();
  ASSERT_GT(link2, impl::from_ms(1) / 1000);
  EXPECT_EQ(got[1].first, LLMStatusCode::LLM_PROCESSING_LINK);
  EXPECT_EQ(ended[1], t1 + impl::from_ms(1) / 1000);
  // v2 links the two clusters at once.
  auto p2 = make_dist(LLMRole::PROMPT, 4, 2, false);
  platform_.spawn("v2_link_2", [&] { got[0] = p2->link_clusters({cluster_info(2, 8)}, 0); });
  platform_.spawn("v2_link_3", [&] { got[1] = p2->link_clusters({cluster_info(3, 1)}, 0); });
  world_.platform().run_until_idle();
  EXPECT_EQ(got[0].first, LLMStatusCode::LLM_SUCCESS);
  EXPECT_EQ(got[1].first, LLMStatusCode::LLM_SUCCESS);
}

TEST_F(CachesLinks, LinkToAnAddressNobodyListensOnFailsAfterTheTimeout) {
  pair();
  const Time t0 = platform_.now();
  const auto [code, codes] = p_->link_clusters({cluster_info(5, 3)}, 500);
  EXPECT_EQ(code, LLMStatusCode::LLM_LINK_FAILED);
  EXPECT_EQ(platform_.now(), t0 + impl::from_ms(500));
  EXPECT_FALSE(p_->core()->any_link());
}

TEST_F(CachesLinks, RegisterBeforeLinkDecidesRemoteAccessible) {
  pair();
  const auto desc = int8_desc(2, 1, 4096);
  const TestCache before_link = register_cache(*p_, 0, desc, 1);
  EXPECT_TRUE(before_link.view.remote_accessible);
  link(*p_, 2, 8);
  const auto addrs = alloc_tensors(0, desc, 2);
  const auto totals = p_->core()->caches().totals();
  EXPECT_TRUE(
      RaisesParamInvalid([&] { pm().register_cache(desc, addrs, {}, true); }, "remote_accessible"));
  EXPECT_EQ(p_->core()->caches().totals().addresses, totals.addresses);
  EXPECT_FALSE(pm().register_cache(desc, addrs).remote_accessible);
  // A remote-accessible cache must be unregistered after unlink (§4).
  EXPECT_TRUE(RaisesLLM([&] { pm().unregister_cache(before_link.view.cache_id); },
                        LLMStatusCode::LLM_FAILED, "cache_id"));
  p_->unlink_clusters({cluster_info(2, 8)});
  pm().unregister_cache(before_link.view.cache_id);
  EXPECT_TRUE(RaisesLLM([&] { pm().unregister_cache(before_link.view.cache_id); },
                        LLMStatusCode::LLM_KV_CACHE_NOT_EXIST, "cache_id"));
}

TEST_F(CachesLinks, AddressCountLimitCountsBothRegisterCalls) {
  pair();
  const auto big = int8_desc(200, 1, 64);
  register_cache(*p_, 0, big, 1);
  const auto blocks = int8_desc(41, 2, 64);
  const auto addrs = alloc_tensors(0, blocks, 2);
  EXPECT_TRUE(
      RaisesParamInvalid([&] { pm().register_blocks_cache(blocks, addrs); }, "addrs", "above 240"));
  EXPECT_EQ(p_->core()->caches().totals().addresses, 200u);
  const auto fits = int8_desc(40, 2, 64);
  pm().register_blocks_cache(fits, std::vector<std::uint64_t>(addrs.begin(), addrs.end() - 1));
  EXPECT_EQ(p_->core()->caches().totals().addresses, 240u);
}

TEST_F(CachesLinks, DeviceByteLimitIsFiftyGiBAcrossRegistrations) {
  pair();
  const auto desc = int8_desc(1, 1, 26ll << 30);
  const auto first = alloc_tensors(0, desc, 1, /*fill=*/false);
  const auto second = alloc_tensors(0, desc, 2, /*fill=*/false);
  pm().register_cache(desc, first);
  EXPECT_TRUE(RaisesParamInvalid([&] { pm().register_cache(desc, second); }, "cache_desc",
                                 "device registration limit"));
  EXPECT_EQ(p_->core()->caches().entries().size(), 1u);
}

TEST_F(CachesLinks, RegisteredMemoryMustBeAllocatedOnTheDevice) {
  pair();
  const auto desc = int8_desc(2, 1, 4096);
  const auto elsewhere = alloc_tensors(3, desc, 1);
  EXPECT_TRUE(
      RaisesParamInvalid([&] { pm().register_cache(desc, elsewhere); }, "addrs[0]", "device 0"));
  const auto mine = alloc_tensors(0, desc, 1);
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().register_cache(desc, {mine[0], mine[0] + 2048});
      },
      "addrs[1]"));
  EXPECT_TRUE(p_->core()->caches().entries().empty());
}

TEST_F(CachesLinks, PoolAllocationRunsOutOfMemoryAndKeepsNothing) {
  pair({{impl::kOptionMemPoolConfig, "{\"memory_size\": 4194304, \"page_shift\": 16}"}});
  const impl::MemoryPool* pool = p_->core()->pool(impl::Placement::DEVICE);
  ASSERT_NE(pool, nullptr);
  EXPECT_TRUE(RaisesLLM([&] { pm().allocate_cache(int8_desc(2, 1, 3 << 20)); },
                        LLMStatusCode::LLM_OUT_OF_MEMORY, "cache_desc"));
  EXPECT_EQ(pool->used(), 0u);
  const impl::CacheView c = pm().allocate_cache(int8_desc(2, 1, 2 << 20));
  EXPECT_EQ(pool->used(), 4u << 20);
  EXPECT_TRUE(RaisesLLM([&] { pm().allocate_blocks_cache(int8_desc(2, 1, 1)); },
                        LLMStatusCode::LLM_OUT_OF_MEMORY, "cache_desc"));
  pm().deallocate_cache(c);
  EXPECT_EQ(pool->used(), 0u);
  EXPECT_TRUE(RaisesLLM([&] { pm().allocate_cache(int8_desc(2, 1, 64, impl::Placement::HOST)); },
                        LLMStatusCode::LLM_FEATURE_NOT_ENABLED, "cache_desc.placement"));
  auto huge = std::make_unique<impl::LLMDataDist>(platform_, world_.directory(), LLMRole::MIX, 9);
  EXPECT_TRUE(RaisesLLM(
      [&] {
        huge->init({{impl::kOptionDeviceId, "5"},
                    {impl::kOptionMemPoolConfig, "{\"memory_size\": 107374182400}"}});
      },
      LLMStatusCode::LLM_DEVICE_OUT_OF_MEMORY, impl::kOptionMemPoolConfig));
  EXPECT_FALSE(huge->initialized());
}

TEST_F(CachesLinks, PullCacheCopiesTheKeyedRowAndConsumesTheKey) {
  pair({{impl::kOptionMemPoolConfig, "{\"memory_size\": 16777216}"}});
  const auto desc = int8_desc(4, 2, 1024);
  const impl::CacheKey key{2, 42};
  const impl::CacheView local = pm().allocate_cache(desc);
  EXPECT_TRUE(RaisesLLM([&] { pm().pull_cache(key, local); }, LLMStatusCode::LLM_NOT_YET_LINK,
                        "cache_key"));
  // Row 1 of the remote cache carries the key; row 0 a placeholder.
  const impl::CacheView remote = dm().allocate_cache(desc, {impl::CacheKey{2}, key});
  for (std::size_t i = 0; i < 4; ++i) write(remote.tensor_addrs[i], pattern(2048, 70 + i));
  for (std::size_t i = 0; i < 4; ++i) write(local.tensor_addrs[i], pattern(2048, 90 + i));
  link(*p_, 2, 8);
  pm().pull_cache(key, local, 0);
  for (std::size_t i = 0; i < 4; ++i) {
    std::vector<std::uint8_t> expected = pattern(2048, 90 + i);
    splice(expected, 0, pattern(2048, 70 + i), 1024, 1024);
    EXPECT_EQ(read(local.tensor_addrs[i], 2048), expected);
  }
  EXPECT_EQ(platform_.posts.back().device, 0);  // the puller's engines read the peer
  EXPECT_TRUE(RaisesLLM([&] { pm().pull_cache(key, local); }, LLMStatusCode::LLM_KV_CACHE_NOT_EXIST,
                        "cache_key"));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] { pm().pull_cache(impl::CacheKeyByIdAndIndex(2, remote.cache_id, 0), local, 2); },
      "batch_index"));
}

TEST_F(CachesLinks, PullBlocksMergesRunsBetweenBlocksCaches) {
  pair();
  const auto desc = int8_desc(2, 8, 256);
  const TestCache remote = register_cache(*d_, 8, desc, 1, true, impl::BlocksCacheKey{2, 0});
  const TestCache local = register_cache(*p_, 0, desc, 2, true);
  const auto before = snapshot(local);
  link(*p_, 2, 8);
  pm().pull_blocks(impl::BlocksCacheKey{2, 0}, local.view, {1, 2, 6}, {4, 5, 0});
  ASSERT_EQ(platform_.posts.back().descriptors.size(), 4u);  // 2 runs x 2 tensors
  for (std::size_t i = 0; i < 2; ++i) {
    std::vector<std::uint8_t> expected(
        before.begin() + static_cast<std::ptrdiff_t>(i * 2048),
        before.begin() + static_cast<std::ptrdiff_t>((i + 1) * 2048));
    const auto src = read(remote.addrs[i], 2048);
    splice(expected, 4 * 256, src, 1 * 256, 512);
    splice(expected, 0, src, 6 * 256, 256);
    EXPECT_EQ(read(local.addrs[i], 2048), expected);
  }
}

TEST_F(CachesLinks, PushCacheWritesTheRemoteRowLayerByLayer) {
  pair({{impl::kOptionEnableRemoteCacheAccessible, "1"}});
  const auto desc = int8_desc(4, 2, 512);
  const TestCache src = register_cache(*p_, 0, desc, 1);
  const TestCache dst = register_cache(*d_, 8, desc, 2);
  const auto before = snapshot(dst);
  link(*p_, 2, 8);
  pm().push_cache(impl::CacheKeyByIdAndIndex(2, dst.view.cache_id, 1), src.view, 0,
                  LayerRange{0, 1}, LayerRange{1, 2});
  ASSERT_EQ(platform_.posts.size(), 1u);
  for (std::size_t i = 2; i < 4; ++i) {
    std::vector<std::uint8_t> expected(
        before.begin() + static_cast<std::ptrdiff_t>(i * 1024),
        before.begin() + static_cast<std::ptrdiff_t>((i + 1) * 1024));
    splice(expected, 512, read(src.addrs[i - 2], 1024), 0, 512);
    EXPECT_EQ(read(dst.addrs[i], 1024), expected);
  }
  EXPECT_TRUE(RaisesLLM([&] { pm().push_cache(impl::CacheKeyByIdAndIndex(2, 999, 0), src.view); },
                        LLMStatusCode::LLM_KV_CACHE_NOT_EXIST, "push_cache"));
}

TEST_F(CachesLinks, LocalCopiesMoveExactlyTheNamedBytes) {
  pair({{impl::kOptionMemPoolConfig, "{\"memory_size\": 16777216}"},
        {impl::kOptionHostMemPoolConfig, "{\"memory_size\": 16777216}"}});
  const auto desc = int8_desc(2, 2, 1024);
  const impl::CacheView a = pm().allocate_cache(desc);
  const impl::CacheView b = pm().allocate_cache(desc);
  for (std::size_t i = 0; i < 2; ++i) {
    write(a.tensor_addrs[i], pattern(2048, 10 + i));
    write(b.tensor_addrs[i], pattern(2048, 20 + i));
  }
  pm().copy_cache(b, a, 0, 1, 100, 200);
  for (std::size_t i = 0; i < 2; ++i) {
    std::vector<std::uint8_t> expected = pattern(2048, 20 + i);
    splice(expected, 100, pattern(2048, 10 + i), 1024 + 100, 200);
    EXPECT_EQ(read(b.tensor_addrs[i], 2048), expected);
  }
  EXPECT_TRUE(RaisesParamInvalid([&] { pm().copy_cache(b, a, 0, 0, 1000, 100); }, "size"));

  const auto blocks = int8_desc(2, 4, 256);
  const impl::CacheView dev = pm().allocate_blocks_cache(blocks);
  const impl::CacheView host =
      pm().allocate_blocks_cache(int8_desc(2, 4, 256, impl::Placement::HOST));
  for (std::size_t i = 0; i < 2; ++i) {
    write(dev.tensor_addrs[i], pattern(1024, 30 + i));
    write(host.tensor_addrs[i], pattern(1024, 40 + i));
  }
  pm().copy_blocks(dev, {{0, {2, 3}}});
  pm().swap_blocks(dev, host, {{3, 1}});
  for (std::size_t i = 0; i < 2; ++i) {
    std::vector<std::uint8_t> d = pattern(1024, 30 + i);
    splice(d, 512, d, 0, 256);
    splice(d, 768, d, 0, 256);
    EXPECT_EQ(read(dev.tensor_addrs[i], 1024), d);
    std::vector<std::uint8_t> h = pattern(1024, 40 + i);
    splice(h, 256, d, 768, 256);
    EXPECT_EQ(read(host.tensor_addrs[i], 1024), h);
  }
  EXPECT_TRUE(RaisesParamInvalid([&] { pm().swap_blocks(dev, dev, {{0, 1}}); }, "dst"));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().copy_blocks(dev, {{0, {4}}});
      },
      "copy_block_info[0][0]"));
}

TEST_F(CachesLinks, LifecycleAndRoleRules) {
  auto early =
      std::make_unique<impl::LLMDataDist>(platform_, world_.directory(), LLMRole::PROMPT, 1);
  EXPECT_TRUE(
      Raises<impl::RuntimeError>([&] { early->cache_manager(); }, "LLMDataDist.cache_manager"));
  pair({{impl::kOptionEnableSwitchRole, "1"}});
  EXPECT_TRUE(RaisesLLM(
      [&] {
        p_->init({{impl::kOptionDeviceId, "0"}});
      },
      LLMStatusCode::LLM_FAILED, "init"));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        early->init({{impl::kOptionDeviceId, "3"}});
      },
      "cluster_id"));
  EXPECT_TRUE(RaisesLLM([&] { p_->kv_cache_manager(); }, LLMStatusCode::LLM_FEATURE_NOT_ENABLED,
                        "kv_cache_manager"));
  link(*p_, 2, 8);
  EXPECT_TRUE(RaisesLLM([&] { p_->switch_role(LLMRole::DECODER); }, LLMStatusCode::LLM_EXIST_LINK,
                        "switch_role"));
  p_->unlink_clusters({cluster_info(2, 8)});
  p_->switch_role(LLMRole::DECODER);
  EXPECT_EQ(p_->role(), LLMRole::DECODER);
  p_->finalize();
  EXPECT_TRUE(
      Raises<impl::RuntimeError>([&] { p_->cache_manager(); }, "LLMDataDist.cache_manager"));
}

}  // namespace
}  // namespace kvsim::sim::testing
