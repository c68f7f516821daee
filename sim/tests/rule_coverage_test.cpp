// One test per validation rule of spec §2.3, §3.1, §3.4 and §4: the checklist below maps each rule
// to the test that asserts its exact exception type or status code, that the message names the
// argument, and (for a rejected call) that nothing changed. Rules covered by the pure validation
// tests (impl/tests/*_test.cpp) or by other world tests are listed with those; the rest are
// tested here (RuleCoverage.*).
//
// Legend: V = impl/tests/validation_*_test.cpp, G = impl/tests/copy_geometry_test.cpp,
// E = impl/tests/errors_test.cpp / status_test.cpp, C = sim/tests/caches_links_test.cpp,
// T = sim/tests/transfer_async_test.cpp, D = sim/tests/diagnostics_test.cpp, R = this file.
//
// §2.3 Exception mapping
//  2.3-1 wrong type → TypeError ............... V PullCacheKeyNoneIsTypeError, SrcCacheNoneIs...
//  2.3-2 int out of range → ValueError ........ V BlockIndicesMustBeUint64; E IntegerRangeChecks..
//                                               R UnlinkClustersTimeoutIsUint32
//  2.3-3 semantic → LLMException PARAM_INVALID  E SemanticCheckIsParamInvalid; V (all)
//  2.3-4 second init → LLM_FAILED ............. C LifecycleAndRoleRules
//  2.3-5 C++ code → code_2_status, unknown → LLM_FAILED
//                                               E Code2StatusMapsUnknownToFailed,
//                                               R KeyAlreadyInUseIsCacheKeyAlreadyExistAsFailed
//  2.3-6 any call before init → RuntimeError .. C LifecycleAndRoleRules (cache_manager only);
//                                               R EveryCallBeforeInitOrAfterFinalizeIsRuntimeError
// §3.1 transfer_cache_async synchronous validation
//  3.1-1 src_cache None TypeError / v2 HOST / v1 PROMPT
//                                               V SrcCacheNoneIsTypeError, V2RejectsHostSource,
//                                               V1RequiresPromptRoleBeforeAnything;
//                                               T V1WaitsWithWaitProcessTimeoutAndNeedsRolePrompt;
//                                               R TransferCacheAsyncRejectionStartsNothing
//  3.1-2 block lists int / uint64; bms uint64 . V BlockIndicesMustBeUint64,
//                                               DstIndicesAreCheckedBeforeSrcIndices,
//                                               DstBlockMemorySizeMustBeUint64
//  3.1-3 mode rules ........................... V BlocksToCacheIsNotSupported,
//                                               BlockListsMustHaveEqualLengths,
//                                               CacheToBlocksNeedsDstBlockMemorySize,
//                                               V1RejectsAnyDstBlocksFromContiguousSource,
//                                               NonBlocksDestinationNeedsNoneOrZeroBlockSize
//  3.1-4 synchronizer / config types .......... V LayerSynchronizerNoneIsTypeError,
//                                               TransferConfigsNoneIsTypeError,
//                                               PlainModeNeedsTransferConfig,
//                                               RemoteModeNeedsTransferWithCacheKeyConfig
//  3.1-5 num_tensors even ..................... V NumTensorsMustBeEven;
//                                               R TransferCacheAsyncRejectionStartsNothing
//  3.1-6 range in place, PA batch 0, 0≤start<stop≤layers, 2×layers dst_addrs
//                                               V NoneSrcLayerRangeIsSetInPlace,
//                                               BlocksSourceNeedsBatchIndexZero,
//                                               SrcLayerRangeMustFitTheLayers,
//                                               DstAddrsNeedTwoPerLayer;
//                                               R TransferCacheAsyncRejectionStartsNothing
// §3.4 per-layer C++ semantics
//  3.4-1 not initialized → FAILED ............. D UnalignedRegistrationAndFinalizeWhileBusy
//  3.4-2 tensor_num_per_layer > 0 ............. G LayerPreconditions.ChecksInLibraryOrder;
//                                               V PushCacheTensorNumPerLayer
//  3.4-3 process-wide transfer mutex .......... T TransfersOfOneProcessAreSerializedLayerByLayer
//  3.4-4 src cache registered → KV_CACHE_NOT_EXIST
//  3.4-5 link exists → NOT_YET_LINK ........... T UnknownCacheAndUnlinkedClusterFailAtTheFirstLayer
//  3.4-6 per-link mutex shared with pull/unlink T UnlinkDuringALayerWaitsForTheLinkLock
//  3.4-7 register status OK → NOT_YET_LINK .... n/a: kvsim exchanges memory at link time, so the
//                                               status is OK whenever a link is up (impl/link.h)
//  3.4-8 geometry: layer < num_tensors/2, even, 2 addrs
//                                               G LayerPreconditions.ChecksInLibraryOrder
//  3.4-9 C2C src_batch_index < batch .......... G C2C.BatchIndexMustBeInRange
//  3.4-10 C2B 0<bms<tensor_size, ceil ≥ blocks  G C2B.BlockSizeMustBePositiveAndBelowTensorSize,
//                                               C2B.AtMostCeilTensorSizeOverBlockSizeBlocks
//  3.4-11 B2B equal lengths, bms = stride, src idx < blocks
//                                               G B2B.ListsMustHaveEqualLength,
//                                               B2B.BlockSizeMustEqualSourceStrideIfSet,
//                                               B2B.SourceBlocksMustExist;
//                                               T B2BBlockMemorySizeDefaultsToTheSourceBlock...
//  3.4-12 layer timeout → LLM_TIMEOUT ......... T PerLayerTimeoutIsSyncKvTimeoutFromTheLayerStart
//  3.4-13 remote mode: local remote_accessible, dst layer / row / blocks / bms vs remote
//                                               G RemoteTarget.* (5 tests);
//                                               R PushDstLayersBeyondTheRemoteCache
// §4 related APIs
//  4-1 register: len(addrs)==num_tensors, no zero addr
//                                               V OneAddressPerTensorForBothKinds, NoZeroAddress
//  4-2 remote_accessible default; True after link → LLMException
//                                               V RemoteAccessibleTrueAfterLinkIsRejected,
//                                               DefaultRemoteAccessibleFollowsPlacementAndLinks;
//                                               C RegisterBeforeLinkDecidesRemoteAccessible;
//                                               R RegisterRemoteAccessibleAfterLinkChangesNothing
//  4-3 ≤240 addresses combined ................ V AtMost240AddressesCombined;
//                                               C AddressCountLimitCountsBothRegisterCalls
//  4-4 device ≤50 GB, host ≤20 GB ............. V DeviceRegistrationAtMost50GiB,
//                                               HostRegistrationAtMost20GiBUnlessRaised;
//                                               C DeviceByteLimitIsFiftyGiBAcrossRegistrations
//  4-5 HCCS 2 MB alignment .................... V HccsAlignmentIsARuleTheCallerEnables;
//                                               D StrictUnalignedRegistrationRaises...
//  4-6 register_blocks_cache same rules ....... V OneAddressPerTensorForBothKinds;
//                                               R RegisterRemoteAccessibleAfterLinkChangesNothing
//  4-7 cache key already in use ............... R KeyAlreadyInUseIsCacheKeyAlreadyExistAsFailed
//  4-8 unregister after unlink ................ C RegisterBeforeLinkDecidesRemoteAccessible;
//                                               R UnregisterWhileLinkedKeepsTheCache
//  4-9 pull_cache: dst not blocks, size, step 1, tpl range/divides, remote mode key type
//                                               V PullCacheDestinationIsNotBlocks,
//                                               PullCacheSizeIsMinusOneOrPositive,
//                                               PullLayerRangesAreStepOneFromZero,
//                                               PullCacheTensorNumPerLayerRules,
//                                               PullCacheRemoteModeTakesCacheKeyByIdOnly
//  4-10 pull tensor bounds at run time (ranges beyond either cache, tpl vs remote tensors)
//                                               R PullCacheLayerRangesBeyondEitherCache,
//                                               R PullBlocksLayerRangesBeyondTheRemoteCache
//  4-11 pull timeout → LLMException ........... R PullCacheTimeoutIsLlmTimeout
//  4-12 D2H/H2D need a device pool ≥100 MB .... V HostDevicePullNeedsA100MiBPool;
//                                               R PullAcrossHostAndDeviceNeedsA100MiBDevicePool
//  4-13 pull_blocks: dst blocks, dst_blocks non-empty, src_blocks iff BlocksCacheKey
//                                               V PullBlocksDestinationIsBlocks,
//                                               PullBlocksDstBlocksNonEmpty,
//                                               PullBlocksSrcBlocksRequiredIffBlocksKey
//  4-14 pull_blocks HOST→DEVICE only blocks↔blocks
//                                               V HostToDevicePullBlocksOnlyBetweenBlocksCaches;
//                                               R PullBlocksHostToDeviceOnlyBetweenBlocksCaches
//  4-15 push: remote-accessible mode .......... V PushCacheNeedsRemoteAccessibleMode,
//                                               PushBlocksNeedsRemoteAccessibleMode;
//                                               R PushNeedsRemoteAccessibleMode
//  4-16 push: size must be −1 ................. V PushCacheSizeMustBeMinusOne;
//                                               R PushSizeMustBeMinusOne
//  4-17 push: equal range lengths ............. V PushCacheRangesAreCheckedAndEqualInLength;
//                                               R PushUnequalLayerRangeLengths
//  4-18 push: tensor bounds (src layers, tpl divides num_tensors)
//                                               V PushCacheSourceLayersMustExistUpFront;
//                                               R PushSrcLayersAndTensorNumPerLayerUpFront
//  4-19 push: one synchronous transfer per layer C PushCacheWritesTheRemoteRowLayerByLayer
//  4-20 push: DEVICE source (C++) ............. R PushNeedsADeviceSource
//  4-21 push_blocks: equal non-empty lists .... V PushBlocksDstBlocksNonEmpty,
//                                               PushBlocksRangesAndLayers
//  4-22 allocate: pool of matching placement .. C PoolAllocationRunsOutOfMemoryAndKeepsNothing
//  4-23 allocate: one key per row ............. R MoreKeysThanRowsIsRejected
//  4-24 deferred release until keys pulled/removed
//                                               R DeallocateWithKeysDefersReleaseUntilPulled,
//                                               R DeallocateWithKeysDefersReleaseUntilRemoved
//  4-25 missing cache / key → no-op ........... R MissingCacheOrKeyIsANoOp
//  4-26 copy_cache: no blocks, descs match .... C LocalCopiesMoveExactlyTheNamedBytes (size);
//                                               R CopyCacheRejectsBlocksAndMismatchedDescs
//  4-27 copy_blocks: blocks cache only ........ R CopyBlocksNeedsABlocksCache
//  4-28 swap_blocks: both blocks, equal geometry, H↔D only
//                                               C LocalCopiesMoveExactlyTheNamedBytes (D→D);
//                                               R SwapBlocksNeedsEqualBlocksAcrossHostAndDevice
//  4-29 remap_registered_memory ............... n/a: not modelled (reserved in the spec)
//  4-30 one LLMDataDist per process ........... C OneLLMDataDistPerProcess
//  4-31 link/unlink return codes, ≤16 clusters  C LinkClustersReportsPerClusterAndTakes... (link);
//                                               R MoreThanSixteenClustersPerCallIsRejected
//  4-32 switch_role with links → LLM_EXIST_LINK C LifecycleAndRoleRules;
//                                               R SwitchRoleWithLinksChangesNothing
//  4-33 switch_role needs EnableSwitchRole (v1) C V1SwitchRoleRules; v2 needs none:
//                                               R SwitchRoleWithLinksChangesNothing
//
// Summary: 58 rules. 2 do not apply to kvsim (3.4-7, 4-29). 13 had no test, or only part of
// one, and are tested here first: 2.3-6 (all entry points), 4-7, 4-10, 4-11, 4-20, 4-23, 4-24,
// 4-25, 4-26 (descs), 4-27, 4-28 (geometry), 4-31 (unlink_clusters), 4-33. 16 rules already
// covered get a further world test here with the state checks: 2.3-2, 2.3-5, 3.1-1, 3.1-5,
// 3.1-6, 3.4-13, 4-2, 4-6, 4-8, 4-12, 4-14, 4-15, 4-16, 4-17, 4-18, 4-32. The other 27 are
// covered by the tests named above.
//
// 3.4-13 found a bug: a push whose later dst layer the remote cache lacks sent the earlier
// layers before failing; impl/pull_push.cpp now checks every layer's remote geometry up front.
#include <gtest/gtest.h>

