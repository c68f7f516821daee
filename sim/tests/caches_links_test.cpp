// Stateful rules of caches and links (spec §4): registration limits and register-before-link,
// pools, link_clusters / unlink_clusters, pulls, pushes and local copies, with real bytes.
#include <gtest/gtest.h>

#include <array>

#include "impl/data_dist_core.h"
#include "impl/tests/expect_error.h"
#include "sim/engine_setup.h"
#include "sim/tests/impl_world_support.h"

namespace kvsim::sim::testing {
namespace {

using impl::LayerRange;
using impl::LLMRole;
using impl::LLMStatusCode;
using impl::testing::Raises;
using impl::testing::RaisesLLM;
using impl::testing::RaisesParamInvalid;
using impl::testing::RaisesStrict;

class CachesLinks : public ImplWorld {
 protected:
  void pair(std::map<std::string, std::string> extra = {}) {
    p_ = make_dist(LLMRole::PROMPT, 1, 0, false, extra);
    d_ = make_dist(LLMRole::DECODER, 2, 8, true, extra);
  }
  impl::CacheManager& pm() { return p_->cache_manager(); }
  impl::CacheManager& dm() { return d_->cache_manager(); }

  /// Two linked processes with blocks caches of 2 tensors x 8 blocks of 256 bytes: the decode
  /// side's (BlocksCacheKey{2, 0}) to pull from, the prompt side's to pull into.
  struct BlocksPair {
    TestCache remote, local;
    std::vector<std::uint8_t> before;  ///< the local cache's bytes before the pull
  };
  BlocksPair linked_blocks_caches() {
    pair();
    const auto desc = int8_desc(2, 8, 256);
    BlocksPair b{register_cache(*d_, 8, desc, 1, true, impl::BlocksCacheKey{2, 0}),
                 register_cache(*p_, 0, desc, 2, true),
                 {}};
    b.before = snapshot(b.local);
    link(*p_, 2, 8);
    return b;
  }
  /// Local tensor i as it should read after the pull moved (src block, dst block, blocks).
  std::vector<std::uint8_t> pulled(const BlocksPair& b, std::size_t i,
                                   std::vector<std::array<std::uint64_t, 3>> moves) {
    std::vector<std::uint8_t> expected(
        b.before.begin() + static_cast<std::ptrdiff_t>(i * 2048),
        b.before.begin() + static_cast<std::ptrdiff_t>((i + 1) * 2048));
    const auto src = read(b.remote.addrs[i], 2048);
    for (const auto& [from, to, n] : moves) splice(expected, to * 256, src, from * 256, n * 256);
    return expected;
  }

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
  std::tie(code, codes) =
      d_->link_clusters({cluster_info(1, 0, 8), cluster_info(9, 5, 8), cluster_info(2, 8, 8)}, 500);
  // D already has the link P made (the comm backend gives both sides one); nobody listens for
  // device 5; the last is D itself. The overall code is the last failure.
  EXPECT_EQ(codes, (std::vector<LLMStatusCode>{LLMStatusCode::LLM_ALREADY_LINK,
                                               LLMStatusCode::LLM_LINK_FAILED,
                                               LLMStatusCode::LLM_LINK_FAILED}));
  EXPECT_EQ(code, LLMStatusCode::LLM_LINK_FAILED);
  impl::LLMClusterInfo two_remotes = cluster_info(2, 8);
  two_remotes.append_remote_ip_info(platform_.host_ip(1), listen_port(8));
  EXPECT_EQ(p_->link_clusters({two_remotes}).second,
            (std::vector<LLMStatusCode>{LLMStatusCode::LLM_PARAM_INVALID}));
  impl::LLMClusterInfo no_local;
  no_local.set_remote_cluster_id(2);
  no_local.append_remote_ip_info(platform_.host_ip(1), listen_port(8));
  EXPECT_TRUE(RaisesParamInvalid([&] { p_->link_clusters({no_local}); }, "clusters",
                                 "local_ip_info_list is empty"));
  impl::LLMClusterInfo wrong_id = cluster_info(4, 8);
  std::tie(code, codes) = p_->link_clusters({wrong_id});
  EXPECT_EQ(codes, (std::vector<LLMStatusCode>{LLMStatusCode::LLM_LINK_FAILED}));
  const std::vector<impl::LLMClusterInfo> many(17, cluster_info(2, 8));
  EXPECT_EQ(p_->link_clusters(many).first, LLMStatusCode::LLM_CLUSTER_NUM_EXCEED_LIMIT);
  EXPECT_TRUE(Raises<impl::ValueError>([&] { p_->link_clusters({}, -1); }, "timeout"));
  // Unlinking what is not linked succeeds (DestroyEntity of an unknown entity).
  std::tie(code, codes) = p_->unlink_clusters({cluster_info(2, 8), cluster_info(7, 8)});
  EXPECT_EQ(codes,
            (std::vector<LLMStatusCode>{LLMStatusCode::LLM_SUCCESS, LLMStatusCode::LLM_SUCCESS}));
  EXPECT_FALSE(d_->core()->find_link(1));
}

// LinkMsgHandler::UnlinkCluster: without force, the server at remote_ip_info is told first; one
// that cannot be reached leaves this side linked. With force only this side goes, and the peer's
// stale link is replaced when this side links again (exchange_info.force_link).
TEST_F(CachesLinks, UnlinkTellsTheServerUnlessForcedAndRelinkReplacesAStaleSide) {
  pair();
  link(*p_, 2, 8);
  impl::LLMClusterInfo nowhere = cluster_info(2, 8);
  nowhere = impl::LLMClusterInfo();
  nowhere.set_remote_cluster_id(2);
  nowhere.append_remote_ip_info(platform_.host_ip(1), 9);  // D's host, no listener on port 9
  Time t0 = platform_.now();
  auto [code, codes] = p_->unlink_clusters({nowhere});
  EXPECT_EQ(code, LLMStatusCode::LLM_UNLINK_FAILED);
  EXPECT_EQ(platform_.now(), t0 + platform_.round_trip(0, 8));
  EXPECT_TRUE(p_->core()->find_link(2));
  impl::LLMClusterInfo id_only;
  id_only.set_remote_cluster_id(2);
  EXPECT_EQ(p_->unlink_clusters({id_only}).second,
            (std::vector<LLMStatusCode>{LLMStatusCode::LLM_PARAM_INVALID}));
  t0 = platform_.now();
  EXPECT_EQ(p_->unlink_clusters({id_only}, 3000, true).first, LLMStatusCode::LLM_SUCCESS);
  EXPECT_EQ(platform_.now(), t0);
  EXPECT_FALSE(p_->core()->find_link(2));
  EXPECT_TRUE(d_->core()->find_link(1));  // the server was not told
  link(*p_, 2, 8);                        // replaces D's stale side
  EXPECT_TRUE(d_->core()->find_link(1));
  t0 = platform_.now();
  EXPECT_EQ(d_->unlink_clusters({cluster_info(1, 0, 8)}).first, LLMStatusCode::LLM_UNLINK_FAILED);
  EXPECT_EQ(p_->unlink_clusters({cluster_info(2, 8)}).first, LLMStatusCode::LLM_SUCCESS);
  EXPECT_FALSE(d_->core()->find_link(1));
}

// The hixl backend (HixlTransferEngine) links one-sidedly: A→B and B→A coexist, each used by its
// client only, and unlink ignores force.
TEST_F(CachesLinks, HixlLinksAreTheClientsAndBothDirectionsCoexist) {
  const std::map<std::string, std::string> hixl = {{impl::kOptionLocalCommRes, ""},
                                                   {impl::kOptionTransferBackend, "hixl"}};
  p_ = make_dist(LLMRole::PROMPT, 1, 0, true, hixl);
  d_ = make_dist(LLMRole::DECODER, 2, 8, true, hixl);
  link(*p_, 2, 8);
  EXPECT_FALSE(d_->core()->find_link(1));
  link(*d_, 1, 0);
  EXPECT_TRUE(p_->core()->find_link(2));
  EXPECT_TRUE(d_->core()->find_link(1));
  EXPECT_EQ(p_->link_clusters({cluster_info(2, 8)}).first, LLMStatusCode::LLM_ALREADY_LINK);
  EXPECT_EQ(p_->unlink_clusters({cluster_info(2, 8)}).first, LLMStatusCode::LLM_SUCCESS);
  EXPECT_FALSE(p_->core()->find_link(2));
  EXPECT_TRUE(d_->core()->find_link(1));
  // A comm-backend client cannot link to a hixl server.
  auto c = make_dist(LLMRole::PROMPT, 3, 1, false);
  EXPECT_EQ(c->link_clusters({cluster_info(2, 8, 1)}).first, LLMStatusCode::LLM_LINK_FAILED);
}

// v1 (hicann/ge link_manager.cc): link_clusters and unlink_clusters of one process hold one
// timed lock, waited for at most `timeout` read as microseconds; v2 has no such lock.
TEST_F(CachesLinks, V1LinkCallsWaitForEachOtherThenReturnProcessingLink) {
  const std::map<std::string, std::string> v1 = {{impl::kOptionEnableCacheManager, "0"}};
  // v1: prompts listen and the decoder links (dflow/llm_datadist/v1/llm_datadist.cc).
  p_ = make_dist(LLMRole::PROMPT, 1, 0, true, v1);
  auto p3 = make_dist(LLMRole::PROMPT, 3, 1, true, v1);
  d_ = make_dist(LLMRole::DECODER, 2, 8, false, v1);
  EXPECT_EQ(p3->link_clusters({cluster_info(1, 0, 1)}),
            (impl::LinkResult{LLMStatusCode::LLM_PARAM_INVALID, {}}));
  const Time t0 = platform_.now();
  const Time link1 = 2 * platform_.round_trip(8, 0);
  std::vector<impl::LinkResult> got(3);
  std::vector<Time> ended(3);
  const std::vector<std::int64_t> timeouts = {3000, 0, 3000};
  platform_.spawn("link_1", [&] {
    got[0] = d_->link_clusters({cluster_info(1, 0, 8)}, timeouts[0]);
    ended[0] = platform_.now();
  });
  platform_.spawn("link_3_no_wait", [&] {
    got[1] = d_->link_clusters({cluster_info(3, 1, 8)}, timeouts[1]);
    ended[1] = platform_.now();
  });
  platform_.spawn("unlink_1_waits", [&] {
    got[2] = d_->unlink_clusters({cluster_info(1, 0, 8)}, timeouts[2]);
    ended[2] = platform_.now();
  });
  world_.platform().run_until_idle();
  EXPECT_EQ(got[0].first, LLMStatusCode::LLM_SUCCESS);
  EXPECT_EQ(ended[0], t0 + link1);
  EXPECT_EQ(got[1], (impl::LinkResult{LLMStatusCode::LLM_PROCESSING_LINK, {}}));
  EXPECT_EQ(ended[1], t0);
  EXPECT_EQ(got[2].first, LLMStatusCode::LLM_SUCCESS);
  EXPECT_EQ(ended[2], t0 + link1 + platform_.round_trip(8, 0));
  EXPECT_FALSE(d_->core()->find_link(3));
  EXPECT_FALSE(d_->core()->find_link(1));
  // A wait longer than the timeout in microseconds gives up.
  const Time t1 = platform_.now();
  platform_.spawn("link_1_again", [&] { got[0] = d_->link_clusters({cluster_info(1, 0, 8)}); });
  platform_.spawn("link_3_1us", [&] {
    got[1] = d_->link_clusters({cluster_info(3, 1, 8)}, 1);
    ended[1] = platform_.now();
  });
  world_.platform().run_until_idle();
  ASSERT_GT(link1, impl::from_ms(1) / 1000);
  EXPECT_EQ(got[1].first, LLMStatusCode::LLM_PROCESSING_LINK);
  EXPECT_EQ(ended[1], t1 + impl::from_ms(1) / 1000);
  // v2 links the two clusters at once.
  auto p2 = make_dist(LLMRole::PROMPT, 4, 2, false);
  auto d5 = make_dist(LLMRole::DECODER, 5, 9, true);
  auto d6 = make_dist(LLMRole::DECODER, 6, 10, true);
  platform_.spawn("v2_link_5", [&] { got[0] = p2->link_clusters({cluster_info(5, 9, 2)}, 0); });
  platform_.spawn("v2_link_6", [&] { got[1] = p2->link_clusters({cluster_info(6, 10, 2)}, 0); });
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
  // link_clusters leaves the default as it was (only link() sets set_is_call_linked).
  EXPECT_TRUE(pm().register_cache(desc, addrs, {}, true).remote_accessible);
  EXPECT_EQ(p_->core()->caches().totals().addresses, totals.addresses + 2);
  EXPECT_TRUE(pm().register_cache(desc, alloc_tensors(0, desc, 3)).remote_accessible);
  // The docs require unregistering after unlink, the code does not check: a diagnostic.
  const std::size_t diagnostics = world_.directory().diagnostics().entries().size();
  pm().unregister_cache(before_link.view.cache_id);
  EXPECT_EQ(p_->core()->caches().find(before_link.view.cache_id), nullptr);
  const auto& entries = world_.directory().diagnostics().entries();
  ASSERT_EQ(entries.size(), diagnostics + 1);
  EXPECT_EQ(entries.back().kind, impl::DiagnosticKind::kUnregisterWhileLinked);
  // An unknown id succeeds with a warning (CommMemManager::UnregisterCacheMem): a diagnostic.
  pm().unregister_cache(before_link.view.cache_id);
  EXPECT_EQ(world_.directory().diagnostics().entries().back().kind,
            impl::DiagnosticKind::kUnregisterUnknownCache);
  // Strict mode turns both into the errors hardware would give.
  auto strict = make_dist(LLMRole::PROMPT, 7, 3, false, {{impl::kOptionKvsimStrict, "1"}});
  EXPECT_TRUE(RaisesStrict([&] { strict->cache_manager().unregister_cache(99); },
                           impl::DiagnosticKind::kUnregisterUnknownCache, "cache_id"));
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
  const BlocksPair b = linked_blocks_caches();
  pm().pull_blocks(impl::BlocksCacheKey{2, 0}, b.local.view, {1, 2, 6}, {4, 5, 0});
  ASSERT_EQ(platform_.posts.back().descriptors.size(), 4u);  // 2 runs x 2 tensors
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(read(b.local.addrs[i], 2048), pulled(b, i, {{1, 4, 2}, {6, 0, 1}}));
  }
}

// A destination block named twice: the batches are cut so the later source lands last (the
// planner's shortcut for distinct destinations must not skip that cut).
TEST_F(CachesLinks, PullBlocksRepeatedDestinationLandsTheLaterSource) {
  const BlocksPair b = linked_blocks_caches();
  const std::size_t posts = platform_.posts.size();
  pm().pull_blocks(impl::BlocksCacheKey{2, 0}, b.local.view, {1, 3}, {5, 5});
  EXPECT_EQ(platform_.posts.size() - posts, 3u);  // [t0 1->5] [t0 3->5, t1 1->5] [t1 3->5]
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(read(b.local.addrs[i], 2048), pulled(b, i, {{3, 5, 1}}));
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
  pair();
  p_->init({{impl::kOptionDeviceId, "5"}});  // initialized already: init returns (llm_datadist.py)
  EXPECT_EQ(p_->core()->device(), 0);
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        early->init({{impl::kOptionDeviceId, "3"}, {impl::kOptionEnableCacheManager, "1"}});
      },
      "cluster_id"));
  EXPECT_TRUE(RaisesParamInvalid([&] { p_->kv_cache_manager(); }, "kv_cache_manager",
                                 "is not supported when llm.EnableCacheManager is configured."));
  // v2 switches roles without llm.EnableSwitchRole (LLMLinkManager::SwitchRole never reads it),
  // but not while a link remains, whichever side made it.
  link(*p_, 2, 8);
  for (impl::LLMDataDist* side : {p_.get(), d_.get()}) {
    EXPECT_TRUE(RaisesLLM([&] { side->switch_role(LLMRole::MIX); }, LLMStatusCode::LLM_EXIST_LINK,
                          "switch_role"));
  }
  p_->unlink_clusters({cluster_info(2, 8)});
  p_->switch_role(LLMRole::PROMPT);  // the same role is fine in v2
  // With llm.listenIpInfo it listens there; without, it stops listening, whatever the role.
  const std::string listen = platform_.host_ip(0) + ":27000";
  p_->switch_role(LLMRole::DECODER, {{impl::kOptionListenIpInfo, listen}});
  EXPECT_EQ(p_->role(), LLMRole::DECODER);
  ASSERT_TRUE(p_->core()->options().listen_ip_info);
  EXPECT_EQ(p_->core()->options().listen_ip_info->port, 27000);
  EXPECT_EQ(d_->link_clusters({cluster_info(1, 0, 8)}).first, LLMStatusCode::LLM_LINK_FAILED);
  impl::LLMClusterInfo to_p = cluster_info(1, 0, 8);
  to_p = impl::LLMClusterInfo();
  to_p.set_remote_cluster_id(1);
  to_p.append_local_ip_info(platform_.host_ip(1), 0);
  to_p.append_remote_ip_info(platform_.host_ip(0), 27000);
  EXPECT_EQ(d_->link_clusters({to_p}).first, LLMStatusCode::LLM_SUCCESS);
  d_->unlink_clusters({to_p});
  p_->switch_role(LLMRole::PROMPT);
  EXPECT_FALSE(p_->core()->options().listen_ip_info);
  // Another node's host address cannot be bound; the failed switch changes nothing.
  const std::map<std::string, std::string> foreign = {
      {impl::kOptionListenIpInfo, platform_.host_ip(1) + ":27000"}};
  EXPECT_TRUE(RaisesLLM([&] { p_->switch_role(LLMRole::DECODER, foreign); },
                        LLMStatusCode::LLM_FAILED, "llm.listenIpInfo", "not an address"));
  EXPECT_EQ(p_->role(), LLMRole::PROMPT);
  EXPECT_FALSE(p_->core()->options().listen_ip_info);
  p_->finalize();
  EXPECT_TRUE(
      Raises<impl::RuntimeError>([&] { p_->cache_manager(); }, "LLMDataDist.cache_manager"));
}

