// pull_cache / pull_blocks / push_cache / push_blocks argument rules, one test per rule of §4.
#include <gtest/gtest.h>

#include <vector>

#include "impl/tests/expect_error.h"
#include "impl/validation.h"

namespace kvsim::impl {
namespace {

using testing::Raises;
using testing::RaisesLLM;
using testing::RaisesParamInvalid;

std::vector<std::uint64_t> addrs(std::size_t n) {
  std::vector<std::uint64_t> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(0x200000 + i * 0x1000);
  return out;
}

class PullPushValidation : public ::testing::Test {
 protected:
  CacheView contiguous_{1, CacheDesc(80, {4, 256}, DataType::DT_FLOAT16), addrs(80), false};
  CacheView blocks_{2, CacheDesc(80, {16, 128}, DataType::DT_FLOAT16), addrs(80), true};
  CacheView host_blocks_{3, CacheDesc(80, {16, 128}, DataType::DT_FLOAT16, Placement::HOST),
                         addrs(80), true};
  const CacheKey req_key_{5, 100};

  PullCacheArgs pull_cache_args() {
    PullCacheArgs a;
    a.cache_key = PullCacheKey(req_key_);
    a.cache = &contiguous_;
    return a;
  }
  PullBlocksArgs pull_blocks_args() {
    PullBlocksArgs a;
    a.src_cache_key = PullBlocksKey(BlocksCacheKey{5});
    a.dst_cache = &blocks_;
    a.src_blocks = {0, 1, 2};
    a.dst_blocks = {7, 8, 9};
    return a;
  }
  PushCacheArgs push_cache_args() {
    PushCacheArgs a;
    a.dst_cache_key = CacheKeyByIdAndIndex(5, 11, 1);
    a.src_cache = &contiguous_;
    return a;
  }
  PushBlocksArgs push_blocks_args() {
    PushBlocksArgs a;
    a.dst_cache_key = BlocksCacheKey{5};
    a.src_cache = &blocks_;
    a.src_blocks = {0, 1};
    a.dst_blocks = {3, 4};
    return a;
  }
};

// --- pull_cache ---

TEST_F(PullPushValidation, PullCacheValidPlan) {
  PullCacheArgs a = pull_cache_args();
  a.batch_index = 3;
  a.size = 4096;
  a.layers.src_layer_range = LayerRange{2, 4};
  a.layers.dst_layer_range = LayerRange{0, 2};
  const PullCachePlan plan = validate_pull_cache(a, false);
  EXPECT_EQ(plan.batch_index, 3u);
  EXPECT_EQ(plan.size, 4096);
  EXPECT_EQ(plan.tensor_indices.src, (std::vector<std::uint64_t>{4, 5, 6, 7}));
  EXPECT_EQ(plan.tensor_indices.dst, (std::vector<std::uint64_t>{0, 1, 2, 3}));
}

TEST_F(PullPushValidation, PullCacheKeyNoneIsTypeError) {
  PullCacheArgs a = pull_cache_args();
  a.cache_key.reset();
  EXPECT_TRUE(Raises<TypeError>([&] { validate_pull_cache(a, false); }, "cache_key"));
}

TEST_F(PullPushValidation, PullCacheRemoteModeTakesCacheKeyByIdOnly) {
  EXPECT_TRUE(Raises<TypeError>([&] { validate_pull_cache(pull_cache_args(), true); }, "cache_key",
                                "CacheKeyByIdAndIndex"));
  PullCacheArgs a = pull_cache_args();
  a.cache_key = PullCacheKey(CacheKeyByIdAndIndex(5, 11));
  EXPECT_NO_THROW(validate_pull_cache(a, true));
}

TEST_F(PullPushValidation, PullCacheCacheNoneIsTypeError) {
  PullCacheArgs a = pull_cache_args();
  a.cache = nullptr;
  EXPECT_TRUE(Raises<TypeError>([&] { validate_pull_cache(a, false); }, "cache"));
}

TEST_F(PullPushValidation, PullCacheBatchIndexIsUint32) {
  PullCacheArgs a = pull_cache_args();
  a.batch_index = -1;
  EXPECT_TRUE(Raises<ValueError>([&] { validate_pull_cache(a, false); }, "batch_index"));
}

TEST_F(PullPushValidation, PullCacheDestinationIsNotBlocks) {
  PullCacheArgs a = pull_cache_args();
  a.cache = &blocks_;
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_pull_cache(a, false); }, "cache", "blocks"));
}