#include <sstream>

#include "impl/data_dist_core.h"
#include "impl/memory_pool.h"
#include "impl/tests/expect_error.h"
#include "sim/tests/impl_world_support.h"

namespace kvsim::sim::testing {
namespace {

using impl::AnyTransferConfig;
using impl::BlocksCacheKey;
using impl::CacheKey;
using impl::CacheKeyByIdAndIndex;
using impl::LayerArgs;
using impl::LayerRange;
using impl::LLMRole;
using impl::LLMStatusCode;
using impl::Placement;
using impl::TransferConfig;
using impl::testing::Raises;
using impl::testing::RaisesLLM;
using impl::testing::RaisesParamInvalid;
using impl::testing::RaisesStrict;

const std::map<std::string, std::string> kRemote = {
    {impl::kOptionEnableRemoteCacheAccessible, "1"}};
const std::string kPool16M = "{\"memory_size\": 16777216}";

class RuleCoverage : public ImplWorld {
 protected:
  void pair(std::map<std::string, std::string> p_extra = {},
            std::map<std::string, std::string> d_extra = {}) {
    p_ = make_dist(LLMRole::PROMPT, 1, 0, false, std::move(p_extra));
    d_ = make_dist(LLMRole::DECODER, 2, 8, true, std::move(d_extra));
  }
  impl::CacheManager& pm() { return p_->cache_manager(); }
  impl::CacheManager& dm() { return d_->cache_manager(); }