// v1 (hicann/ge llm_datadist_v1): the same role is refused, a switch to PROMPT needs its listen
// address, and the whole call needs llm.EnableSwitchRole.
TEST_F(CachesLinks, V1SwitchRoleRules) {
  const std::map<std::string, std::string> v1 = {{impl::kOptionEnableCacheManager, "0"}};
  auto d = make_dist(LLMRole::DECODER, 2, 8, false, v1);
  EXPECT_TRUE(RaisesParamInvalid([&] { d->switch_role(LLMRole::DECODER); }, "role"));
  EXPECT_TRUE(RaisesParamInvalid([&] { d->switch_role(LLMRole::PROMPT); }, "switch_options"));
  const std::string listen = platform_.host_ip(1) + ":27000";
  EXPECT_TRUE(RaisesLLM(
      [&] {
        d->switch_role(LLMRole::PROMPT, {{"llm.listenIpInfo", listen}});
      },
      LLMStatusCode::LLM_FEATURE_NOT_ENABLED, "switch_role"));
  auto e =
      make_dist(LLMRole::DECODER, 3, 9, false,
                {{impl::kOptionEnableCacheManager, "0"}, {impl::kOptionEnableSwitchRole, "1"}});
  e->switch_role(LLMRole::PROMPT, {{"llm.listenIpInfo", listen}});
  EXPECT_EQ(e->role(), LLMRole::PROMPT);
  // A v1 prompt needs its listen address at init (EngineConfig.gen_cluster_info_if_not_exist).
  EXPECT_TRUE(
      RaisesParamInvalid([&] { make_dist(LLMRole::PROMPT, 4, 1, false, v1); }, "llm.listenIpInfo"));
}