TEST_F(PullPushValidation, PullCacheSizeIsMinusOneOrPositive) {
  for (std::int64_t bad : {0, -2}) {
    PullCacheArgs a = pull_cache_args();
    a.size = bad;
    EXPECT_TRUE(RaisesParamInvalid([&] { validate_pull_cache(a, false); }, "size")) << bad;
  }
}

TEST_F(PullPushValidation, PullCacheTensorNumPerLayerRules) {
  PullCacheArgs a = pull_cache_args();
  a.layers.tensor_num_per_layer = -1;
  EXPECT_TRUE(Raises<ValueError>([&] { validate_pull_cache(a, false); }, "tensor_num_per_layer"));
  a.layers.tensor_num_per_layer = 0;
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_pull_cache(a, false); }, "tensor_num_per_layer"));
  // Without a layer range every tensor goes to its counterpart: tensor_num_per_layer is unused
  // (hixl DataCacheEngine::CheckTensorIndices checks divisibility for given ranges only).
  for (std::int64_t unused : {3, 160, 1}) {
    a.layers.tensor_num_per_layer = unused;
    EXPECT_NO_THROW(validate_pull_cache(a, false)) << unused;
  }
  a.layers.src_layer_range = LayerRange{0, 1};
  a.layers.dst_layer_range = LayerRange{0, 1};
  a.layers.tensor_num_per_layer = 3;  // does not divide 80
  EXPECT_TRUE(
      RaisesParamInvalid([&] { validate_pull_cache(a, false); }, "tensor_num_per_layer", "divide"));
  a.layers.tensor_num_per_layer = 160;
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_pull_cache(a, false); }, "tensor_num_per_layer"));
  a.layers.tensor_num_per_layer = 1;
  EXPECT_NO_THROW(validate_pull_cache(a, false));
}

TEST_F(PullPushValidation, PullCacheKeyNeedsExactlyOneValidId) {
  PullCacheArgs a = pull_cache_args();
  a.cache_key = PullCacheKey(CacheKey{5, kInvalidId, 0, kInvalidId});
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_pull_cache(a, false); }, "cache_key", "one of"));
  a.cache_key = PullCacheKey(CacheKey{5, 1, 0, 2});
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_pull_cache(a, false); }, "cache_key", "only one"));
  a.cache_key = PullCacheKey(CacheKey{5, kInvalidId, 0, 2});
  EXPECT_NO_THROW(validate_pull_cache(a, false));
}

TEST_F(PullPushValidation, PullLayerRangesAreStepOneFromZero) {
  PullCacheArgs a = pull_cache_args();
  a.layers.src_layer_range = LayerRange{0, 4, 2};
  EXPECT_TRUE(
      RaisesParamInvalid([&] { validate_pull_cache(a, false); }, "src_layer_range", "step"));
  a = pull_cache_args();
  a.layers.dst_layer_range = LayerRange{0, 4, -1};
  EXPECT_TRUE(
      RaisesParamInvalid([&] { validate_pull_cache(a, false); }, "dst_layer_range", "step"));
  a = pull_cache_args();
  a.layers.src_layer_range = LayerRange{-1, 4};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_pull_cache(a, false); }, "src_layer_range", "< 0"));
  a = pull_cache_args();
  a.layers.dst_layer_range = LayerRange{4294967295, 4294967297};
  EXPECT_TRUE(Raises<ValueError>([&] { validate_pull_cache(a, false); }, "dst_layer_range"));
}