  // Everything a rejected call must leave alone: caches, keys, release state, totals, pools and
  // links of one process.
  static std::string state(impl::LLMDataDist& dist) {
    impl::DataDistCore& core = *dist.core();
    std::ostringstream out;
    for (const auto& [id, e] : core.caches().entries()) {
      out << "cache " << id << " reg " << e.registered << " pending " << e.release_pending << " ra "
          << e.view.remote_accessible << " keys";
      for (const auto& k : e.row_keys) {
        out << ' ' << (k ? std::to_string(k->cluster_id) + "/" + std::to_string(k->req_id) : "-");
      }
      if (e.blocks_key)
        out << " bkey " << e.blocks_key->cluster_id << '/' << e.blocks_key->model_id;
      out << '\n';
    }
    const auto& t = core.caches().totals();
    out << "totals " << t.addresses << ' ' << t.device_bytes << ' ' << t.host_bytes << '\n';
    for (Placement p : {Placement::DEVICE, Placement::HOST}) {
      if (const impl::MemoryPool* pool = core.pool(p)) out << "pool used " << pool->used() << '\n';
    }
    for (const auto& [peer, link] : core.links())
      out << "link " << peer << ' ' << link->up() << '\n';
    out << "role " << static_cast<int>(dist.role()) << '\n';
    return out.str();
  }
  // Host memory for `desc` (registered HOST caches), filled with `seed` bytes.
  TestCache register_host(impl::LLMDataDist& dist, int device, const impl::CacheDesc& desc,
                          std::uint32_t seed, bool blocks = false,
                          std::vector<CacheKey> keys = {}) {
    TestCache c{impl::CacheView{-1, desc}, alloc_tensors(device, desc, seed)};
    c.view = blocks ? dist.cache_manager().register_blocks_cache(desc, c.addrs)
                    : dist.cache_manager().register_cache(desc, c.addrs, keys);
    return c;
  }

  std::unique_ptr<impl::LLMDataDist> p_;
  std::unique_ptr<impl::LLMDataDist> d_;
};

// §2.3-6: every call before init, and every manager call after finalize, is RuntimeError naming
// the API.
TEST_F(RuleCoverage, EveryCallBeforeInitOrAfterFinalizeIsRuntimeError) {
  auto early =
      std::make_unique<impl::LLMDataDist>(platform_, world_.directory(), LLMRole::PROMPT, 1);
  using impl::RuntimeError;
  EXPECT_TRUE(Raises<RuntimeError>([&] { early->cache_manager(); }, "LLMDataDist.cache_manager"));
  EXPECT_TRUE(
      Raises<RuntimeError>([&] { early->kv_cache_manager(); }, "LLMDataDist.kv_cache_manager"));
  EXPECT_TRUE(Raises<RuntimeError>([&] { early->link_clusters({cluster_info(2, 8)}); },
                                   "LLMDataDist.link_clusters"));
  EXPECT_TRUE(Raises<RuntimeError>([&] { early->unlink_clusters({cluster_info(2, 8)}); },
                                   "LLMDataDist.unlink_clusters"));
  EXPECT_TRUE(Raises<RuntimeError>([&] { early->switch_role(LLMRole::DECODER); },
                                   "LLMDataDist.switch_role"));
  EXPECT_FALSE(early->initialized());
  EXPECT_EQ(early->role(), LLMRole::PROMPT);

  pair({{impl::kOptionMemPoolConfig, kPool16M}});
  const auto desc = int8_desc(2, 1, 1024);
  const TestCache c = register_cache(*p_, 0, desc, 1);
  impl::CacheManager& cm = pm();
  p_->finalize();
  const impl::CacheView& v = c.view;
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"register_cache", [&] { cm.register_cache(desc, c.addrs); }},
      {"register_blocks_cache", [&] { cm.register_blocks_cache(desc, c.addrs); }},
      {"unregister_cache", [&] { cm.unregister_cache(v.cache_id); }},
      {"allocate_cache", [&] { cm.allocate_cache(desc); }},
      {"deallocate_cache", [&] { cm.deallocate_cache(v); }},
      {"allocate_blocks_cache", [&] { cm.allocate_blocks_cache(desc); }},
      {"deallocate_blocks_cache", [&] { cm.deallocate_blocks_cache(v); }},
      {"remove_cache_key",
       [&] {
         cm.remove_cache_key(CacheKey{2, 1});
       }},
      {"pull_cache",
       [&] {
         cm.pull_cache(CacheKey{2, 1}, v);
       }},
      {"pull_blocks",
       [&] {
         cm.pull_blocks(BlocksCacheKey{2, 0}, v, {0}, {0});
       }},
      {"push_cache", [&] { cm.push_cache(CacheKeyByIdAndIndex(2, 1), v); }},
      {"push_blocks",
       [&] {
         cm.push_blocks(BlocksCacheKey{2, 0}, v, {0}, {0});
       }},
      {"transfer_cache_async",
       [&] {
         std::vector<AnyTransferConfig> configs = {TransferConfig(2, c.addrs)};
         cm.transfer_cache_async(v, std::make_shared<ScriptedSync>(platform_), configs);
       }},
      {"copy_cache", [&] { cm.copy_cache(v, v); }},
      {"copy_blocks", [&] { cm.copy_blocks(v, {}); }},
      {"swap_blocks", [&] { cm.swap_blocks(v, v, {}); }},
  };
  for (const auto& [api, call] : calls) {
    EXPECT_TRUE(Raises<RuntimeError>(call, "CacheManager." + api)) << api;
  }
  EXPECT_TRUE(Raises<RuntimeError>([&] { p_->link_clusters({cluster_info(2, 8)}); },
                                   "LLMDataDist.link_clusters"));
  EXPECT_FALSE(d_->core()->any_link());
  EXPECT_TRUE(platform_.posts.empty());
}

// §2.3-2: integer arguments out of their domain are ValueError.
TEST_F(RuleCoverage, UnlinkClustersTimeoutIsUint32) {
  pair();
  link(*p_, 2, 8);
  const std::string before = state(*p_);
  EXPECT_TRUE(
      Raises<impl::ValueError>([&] { p_->unlink_clusters({cluster_info(2, 8)}, -1); }, "timeout"));
  EXPECT_EQ(state(*p_), before);
  EXPECT_TRUE(d_->core()->find_link(1));
}