// The API generation follows the library's options (§1, v2/llm_datadist.py
// _setup_engine_option): v1 unless llm.EnableCacheManager is "1" or llm.LocalCommRes is given.
TEST_F(CachesLinks, GenerationFollowsTheLibrarysOptions) {
  auto plain = make_dist(LLMRole::DECODER, 1, 0, false, {{impl::kOptionEnableCacheManager, "0"}});
  EXPECT_EQ(plain->core()->version(), impl::ApiVersion::kV1);
  EXPECT_TRUE(
      RaisesParamInvalid([&] { plain->cache_manager(); }, "cache_manager",
                         "is not supported when llm.EnableCacheManager is not configured."));
  auto comm_res = make_dist(LLMRole::DECODER, 2, 1, false, {{impl::kOptionLocalCommRes, ""}});
  EXPECT_EQ(comm_res->core()->version(), impl::ApiVersion::kV2);
  EXPECT_TRUE(comm_res->core()->options().enable_remote_cache_accessible);
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        make_dist(LLMRole::DECODER, 3, 2, false,
                  {{impl::kOptionLocalCommRes, ""}, {impl::kOptionEnableCacheManager, "0"}});
      },
      "llm.LocalCommRes"));
  // llm.TransferBackend: the cache manager, remote-accessible caches and a listen address.
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        make_dist(LLMRole::DECODER, 4, 3, false, {{impl::kOptionTransferBackend, "hixl"}});
      },
      "llm.TransferBackend", "listenIpInfo"));
  EXPECT_TRUE(RaisesLLM(
      [&] {
        make_dist(LLMRole::DECODER, 5, 4, true, {{impl::kOptionTransferBackend, "adxl"}});
      },
      LLMStatusCode::LLM_FAILED, "llm.TransferBackend"));
  auto hixl = make_dist(LLMRole::DECODER, 6, 5, true, {{impl::kOptionTransferBackend, "hixl"}});
  EXPECT_TRUE(hixl->core()->options().enable_remote_cache_accessible);
  EXPECT_TRUE(RaisesLLM(
      [&] {
        hixl->link("d", {{6, 0}, {7, 1}}, "{}");
      },
      LLMStatusCode::LLM_FEATURE_NOT_ENABLED, "link"));
  // kvsim options cannot choose the generation.
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        make_dist(LLMRole::DECODER, 8, 6, false, {{"kvsim.ApiVersion", "1"}});
      },
      "kvsim.ApiVersion"));
}