TEST_F(PullPushValidation, EmptyLayerRangeMeansAllLayersAsInPython) {
  PullCacheArgs a = pull_cache_args();
  a.layers.src_layer_range = LayerRange{5, 3};
  const PullCachePlan plan = validate_pull_cache(a, false);
  EXPECT_TRUE(plan.tensor_indices.src.empty());
  EXPECT_TRUE(plan.tensor_indices.dst.empty());
}

// --- pull_blocks ---

TEST_F(PullPushValidation, PullBlocksValidPlan) {
  const PullBlocksPlan plan = validate_pull_blocks(pull_blocks_args());
  EXPECT_EQ(plan.src_blocks, (std::vector<std::uint64_t>{0, 1, 2}));
  EXPECT_EQ(plan.dst_blocks, (std::vector<std::uint64_t>{7, 8, 9}));
  EXPECT_EQ(plan.tensor_num_per_layer, 2u);
}

TEST_F(PullPushValidation, PullBlocksNoneArgumentsAreTypeErrors) {
  PullBlocksArgs a = pull_blocks_args();
  a.src_cache_key.reset();
  EXPECT_TRUE(Raises<TypeError>([&] { validate_pull_blocks(a); }, "src_cache_key"));
  a = pull_blocks_args();
  a.dst_cache = nullptr;
  EXPECT_TRUE(Raises<TypeError>([&] { validate_pull_blocks(a); }, "dst_cache"));
}

TEST_F(PullPushValidation, PullBlocksNegativeBlockIsTypeError) {
  PullBlocksArgs a = pull_blocks_args();
  a.src_blocks = {0, -1, 2};
  EXPECT_TRUE(Raises<TypeError>([&] { validate_pull_blocks(a); }, "src_blocks[1]"));
}

TEST_F(PullPushValidation, PullBlocksDestinationIsBlocks) {
  PullBlocksArgs a = pull_blocks_args();
  a.dst_cache = &contiguous_;
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_pull_blocks(a); }, "dst_cache", "blocks cache"));
}

TEST_F(PullPushValidation, PullBlocksDstBlocksNonEmpty) {
  PullBlocksArgs a = pull_blocks_args();
  a.dst_blocks.clear();
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_pull_blocks(a); }, "dst_blocks", "empty"));
}

TEST_F(PullPushValidation, PullBlocksTensorNumPerLayer) {
  PullBlocksArgs a = pull_blocks_args();
  a.layers.tensor_num_per_layer = 4294967296;
  EXPECT_TRUE(Raises<ValueError>([&] { validate_pull_blocks(a); }, "tensor_num_per_layer"));
  a.layers.tensor_num_per_layer = 0;
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_pull_blocks(a); }, "tensor_num_per_layer"));
}

TEST_F(PullPushValidation, PullBlocksSrcBlocksRequiredIffBlocksKey) {
  PullBlocksArgs a = pull_blocks_args();
  a.src_blocks.clear();
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_pull_blocks(a); }, "src_blocks", "empty"));
  a = pull_blocks_args();
  a.src_cache_key = PullBlocksKey(CacheKeyByIdAndIndex(5, 1));
  EXPECT_TRUE(
      RaisesParamInvalid([&] { validate_pull_blocks(a); }, "src_blocks", "not a BlocksCacheKey"));
  a.src_blocks.clear();
  EXPECT_NO_THROW(validate_pull_blocks(a));
}

TEST_F(PullPushValidation, PullBlocksCacheKeyNeedsExactlyOneValidId) {
  PullBlocksArgs a = pull_blocks_args();
  a.src_cache_key = PullBlocksKey(CacheKey{5});
  a.src_blocks.clear();
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_pull_blocks(a); }, "src_cache_key"));
}

TEST_F(PullPushValidation, PullBlocksBlocksKeyNeedsEqualLengths) {
  PullBlocksArgs a = pull_blocks_args();
  a.dst_blocks = {7, 8};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_pull_blocks(a); }, "dst_blocks", "mismatches"));
}