// §4-31: at most 16 clusters per link_clusters / unlink_clusters call; the result is a code, not
// an exception, and no link changes.
TEST_F(RuleCoverage, MoreThanSixteenClustersPerCallIsRejected) {
  pair();
  const std::vector<impl::LLMClusterInfo> many(17, cluster_info(2, 8));
  const auto [code, codes] = p_->link_clusters(many);
  EXPECT_EQ(code, LLMStatusCode::LLM_CLUSTER_NUM_EXCEED_LIMIT);
  EXPECT_TRUE(codes.empty());
  EXPECT_FALSE(p_->core()->any_link());
  EXPECT_FALSE(d_->core()->any_link());
  link(*p_, 2, 8);
  const std::string p_before = state(*p_);
  const std::string d_before = state(*d_);
  const auto [ucode, ucodes] = p_->unlink_clusters(many);
  EXPECT_EQ(ucode, LLMStatusCode::LLM_CLUSTER_NUM_EXCEED_LIMIT);
  EXPECT_TRUE(ucodes.empty());
  EXPECT_EQ(state(*p_), p_before);
  EXPECT_EQ(state(*d_), d_before);
}

// §4-32/33: switch_role fails with LLM_EXIST_LINK while links exist, on either side of them
// (LLMLinkManager::SwitchRole counts every entity); the role, listener and links stay. v2 does
// not need llm.EnableSwitchRole.
TEST_F(RuleCoverage, SwitchRoleWithLinksChangesNothing) {
  pair();
  auto p3 = make_dist(LLMRole::PROMPT, 3, 1, false);
  link(*p3, 2, 8);
  for (impl::LLMDataDist* side : {p3.get(), d_.get()}) {
    const std::string before = state(*side);
    const LLMRole role = side->role();
    EXPECT_TRUE(RaisesLLM([&] { side->switch_role(LLMRole::MIX); }, LLMStatusCode::LLM_EXIST_LINK,
                          "switch_role"));
    EXPECT_EQ(state(*side), before);
    EXPECT_EQ(side->role(), role);
  }
  EXPECT_TRUE(d_->core()->find_link(3));
  EXPECT_TRUE(d_->core()->options().listen_ip_info);
  // The link still works: a second link_clusters reports it as existing.
  EXPECT_EQ(p3->link_clusters({cluster_info(2, 8, 1)}).second,
            (std::vector<LLMStatusCode>{LLMStatusCode::LLM_ALREADY_LINK}));
  // Without links the switch goes through, no llm.EnableSwitchRole needed.
  p_->switch_role(LLMRole::MIX);
  EXPECT_EQ(p_->role(), LLMRole::MIX);
}

// §4-2/4-6: link_clusters leaves registrations remote accessible by default and accepts True
// (only link(), the comm-domain API, makes later ones local: set_is_call_linked).
TEST_F(RuleCoverage, RegisterAfterLinkClustersKeepsTheDefault) {
  pair();
  link(*p_, 2, 8);
  const auto desc = int8_desc(2, 4, 256);
  EXPECT_TRUE(pm().register_cache(desc, alloc_tensors(0, desc, 1), {}, true).remote_accessible);
  EXPECT_TRUE(pm().register_blocks_cache(desc, alloc_tensors(0, desc, 2), BlocksCacheKey{1, 0})
                  .remote_accessible);
  EXPECT_FALSE(pm().register_cache(desc, alloc_tensors(0, desc, 3), {}, false).remote_accessible);
}

// §4-8: unregistering a remote-accessible cache while links exist succeeds (nothing checks;
// the docs require unlink first, HCCL fails on hardware): a kUnregisterWhileLinked diagnostic,
// and in strict mode that error, the cache kept. A local cache may go at any time.
TEST_F(RuleCoverage, UnregisterWhileLinkedIsDiagnosed) {
  pair({{impl::kOptionKvsimStrict, "1"}});
  const auto desc = int8_desc(2, 1, 1024);
  const TestCache early = register_cache(*p_, 0, desc, 1);
  const impl::CacheView local = pm().register_cache(desc, alloc_tensors(0, desc, 2), {}, false);
  link(*p_, 2, 8);
  const std::string before = state(*p_);
  EXPECT_TRUE(RaisesStrict([&] { pm().unregister_cache(early.view.cache_id); },
                           impl::DiagnosticKind::kUnregisterWhileLinked, "cache_id"));
  EXPECT_EQ(state(*p_), before);
  EXPECT_NE(p_->core()->caches().find(early.view.cache_id), nullptr);
  pm().unregister_cache(local.cache_id);
  EXPECT_EQ(p_->core()->caches().find(local.cache_id), nullptr);
}

// §4-7 and §2.3-5: a key already in use is the C++ LLM_CACHE_KEY_ALREADY_EXIST, which is not in
// the Python enum, so code_2_status raises LLM_FAILED. Registration, allocation and the pool
// stay as they were.
TEST_F(RuleCoverage, KeyAlreadyInUseIsCacheKeyAlreadyExistAsFailed) {
  pair({{impl::kOptionMemPoolConfig, kPool16M}});
  const auto desc = int8_desc(2, 2, 1024);
  const CacheKey key{1, 7};
  register_cache(*p_, 0, desc, 1, false, std::nullopt, {key});
  register_cache(*p_, 0, desc, 2, true, BlocksCacheKey{1, 3});
  const auto addrs = alloc_tensors(0, desc, 3);
  const std::string before = state(*p_);
  const std::string rule = "LLM_CACHE_KEY_ALREADY_EXIST";
  EXPECT_TRUE(RaisesLLM(
      [&] {
        pm().register_cache(desc, addrs, {CacheKey{1, 8}, key});
      },
      LLMStatusCode::LLM_FAILED, "cache_keys[1]", rule));
  EXPECT_TRUE(RaisesLLM(
      [&] {
        pm().register_cache(desc, addrs, {CacheKey{1, 9}, CacheKey{1, 9}});
      },
      LLMStatusCode::LLM_FAILED, "cache_keys[1]", rule));
  EXPECT_TRUE(RaisesLLM(
      [&] {
        pm().register_blocks_cache(desc, addrs, BlocksCacheKey{1, 3});
      },
      LLMStatusCode::LLM_FAILED, "blocks_cache_key", rule));
  EXPECT_TRUE(RaisesLLM([&] { pm().allocate_cache(desc, {key}); }, LLMStatusCode::LLM_FAILED,
                        "cache_keys[0]", rule));
  EXPECT_TRUE(RaisesLLM(
      [&] {
        pm().allocate_blocks_cache(desc, BlocksCacheKey{1, 3});
      },
      LLMStatusCode::LLM_FAILED, "blocks_cache_key", rule));
  EXPECT_EQ(state(*p_), before);
  // The same ids under another model / cluster are different keys.
  pm().allocate_blocks_cache(desc, BlocksCacheKey{1, 4});
}