// One LLMDataDist per process ("Cannot init multiple LLMDataDists"); a script that was not
// launched may host several, each recorded as a diagnostic (an error in strict mode).
TEST_F(CachesLinks, OneLLMDataDistPerProcess) {
  const int process = world_.platform().add_process({"p", 0, {0, 1}});
  impl::LLMDataDist first(platform_, world_.directory(), LLMRole::PROMPT, 1);
  impl::LLMDataDist second(platform_, world_.directory(), LLMRole::DECODER, 2);
  world_.platform().run_as(process, [&] {
    first.init({{impl::kOptionDeviceId, "1"}, {impl::kOptionEnableCacheManager, "1"}});
    EXPECT_EQ(first.core()->device(), 1);
    EXPECT_TRUE(RaisesLLM(
        [&] {
          second.init({{impl::kOptionDeviceId, "0"}});
        },
        LLMStatusCode::LLM_FAILED, "init", "Cannot init multiple LLMDataDists"));
  });
  first.finalize();
  world_.platform().run_as(process, [&] {
    EXPECT_TRUE(RaisesParamInvalid(
        [&] {
          second.init({{impl::kOptionDeviceId, "2"}});
        },
        "ge.exec.deviceId", "not a device of this process"));
    second.init({{impl::kOptionDeviceId, "0"}});
  });
  EXPECT_EQ(second.core()->device(), 0);
  impl::LLMDataDist third(platform_, world_.directory(), LLMRole::DECODER, 3);
  impl::LLMDataDist fourth(platform_, world_.directory(), LLMRole::DECODER, 4);
  third.init({{impl::kOptionDeviceId, "8"}});
  fourth.init({{impl::kOptionDeviceId, "9"}});
  ASSERT_EQ(
      world_.directory().diagnostics().count(impl::DiagnosticKind::kSeveralDataDistsInProcess), 1u);
  impl::LLMDataDist strict(platform_, world_.directory(), LLMRole::DECODER, 5);
  const std::map<std::string, std::string> strict_options = {{impl::kOptionDeviceId, "10"},
                                                             {"kvsim.Strict", "1"}};
  EXPECT_TRUE(RaisesStrict([&] { strict.init(strict_options); },
                           impl::DiagnosticKind::kSeveralDataDistsInProcess, "init"));
}