TEST_F(PullPushValidation, PullBlocksLayerRanges) {
  PullBlocksArgs a = pull_blocks_args();
  a.layers.src_layer_range = LayerRange{1, 3};
  EXPECT_EQ(validate_pull_blocks(a).tensor_indices.src, (std::vector<std::uint64_t>{2, 3, 4, 5}));
  a.layers.src_layer_range = LayerRange{1, 3, 3};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_pull_blocks(a); }, "src_layer_range"));
}

TEST_F(PullPushValidation, HostToDevicePullBlocksOnlyBetweenBlocksCaches) {
  EXPECT_TRUE(RaisesParamInvalid(
      [&] { validate_pull_placement(blocks_, Placement::HOST, false, true, 200u << 20); },
      "src_cache_key", "blocks caches only"));
  EXPECT_NO_THROW(validate_pull_placement(blocks_, Placement::HOST, true, true, 200u << 20));
  EXPECT_NO_THROW(validate_pull_placement(blocks_, Placement::DEVICE, false, true, std::nullopt));
}

TEST_F(PullPushValidation, HostDevicePullNeedsA100MiBPool) {
  EXPECT_TRUE(RaisesLLM(
      [&] { validate_pull_placement(host_blocks_, Placement::DEVICE, true, true, std::nullopt); },
      LLMStatusCode::LLM_FEATURE_NOT_ENABLED, "llm.MemPoolConfig", "100 MiB"));
  EXPECT_TRUE(RaisesLLM(
      [&] { validate_pull_placement(contiguous_, Placement::HOST, false, false, 50u << 20); },
      LLMStatusCode::LLM_FEATURE_NOT_ENABLED, "llm.MemPoolConfig"));
  EXPECT_NO_THROW(validate_pull_placement(contiguous_, Placement::HOST, false, false, 100u << 20));
}

// --- push_cache ---

TEST_F(PullPushValidation, PushCacheValidPlan) {
  PushCacheArgs a = push_cache_args();
  a.src_batch_index = 2;
  a.src_layer_range = LayerRange{2, 4};
  a.dst_layer_range = LayerRange{5, 7};
  const PushPlan plan = validate_push_cache(a, true);
  using Pair = std::pair<std::uint64_t, std::uint64_t>;
  EXPECT_EQ(plan.layers, (std::vector<Pair>{{2, 5}, {3, 6}}));
  EXPECT_EQ(plan.src_batch_index, 2u);
  EXPECT_EQ(validate_push_cache(push_cache_args(), true).layers.size(), 40u);
}

TEST_F(PullPushValidation, PushCacheNeedsRemoteAccessibleMode) {
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_push_cache(push_cache_args(), false); },
                                 "push_cache", "enable_remote_cache_accessible"));
}

TEST_F(PullPushValidation, PushCacheNoneArgumentsAreTypeErrors) {
  PushCacheArgs a = push_cache_args();
  a.dst_cache_key.reset();
  EXPECT_TRUE(Raises<TypeError>([&] { validate_push_cache(a, true); }, "dst_cache_key"));
  a = push_cache_args();
  a.src_cache = nullptr;
  EXPECT_TRUE(Raises<TypeError>([&] { validate_push_cache(a, true); }, "src_cache"));
}

TEST_F(PullPushValidation, PushCacheSrcBatchIndexIsUint32) {
  PushCacheArgs a = push_cache_args();
  a.src_batch_index = -3;
  EXPECT_TRUE(Raises<ValueError>([&] { validate_push_cache(a, true); }, "src_batch_index"));
}

TEST_F(PullPushValidation, PushCacheSourceIsNotBlocks) {
  PushCacheArgs a = push_cache_args();
  a.src_cache = &blocks_;
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_push_cache(a, true); }, "src_cache", "blocks"));
}

TEST_F(PullPushValidation, PushCacheTensorNumPerLayer) {
  PushCacheArgs a = push_cache_args();
  a.tensor_num_per_layer = 0;
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_push_cache(a, true); }, "tensor_num_per_layer"));
  a.tensor_num_per_layer = 3;
  EXPECT_TRUE(
      RaisesParamInvalid([&] { validate_push_cache(a, true); }, "tensor_num_per_layer", "divide"));
  a.tensor_num_per_layer = 1;
  EXPECT_EQ(validate_push_cache(a, true).layers.size(), 80u);
}