// §4-23: one key per batch row; more keys than rows is PARAM_INVALID and allocates nothing.
TEST_F(RuleCoverage, MoreKeysThanRowsIsRejected) {
  pair({{impl::kOptionMemPoolConfig, kPool16M}});
  const auto desc = int8_desc(2, 2, 1024);
  const std::string before = state(*p_);
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().allocate_cache(desc, {CacheKey{1, 1}, CacheKey{1, 2}, CacheKey{1, 3}});
      },
      "cache_keys", "3 keys for 2 batch rows"));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().register_cache(desc, alloc_tensors(0, desc, 1),
                            {CacheKey{1, 4}, CacheKey{1, 5}, CacheKey{1, 6}});
      },
      "cache_keys", "3 keys for 2 batch rows"));
  EXPECT_EQ(state(*p_), before);
}

// §4-24: deallocate_cache with keys left defers the release; the key can still be pulled, and
// the pull frees the cache.
TEST_F(RuleCoverage, DeallocateWithKeysDefersReleaseUntilPulled) {
  pair({{impl::kOptionMemPoolConfig, kPool16M}}, {{impl::kOptionMemPoolConfig, kPool16M}});
  const auto desc = int8_desc(2, 2, 1024);
  const CacheKey key{2, 5};
  const impl::CacheView remote = dm().allocate_cache(desc, {CacheKey{2}, key});
  for (std::size_t i = 0; i < 2; ++i) write(remote.tensor_addrs[i], pattern(2048, 10 + i));
  const impl::MemoryPool* pool = d_->core()->pool(Placement::DEVICE);
  const std::uint64_t used = pool->used();
  dm().deallocate_cache(remote);
  EXPECT_EQ(pool->used(), used);  // deferred
  EXPECT_EQ(d_->core()->caches().find(remote.cache_id), nullptr);
  ASSERT_NE(d_->core()->caches().find_any(remote.cache_id), nullptr);
  EXPECT_TRUE(d_->core()->caches().find_any(remote.cache_id)->release_pending);
  // Gone for calls by id ...
  EXPECT_TRUE(RaisesLLM([&] { dm().copy_cache(remote, remote); },
                        LLMStatusCode::LLM_KV_CACHE_NOT_EXIST, "dst"));
  // ... but its key is still pullable, and the pull releases it.
  const impl::CacheView local = pm().allocate_cache(desc);
  link(*p_, 2, 8);
  pm().pull_cache(key, local, 1);
  for (std::size_t i = 0; i < 2; ++i) {
    const auto row = pattern(2048, 10 + i);
    EXPECT_EQ(read(local.tensor_addrs[i] + 1024, 1024),
              std::vector<std::uint8_t>(row.begin() + 1024, row.end()));
  }
  EXPECT_EQ(d_->core()->caches().find_any(remote.cache_id), nullptr);
  EXPECT_EQ(pool->used(), used - 2 * 64 * 1024);  // two tensors of one 64 KiB page each
}

// §4-24: ... or when remove_cache_key drops the last key.
TEST_F(RuleCoverage, DeallocateWithKeysDefersReleaseUntilRemoved) {
  pair({{impl::kOptionMemPoolConfig, kPool16M}});
  const auto desc = int8_desc(2, 3, 1024);
  const CacheKey a{1, 1};
  const CacheKey b{1, 2};
  const impl::CacheView c = pm().allocate_cache(desc, {a, CacheKey{1}, b});
  const impl::MemoryPool* pool = p_->core()->pool(Placement::DEVICE);
  const std::uint64_t used = pool->used();
  pm().deallocate_cache(c);
  pm().remove_cache_key(a);
  EXPECT_EQ(pool->used(), used);
  EXPECT_NE(p_->core()->caches().find_any(c.cache_id), nullptr);
  pm().remove_cache_key(b);
  EXPECT_EQ(p_->core()->caches().find_any(c.cache_id), nullptr);
  EXPECT_EQ(pool->used(), 0u);
  // Without keys, deallocate_cache frees at once.
  const impl::CacheView bare = pm().allocate_cache(desc);
  pm().deallocate_cache(bare);
  EXPECT_EQ(pool->used(), 0u);
}

// §4-25: deallocating a missing (or already released) cache and removing a missing key are
// no-ops.
TEST_F(RuleCoverage, MissingCacheOrKeyIsANoOp) {
  pair({{impl::kOptionMemPoolConfig, kPool16M}});
  const auto desc = int8_desc(2, 2, 1024);
  const impl::CacheView kept = pm().allocate_cache(desc, {CacheKey{1, 1}});
  const impl::CacheView gone = pm().allocate_blocks_cache(desc);
  pm().deallocate_blocks_cache(gone);
  impl::CacheView unknown = kept;
  unknown.cache_id = 999;
  const std::string before = state(*p_);
  EXPECT_NO_THROW(pm().deallocate_cache(unknown));
  EXPECT_NO_THROW(pm().deallocate_blocks_cache(unknown));
  EXPECT_NO_THROW(pm().deallocate_blocks_cache(gone));
  EXPECT_NO_THROW(pm().deallocate_cache(gone));
  EXPECT_NO_THROW(pm().remove_cache_key(CacheKey{1, 99}));
  EXPECT_NO_THROW(pm().remove_cache_key(CacheKey{2, 1}));  // same req_id, other cluster
  EXPECT_EQ(state(*p_), before);
  // A pending cache deallocated again stays pending.
  pm().deallocate_cache(kept);
  const std::string pending = state(*p_);
  EXPECT_NO_THROW(pm().deallocate_cache(kept));
  EXPECT_EQ(state(*p_), pending);
}