// A process listens on its host's address (LLMLinkManager::Initialize binds it); a device NIC
// address works on kvsim with a diagnostic, anything else fails as bind() does.
TEST_F(CachesLinks, ListenAddressesAreTheHosts) {
  const auto with_listen = [&](std::uint64_t cluster, int device, const std::string& address,
                               std::map<std::string, std::string> extra = {}) {
    extra[impl::kOptionListenIpInfo] = address;
    return make_dist(LLMRole::DECODER, cluster, device, false, extra);
  };
  auto any = with_listen(1, 0, "0.0.0.0:27001");
  auto on_nic = with_listen(2, 1, platform_.device_ip(1) + ":27002");
  EXPECT_EQ(world_.directory().diagnostics().count(impl::DiagnosticKind::kListenOnDeviceAddress),
            1u);
  EXPECT_TRUE(RaisesLLM([&] { with_listen(3, 2, platform_.host_ip(1) + ":27003"); },
                        LLMStatusCode::LLM_FAILED, "llm.listenIpInfo", "not an address"));
  EXPECT_TRUE(RaisesLLM([&] { with_listen(4, 3, platform_.host_ip(0) + ":27001"); },
                        LLMStatusCode::LLM_FAILED, "llm.listenIpInfo", "in use"));
  EXPECT_TRUE(RaisesStrict(
      [&] {
        with_listen(5, 4, platform_.device_ip(4) + ":27005", {{"kvsim.Strict", "1"}});
      },
      impl::DiagnosticKind::kListenOnDeviceAddress, "llm.listenIpInfo"));
  auto other_node = with_listen(6, 8, platform_.host_ip(1) + ":27001");  // another host
  // 0.0.0.0 answers on the host's address, and 127.0.0.1 from the same node.
  auto client = make_dist(LLMRole::PROMPT, 7, 5, false);
  impl::LLMClusterInfo info;
  info.set_remote_cluster_id(1);
  info.append_local_ip_info(platform_.host_ip(0), 0);
  info.append_remote_ip_info(platform_.host_ip(0), 27001);
  EXPECT_EQ(client->link_clusters({info}).first, LLMStatusCode::LLM_SUCCESS);
  impl::LLMClusterInfo loopback;
  loopback.set_remote_cluster_id(2);
  loopback.append_local_ip_info("127.0.0.1", 0);
  loopback.append_remote_ip_info(platform_.device_ip(1), 27002);
  EXPECT_EQ(client->link_clusters({loopback}).first, LLMStatusCode::LLM_SUCCESS);
}

}  // namespace
}  // namespace kvsim::sim::testing