TEST_F(PullPushValidation, PushCacheRangesAreCheckedAndEqualInLength) {
  PushCacheArgs a = push_cache_args();
  a.src_layer_range = LayerRange{3, 3};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_push_cache(a, true); }, "src_layer_range"));
  a = push_cache_args();
  a.dst_layer_range = LayerRange{0, 4, 2};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_push_cache(a, true); }, "dst_layer_range"));
  a = push_cache_args();
  a.src_layer_range = LayerRange{0, 3};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_push_cache(a, true); }, "src_layer_range",
                                 "dst_layer_range length 40"));
}

TEST_F(PullPushValidation, PushCacheSizeMustBeMinusOne) {
  PushCacheArgs a = push_cache_args();
  a.size = 1024;
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_push_cache(a, true); }, "size"));
}

TEST_F(PullPushValidation, PushCacheSourceLayersMustExistUpFront) {
  PushCacheArgs a = push_cache_args();
  a.src_layer_range = LayerRange{38, 42};
  a.dst_layer_range = LayerRange{0, 4};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_push_cache(a, true); }, "src_layer_range",
                                 "exceeds num_layers 40"));
}

// --- push_blocks ---

TEST_F(PullPushValidation, PushBlocksValidPlan) {
  const PushPlan plan = validate_push_blocks(push_blocks_args(), true);
  EXPECT_EQ(plan.layers.size(), 40u);
  EXPECT_EQ(plan.src_blocks, (std::vector<std::uint64_t>{0, 1}));
  EXPECT_EQ(plan.dst_blocks, (std::vector<std::uint64_t>{3, 4}));
}

TEST_F(PullPushValidation, PushBlocksNeedsRemoteAccessibleMode) {
  EXPECT_TRUE(
      RaisesParamInvalid([&] { validate_push_blocks(push_blocks_args(), false); }, "push_blocks"));
}

TEST_F(PullPushValidation, PushBlocksNoneArgumentsAreTypeErrors) {
  PushBlocksArgs a = push_blocks_args();
  a.dst_cache_key.reset();
  EXPECT_TRUE(Raises<TypeError>([&] { validate_push_blocks(a, true); }, "dst_cache_key"));
  a = push_blocks_args();
  a.src_cache = nullptr;
  EXPECT_TRUE(Raises<TypeError>([&] { validate_push_blocks(a, true); }, "src_cache"));
  a = push_blocks_args();
  a.dst_blocks = {3, -4};
  EXPECT_TRUE(Raises<TypeError>([&] { validate_push_blocks(a, true); }, "dst_blocks[1]"));
}

TEST_F(PullPushValidation, PushBlocksSourceIsBlocks) {
  PushBlocksArgs a = push_blocks_args();
  a.src_cache = &contiguous_;
  EXPECT_TRUE(
      RaisesParamInvalid([&] { validate_push_blocks(a, true); }, "src_cache", "blocks cache"));
}

TEST_F(PullPushValidation, PushBlocksDstBlocksNonEmpty) {
  PushBlocksArgs a = push_blocks_args();
  a.dst_blocks.clear();
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_push_blocks(a, true); }, "dst_blocks"));
}

TEST_F(PullPushValidation, PushBlocksRangesAndLayers) {
  PushBlocksArgs a = push_blocks_args();
  a.src_layer_range = LayerRange{0, 2};
  a.dst_layer_range = LayerRange{0, 3};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_push_blocks(a, true); }, "src_layer_range"));
  a.src_layer_range = LayerRange{39, 42};
  EXPECT_TRUE(
      RaisesParamInvalid([&] { validate_push_blocks(a, true); }, "src_layer_range", "exceeds"));
  a.tensor_num_per_layer = -1;
  EXPECT_TRUE(Raises<ValueError>([&] { validate_push_blocks(a, true); }, "tensor_num_per_layer"));
}

}  // namespace
}  // namespace kvsim::impl