// §4-10: a pull whose layer ranges reach past the remote or the local cache, including a
// tensor_num_per_layer that does not divide the remote num_tensors, is PARAM_INVALID naming the
// range; nothing is copied and the key is not consumed.
TEST_F(RuleCoverage, PullCacheLayerRangesBeyondEitherCache) {
  pair();
  const auto desc = int8_desc(4, 1, 1024);  // 2 layers
  const CacheKey key{2, 1};
  register_cache(*d_, 8, desc, 1, false, std::nullopt, {key});
  const TestCache wide =
      register_cache(*d_, 8, int8_desc(6, 1, 1024), 2, false, std::nullopt, {CacheKey{2, 2}});
  const TestCache local = register_cache(*p_, 0, desc, 3);
  link(*p_, 2, 8);
  const auto bytes = snapshot(local);
  const std::string p_before = state(*p_);
  const std::string d_before = state(*d_);
  const auto pull = [&](const impl::PullCacheKey& k, LayerArgs layers) {
    return [&, k, layers] { pm().pull_cache(k, local.view, 0, -1, layers); };
  };
  EXPECT_TRUE(RaisesParamInvalid(pull(key, {LayerRange{1, 3}, LayerRange{0, 2}}), "src_layer_range",
                                 "of the remote cache"));
  EXPECT_TRUE(RaisesParamInvalid(pull(key, {LayerRange{0, 1}, LayerRange{2, 3}}), "dst_layer_range",
                                 "out of range"));
  EXPECT_TRUE(RaisesParamInvalid(pull(key, {LayerRange{0, 2}, LayerRange{0, 1}}), "dst_layer_range",
                                 "local tensors"));
  // 6 remote tensors, 4 per layer: layer 1 would be tensors 4..7.
  const CacheKeyByIdAndIndex by_id(2, wide.view.cache_id, 0);
  EXPECT_TRUE(RaisesParamInvalid(pull(by_id, {LayerRange{1, 2}, LayerRange{0, 1}, 4}),
                                 "src_layer_range", "of the remote cache"));
  // All 6 remote tensors into 4 local ones.
  EXPECT_TRUE(RaisesParamInvalid(pull(by_id, {}), "dst_layer_range"));
  EXPECT_EQ(snapshot(local), bytes);
  EXPECT_EQ(state(*p_), p_before);
  EXPECT_EQ(state(*d_), d_before);
  EXPECT_TRUE(platform_.posts.empty());
  pm().pull_cache(key, local.view, 0, -1, {LayerRange{1, 2}, LayerRange{0, 1}});
  EXPECT_EQ(read(local.addrs[0], 1024),
            read(d_->core()->caches().entries().begin()->second.view.tensor_addrs[2], 1024));
}

// §4-10 for pull_blocks.
TEST_F(RuleCoverage, PullBlocksLayerRangesBeyondTheRemoteCache) {
  pair();
  const auto desc = int8_desc(4, 4, 256);
  register_cache(*d_, 8, desc, 1, true, BlocksCacheKey{2, 0});
  const TestCache local = register_cache(*p_, 0, desc, 2, true);
  link(*p_, 2, 8);
  const auto bytes = snapshot(local);
  const std::string before = state(*p_);
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().pull_blocks(BlocksCacheKey{2, 0}, local.view, {0}, {1},
                         {LayerRange{2, 3}, LayerRange{0, 1}});
      },
      "src_layer_range", "of the remote cache"));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().pull_blocks(BlocksCacheKey{2, 0}, local.view, {0}, {1},
                         {LayerRange{0, 1}, LayerRange{1, 3}});
      },
      "dst_layer_range"));
  EXPECT_EQ(snapshot(local), bytes);
  EXPECT_EQ(state(*p_), before);
  EXPECT_TRUE(platform_.posts.empty());
}

// §4-11: a pull that outlasts llm.SyncKvCacheWaitTime raises LLMException(LLM_TIMEOUT); the key
// is not consumed.
TEST_F(RuleCoverage, PullCacheTimeoutIsLlmTimeout) {
  pair({{impl::kOptionSyncKvCacheWaitTime, "1"}});
  const auto desc = int8_desc(2, 1, 64 * static_cast<std::int64_t>(kMiB));
  const CacheKey key{2, 1};
  const auto remote_addrs = alloc_tensors(8, desc, 1, /*fill=*/false);
  dm().register_cache(desc, remote_addrs, {key});
  const auto local_addrs = alloc_tensors(0, desc, 2, /*fill=*/false);
  const impl::CacheView local = pm().register_cache(desc, local_addrs);
  link(*p_, 2, 8);
  EXPECT_TRUE(
      RaisesLLM([&] { pm().pull_cache(key, local); }, LLMStatusCode::LLM_TIMEOUT, "pull_cache"));
  EXPECT_TRUE(d_->core()->caches().find_key(key).has_value());
}

// §4-12: a pull between HOST and DEVICE needs a device pool of at least 100 MiB (both
// directions); LLM_FEATURE_NOT_ENABLED naming llm.MemPoolConfig, nothing copied or consumed.
TEST_F(RuleCoverage, PullAcrossHostAndDeviceNeedsA100MiBDevicePool) {
  pair({{impl::kOptionMemPoolConfig, "{\"memory_size\": 67108864}"}});
  const auto dev = int8_desc(2, 1, 1024);
  const auto host = int8_desc(2, 1, 1024, Placement::HOST);
  const CacheKey host_key{2, 1};
  const CacheKey dev_key{2, 2};
  const TestCache remote_host = register_host(*d_, 8, host, 1, false, {host_key});
  register_cache(*d_, 8, dev, 2, false, std::nullopt, {dev_key});
  const TestCache local_dev = register_cache(*p_, 0, dev, 3);
  const TestCache local_host = register_host(*p_, 0, host, 4);
  link(*p_, 2, 8);
  const auto dev_bytes = snapshot(local_dev);
  const auto host_bytes = snapshot(local_host);
  const std::string p_before = state(*p_);
  const std::string d_before = state(*d_);
  EXPECT_TRUE(RaisesLLM([&] { pm().pull_cache(host_key, local_dev.view); },
                        LLMStatusCode::LLM_FEATURE_NOT_ENABLED, impl::kOptionMemPoolConfig,
                        "100 MiB"));
  EXPECT_TRUE(RaisesLLM([&] { pm().pull_cache(dev_key, local_host.view); },
                        LLMStatusCode::LLM_FEATURE_NOT_ENABLED, impl::kOptionMemPoolConfig,
                        "100 MiB"));
  EXPECT_EQ(snapshot(local_dev), dev_bytes);
  EXPECT_EQ(snapshot(local_host), host_bytes);
  EXPECT_EQ(state(*p_), p_before);
  EXPECT_EQ(state(*d_), d_before);
  EXPECT_TRUE(platform_.posts.empty());
  // Exactly 100 MiB is enough.
  auto p3 = make_dist(LLMRole::PROMPT, 3, 1, false,
                      {{impl::kOptionMemPoolConfig, "{\"memory_size\": 104857600}"}});
  const TestCache local3 = register_cache(*p3, 1, dev, 5);
  link(*p3, 2, 8);
  p3->cache_manager().pull_cache(CacheKeyByIdAndIndex(2, remote_host.view.cache_id, 0),
                                 local3.view);
  EXPECT_EQ(read(local3.addrs[1], 1024), read(remote_host.addrs[1], 1024));
}

// §4-14: a HOST → DEVICE pull_blocks is supported between blocks caches only (PARAM_INVALID
// naming src_cache_key), even with a large enough pool.
TEST_F(RuleCoverage, PullBlocksHostToDeviceOnlyBetweenBlocksCaches) {
  pair({{impl::kOptionMemPoolConfig, "{\"memory_size\": 134217728}"}});
  const CacheKey key{2, 1};
  const TestCache remote_row =
      register_host(*d_, 8, int8_desc(2, 1, 1024, Placement::HOST), 1, false, {key});
  const TestCache remote_blocks = register_host(*d_, 8, int8_desc(2, 4, 256, Placement::HOST), 2,
                                                /*blocks=*/true);
  (void)remote_row;
  const TestCache local = register_cache(*p_, 0, int8_desc(2, 4, 256), 3, true);
  link(*p_, 2, 8);
  const auto bytes = snapshot(local);
  const std::string p_before = state(*p_);
  const std::string d_before = state(*d_);
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().pull_blocks(key, local.view, {}, {0, 1, 2, 3});
      },
      "src_cache_key", "blocks caches only"));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().pull_blocks(CacheKeyByIdAndIndex(2, remote_row.view.cache_id, 0), local.view, {}, {0});
      },
      "src_cache_key", "blocks caches only"));
  EXPECT_EQ(snapshot(local), bytes);
  EXPECT_EQ(state(*p_), p_before);
  EXPECT_EQ(state(*d_), d_before);
  EXPECT_TRUE(platform_.posts.empty());
  (void)remote_blocks;
}

// §4-15: push_cache / push_blocks need remote-accessible mode (PARAM_INVALID naming the API).
TEST_F(RuleCoverage, PushNeedsRemoteAccessibleMode) {
  pair();
  const auto desc = int8_desc(4, 2, 512);
  const TestCache src = register_cache(*p_, 0, desc, 1);
  const TestCache dst = register_cache(*d_, 8, desc, 2);
  const TestCache bsrc = register_cache(*p_, 0, desc, 3, true);
  const TestCache bdst = register_cache(*d_, 8, desc, 4, true, BlocksCacheKey{2, 0});
  link(*p_, 2, 8);
  const auto before = snapshot(dst);
  const auto bbefore = snapshot(bdst);
  EXPECT_TRUE(RaisesParamInvalid(
      [&] { pm().push_cache(CacheKeyByIdAndIndex(2, dst.view.cache_id, 0), src.view); },
      "push_cache", "enable_remote_cache_accessible"));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().push_blocks(BlocksCacheKey{2, 0}, bsrc.view, {0}, {1});
      },
      "push_blocks", "enable_remote_cache_accessible"));
  EXPECT_EQ(snapshot(dst), before);
  EXPECT_EQ(snapshot(bdst), bbefore);
  EXPECT_TRUE(platform_.posts.empty());
}

class RuleCoveragePush : public RuleCoverage {
 protected:
  void SetUp() override {
    pair(kRemote, kRemote);
    src_ = register_cache(*p_, 0, desc_, 1);
    dst_ = register_cache(*d_, 8, desc_, 2);
    bsrc_ = register_cache(*p_, 0, desc_, 3, true);
    bdst_ = register_cache(*d_, 8, desc_, 4, true, BlocksCacheKey{2, 0});
    link(*p_, 2, 8);
    before_ = snapshot(dst_);
    bbefore_ = snapshot(bdst_);
  }
  CacheKeyByIdAndIndex key(std::int64_t row = 0) const {
    return CacheKeyByIdAndIndex(2, dst_.view.cache_id, row);
  }
  void expect_unchanged() {
    EXPECT_EQ(snapshot(dst_), before_);
    EXPECT_EQ(snapshot(bdst_), bbefore_);
    EXPECT_TRUE(platform_.posts.empty());
  }

  impl::CacheDesc desc_ = int8_desc(4, 2, 512);  // 2 layers, 2 rows / blocks
  TestCache src_{impl::CacheView{-1, desc_}, {}};
  TestCache dst_{src_};
  TestCache bsrc_{src_};
  TestCache bdst_{src_};
  std::vector<std::uint8_t> before_, bbefore_;
};

// §4-16: push_cache size must be -1.
TEST_F(RuleCoveragePush, PushSizeMustBeMinusOne) {
  for (std::int64_t size : {0, 100, 512, -2}) {
    EXPECT_TRUE(RaisesParamInvalid(
        [&] { pm().push_cache(key(), src_.view, 0, std::nullopt, std::nullopt, size); }, "size",
        "should be -1"))
        << size;
  }
  expect_unchanged();
}

// §4-17: the layer ranges must have equal lengths.
TEST_F(RuleCoveragePush, PushUnequalLayerRangeLengths) {
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().push_cache(key(), src_.view, 0, LayerRange{0, 2}, LayerRange{0, 1});
      },
      "src_layer_range", "should equal dst_layer_range length"));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().push_cache(key(), src_.view, 0, std::nullopt, LayerRange{1, 2});
      },
      "src_layer_range", "should equal dst_layer_range length"));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().push_blocks(BlocksCacheKey{2, 0}, bsrc_.view, {0}, {1}, LayerRange{0, 1},
                         LayerRange{0, 2});
      },
      "src_layer_range", "should equal dst_layer_range length"));
  expect_unchanged();
}

// §4-18: source layers beyond the cache, and a tensor_num_per_layer that does not divide
// num_tensors, are rejected before the first layer goes out.
TEST_F(RuleCoveragePush, PushSrcLayersAndTensorNumPerLayerUpFront) {
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().push_cache(key(), src_.view, 0, LayerRange{1, 3}, LayerRange{0, 2});
      },
      "src_layer_range", "exceeds num_layers 2"));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().push_cache(key(), src_.view, 0, LayerRange{0, 1}, LayerRange{0, 1}, -1, 3);
      },
      "tensor_num_per_layer", "divide num_tensors 4"));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().push_blocks(BlocksCacheKey{2, 0}, bsrc_.view, {0}, {1}, LayerRange{0, 1},
                         LayerRange{0, 1}, 8);
      },
      "tensor_num_per_layer"));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().push_blocks(BlocksCacheKey{2, 0}, bsrc_.view, {0}, {1}, LayerRange{2, 3},
                         LayerRange{0, 1});
      },
      "src_layer_range"));
  expect_unchanged();
}

// §3.4-13: a destination layer, row or block the remote cache lacks is PARAM_INVALID (the
// remote-accessible checks of §3.4), checked for every layer before the first is sent.
TEST_F(RuleCoveragePush, PushDstLayersBeyondTheRemoteCache) {
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().push_cache(key(), src_.view, 0, LayerRange{0, 1}, LayerRange{2, 3});
      },
      "push_cache"));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().push_blocks(BlocksCacheKey{2, 0}, bsrc_.view, {0}, {1}, LayerRange{0, 1},
                         LayerRange{5, 6});
      },
      "push_blocks"));
  expect_unchanged();
  // Layer 0 → 1 exists, layer 1 → 2 does not: the push is rejected as a whole.
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().push_cache(key(), src_.view, 0, LayerRange{0, 2}, LayerRange{1, 3});
      },
      "push_cache"));
  expect_unchanged();
  // Rows and blocks the remote cache lacks, likewise.
  EXPECT_TRUE(RaisesParamInvalid([&] { pm().push_cache(key(2), src_.view); }, "push_cache"));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().push_blocks(BlocksCacheKey{2, 0}, bsrc_.view, {0}, {2});
      },
      "push_blocks"));
  expect_unchanged();
}

// §4-20: push needs a DEVICE source (C++ PushKvCache).
TEST_F(RuleCoveragePush, PushNeedsADeviceSource) {
  const TestCache host = register_host(*p_, 0, int8_desc(4, 2, 512, Placement::HOST), 5);
  EXPECT_TRUE(
      RaisesParamInvalid([&] { pm().push_cache(key(), host.view); }, "src_cache", "DEVICE"));
  expect_unchanged();
}

// §3.1 rejections in the world: no task starts, nothing is synchronized or sent.
TEST_F(RuleCoverage, TransferCacheAsyncRejectionStartsNothing) {
  pair();
  const auto desc = int8_desc(4, 1, 1024);
  const TestCache src = register_cache(*p_, 0, desc, 1);
  const TestCache dst = register_cache(*d_, 8, desc, 2);
  const TestCache host = register_host(*p_, 0, int8_desc(4, 1, 1024, Placement::HOST), 3);
  const TestCache odd = register_cache(*p_, 0, int8_desc(3, 1, 1024), 4);
  link(*p_, 2, 8);
  const auto before = snapshot(dst);
  auto s = std::make_shared<ScriptedSync>(platform_);
  std::vector<AnyTransferConfig> configs = {TransferConfig(2, dst.addrs)};
  EXPECT_TRUE(RaisesParamInvalid([&] { pm().transfer_cache_async(host.view, s, configs); },
                                 "src_cache", "HOST"));
  EXPECT_TRUE(RaisesParamInvalid([&] { pm().transfer_cache_async(odd.view, s, configs); },
                                 "src_cache.cache_desc.num_tensors"));
  configs = {TransferConfig(2, dst.addrs, LayerRange{1, 3})};
  EXPECT_TRUE(RaisesParamInvalid([&] { pm().transfer_cache_async(src.view, s, configs); },
                                 "transfer_configs[0].src_layer_range"));
  configs = {TransferConfig(2, {dst.addrs[0]}, LayerRange{0, 1})};
  EXPECT_TRUE(RaisesParamInvalid([&] { pm().transfer_cache_async(src.view, s, configs); },
                                 "transfer_configs[0].dst_addrs"));
  platform_.sleep(impl::from_ms(1));
  EXPECT_TRUE(s->calls.empty());
  EXPECT_EQ(p_->core()->tasks_in_flight, 0);
  EXPECT_TRUE(platform_.posts.empty());
  EXPECT_EQ(snapshot(dst), before);
}

// §4-26: copy_cache takes no blocks caches and needs matching descriptions.
TEST_F(RuleCoverage, CopyCacheRejectsBlocksAndMismatchedDescs) {
  pair({{impl::kOptionMemPoolConfig, kPool16M}});
  const impl::CacheView a = pm().allocate_cache(int8_desc(2, 2, 1024));
  const impl::CacheView b = pm().allocate_cache(int8_desc(2, 2, 512));
  const impl::CacheView blk = pm().allocate_blocks_cache(int8_desc(2, 2, 1024));
  for (const auto* v : {&a, &b, &blk}) {
    for (std::uint64_t t : v->tensor_addrs) write(t, pattern(v->desc.size(), t));
  }
  const auto image = [&] {
    std::vector<std::uint8_t> out;
    for (const auto* v : {&a, &b, &blk}) {
      for (std::uint64_t t : v->tensor_addrs) {
        const auto bytes = read(t, v->desc.size());
        out.insert(out.end(), bytes.begin(), bytes.end());
      }
    }
    return out;
  };
  const auto before = image();
  EXPECT_TRUE(RaisesParamInvalid([&] { pm().copy_cache(blk, a); }, "dst", "blocks cache"));
  EXPECT_TRUE(RaisesParamInvalid([&] { pm().copy_cache(a, blk); }, "src", "blocks cache"));
  EXPECT_TRUE(RaisesParamInvalid([&] { pm().copy_cache(b, a); }, "dst", "does not match"));
  EXPECT_EQ(image(), before);
}

// §4-27: copy_blocks needs a blocks cache.
TEST_F(RuleCoverage, CopyBlocksNeedsABlocksCache) {
  pair({{impl::kOptionMemPoolConfig, kPool16M}});
  const impl::CacheView a = pm().allocate_cache(int8_desc(2, 4, 256));
  for (std::uint64_t t : a.tensor_addrs) write(t, pattern(1024, t));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().copy_blocks(a, {{0, {1}}});
      },
      "cache", "should be a blocks cache"));
  for (std::uint64_t t : a.tensor_addrs) EXPECT_EQ(read(t, 1024), pattern(1024, t));
}

// §4-28: swap_blocks needs two blocks caches of equal block size and num_tensors, one HOST and
// one DEVICE.
TEST_F(RuleCoverage, SwapBlocksNeedsEqualBlocksAcrossHostAndDevice) {
  pair({{impl::kOptionMemPoolConfig, kPool16M}, {impl::kOptionHostMemPoolConfig, kPool16M}});
  const impl::CacheView dev = pm().allocate_blocks_cache(int8_desc(2, 4, 256));
  const impl::CacheView host_small =
      pm().allocate_blocks_cache(int8_desc(2, 4, 128, Placement::HOST));
  const impl::CacheView host_three =
      pm().allocate_blocks_cache(int8_desc(3, 4, 256, Placement::HOST));
  const impl::CacheView host_row = pm().allocate_cache(int8_desc(2, 4, 256, Placement::HOST));
  std::vector<const impl::CacheView*> all = {&dev, &host_small, &host_three, &host_row};
  for (const auto* v : all) {
    for (std::uint64_t t : v->tensor_addrs) write(t, pattern(v->desc.size(), t));
  }
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().swap_blocks(dev, host_small, {{0, 0}});
      },
      "dst", "block size"));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().swap_blocks(dev, host_three, {{0, 0}});
      },
      "dst", "num_tensors"));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().swap_blocks(dev, host_row, {{0, 0}});
      },
      "dst", "should be blocks cache"));
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        pm().swap_blocks(host_row, dev, {{0, 0}});
      },
      "src", "should be blocks cache"));
  for (const auto* v : all) {
    for (std::uint64_t t : v->tensor_addrs) {
      EXPECT_EQ(read(t, v->desc.size()), pattern(v->desc.size(), t));
    }
  }
  EXPECT_TRUE(platform_.posts.empty());
}

}  // namespace
}  // namespace kvsim::sim::testing
