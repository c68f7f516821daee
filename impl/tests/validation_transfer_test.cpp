// transfer_cache_async's synchronous validation, one test per rule of spec §3.1.
#include <gtest/gtest.h>

#include <vector>

#include "impl/tests/expect_error.h"
#include "impl/validation.h"

namespace kvsim::impl {
namespace {

using testing::Raises;
using testing::RaisesParamInvalid;

std::vector<std::uint64_t> addrs(std::size_t n, std::uint64_t base = 0x100000) {
  std::vector<std::uint64_t> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(base + i * 0x1000);
  return out;
}

class TransferValidation : public ::testing::Test {
 protected:
  // 80 tensors of [4, 256] fp16: 40 layers, batch 4.
  CacheView contiguous_{1, CacheDesc(80, {4, 256}, DataType::DT_FLOAT16), addrs(80), false};
  // 80 tensors of [16, 128, 8] bf16: a PA cache of 16 blocks.
  CacheView blocks_{2, CacheDesc(80, {16, 128, 8}, DataType::DT_BF16), addrs(80), true};
  std::vector<AnyTransferConfig> configs_{TransferConfig(7, addrs(80))};
  TransferCacheEnv env_;

  TransferCacheArgs args(const CacheView& src) {
    TransferCacheArgs a;
    a.src_cache = &src;
    a.has_layer_synchronizer = true;
    a.transfer_configs = &configs_;
    return a;
  }
  TransferCacheArgs b2b_args() {
    TransferCacheArgs a = args(blocks_);
    a.src_block_indices = std::vector<std::int64_t>{0, 1, 2};
    a.dst_block_indices = std::vector<std::int64_t>{5, 6, 9};
    return a;
  }
  TransferCachePlan validate(const TransferCacheArgs& a) {
    return validate_transfer_cache_async(a, env_);
  }
};

TEST_F(TransferValidation, ValidC2CPlan) {
  const TransferCachePlan plan = validate(args(contiguous_));
  EXPECT_EQ(plan.num_layers, 40);
  EXPECT_EQ(plan.mode, CopyMode::kC2C);
  EXPECT_TRUE(plan.src_blocks.empty());
  EXPECT_TRUE(plan.dst_blocks.empty());
  EXPECT_EQ(plan.dst_block_memory_size, 0u);
  EXPECT_EQ(plan.wait_timeout_code, LLMStatusCode::LLM_TIMEOUT);
}

TEST_F(TransferValidation, ValidB2BAndC2BPlans) {
  const TransferCachePlan b2b = validate(b2b_args());
  EXPECT_EQ(b2b.mode, CopyMode::kB2B);
  EXPECT_EQ(b2b.src_blocks, (std::vector<std::uint64_t>{0, 1, 2}));
  EXPECT_EQ(b2b.dst_blocks, (std::vector<std::uint64_t>{5, 6, 9}));
  TransferCacheArgs c2b = args(contiguous_);
  c2b.dst_block_indices = std::vector<std::int64_t>{3, 4};
  c2b.dst_block_memory_size = 512;
  const TransferCachePlan plan = validate(c2b);
  EXPECT_EQ(plan.mode, CopyMode::kC2B);
  EXPECT_EQ(plan.dst_block_memory_size, 512u);
}

// Item 1.
TEST_F(TransferValidation, SrcCacheNoneIsTypeError) {
  TransferCacheArgs a = args(contiguous_);
  a.src_cache = nullptr;
  EXPECT_TRUE(Raises<TypeError>([&] { validate(a); }, "src_cache", "Cache"));
}

TEST_F(TransferValidation, V2RejectsHostSource) {
  const CacheView host{3, CacheDesc(80, {4, 256}, DataType::DT_FLOAT16, Placement::HOST), addrs(80),
                       false};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(args(host)); }, "src_cache", "HOST"));
  env_.version = ApiVersion::kV1;
  EXPECT_NO_THROW(validate(args(host)));
}

TEST_F(TransferValidation, V1RequiresPromptRoleBeforeAnything) {
  env_.version = ApiVersion::kV1;
  env_.role = LLMRole::DECODER;
  TransferCacheArgs a = args(contiguous_);
  a.src_cache = nullptr;
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(a); }, "transfer_cache_async", "DECODER"));
  env_.version = ApiVersion::kV2;
  EXPECT_NO_THROW(validate(args(contiguous_)));  // v2: the role is a label only
}

// Item 2.
TEST_F(TransferValidation, BlockIndicesMustBeUint64) {
  TransferCacheArgs a = b2b_args();
  a.dst_block_indices = std::vector<std::int64_t>{5, -1, 9};
  EXPECT_TRUE(Raises<ValueError>([&] { validate(a); }, "dst_block_indices[1]", "uint64"));
  a = b2b_args();
  a.src_block_indices = std::vector<std::int64_t>{-4, 1, 2};
  EXPECT_TRUE(Raises<ValueError>([&] { validate(a); }, "src_block_indices[0]"));
}

TEST_F(TransferValidation, DstIndicesAreCheckedBeforeSrcIndices) {
  TransferCacheArgs a = b2b_args();
  a.src_block_indices = std::vector<std::int64_t>{-1, 1, 2};
  a.dst_block_indices = std::vector<std::int64_t>{5, 6, -9};
  EXPECT_TRUE(Raises<ValueError>([&] { validate(a); }, "dst_block_indices[2]"));
}

TEST_F(TransferValidation, DstBlockMemorySizeMustBeUint64) {
  TransferCacheArgs a = b2b_args();
  a.dst_block_memory_size = -2;
  EXPECT_TRUE(Raises<ValueError>([&] { validate(a); }, "dst_block_memory_size"));
}

// Item 3.
TEST_F(TransferValidation, BlocksToCacheIsNotSupported) {
  TransferCacheArgs a = b2b_args();
  a.dst_block_indices.reset();
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(a); }, "dst_block_indices", "blocks to cache"));
  a.dst_block_indices = std::vector<std::int64_t>{};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(a); }, "dst_block_indices", "blocks to cache"));
}

TEST_F(TransferValidation, BlockListsMustHaveEqualLengths) {
  TransferCacheArgs a = b2b_args();
  a.dst_block_indices = std::vector<std::int64_t>{5, 6};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(a); }, "dst_block_indices", "length 2"));
}

TEST_F(TransferValidation, CacheToBlocksNeedsDstBlockMemorySize) {
  TransferCacheArgs a = args(contiguous_);
  a.dst_block_indices = std::vector<std::int64_t>{1, 2};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(a); }, "dst_block_memory_size", "must be set"));
  a.dst_block_memory_size = 0;  // 0 is "set": the per-layer C2B check rejects it later
  EXPECT_NO_THROW(validate(a));
}

TEST_F(TransferValidation, V1RejectsAnyDstBlocksFromContiguousSource) {
  env_.version = ApiVersion::kV1;
  TransferCacheArgs a = args(contiguous_);
  a.dst_block_indices = std::vector<std::int64_t>{};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(a); }, "dst_block_indices", "cache to blocks"));
  a.src_block_indices = std::vector<std::int64_t>{};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(a); }, "dst_block_indices", "cache to blocks"));
  env_.version = ApiVersion::kV2;
  EXPECT_NO_THROW(validate(a));
}

TEST_F(TransferValidation, NonBlocksDestinationNeedsNoneOrZeroBlockSize) {
  TransferCacheArgs a = args(contiguous_);
  a.dst_block_memory_size = 4096;
  EXPECT_TRUE(
      RaisesParamInvalid([&] { validate(a); }, "dst_block_memory_size", "neither None nor 0"));
  a.dst_block_memory_size = 0;
  EXPECT_NO_THROW(validate(a));
}

TEST_F(TransferValidation, NonBlocksBlockSizeIsCheckedAfterTypeChecks) {
  TransferCacheArgs a = args(contiguous_);
  a.dst_block_memory_size = 4096;
  a.has_layer_synchronizer = false;
  EXPECT_TRUE(Raises<TypeError>([&] { validate(a); }, "layer_synchronizer"));
}

// Item 4.
TEST_F(TransferValidation, LayerSynchronizerNoneIsTypeError) {
  TransferCacheArgs a = args(contiguous_);
  a.has_layer_synchronizer = false;
  EXPECT_TRUE(Raises<TypeError>([&] { validate(a); }, "layer_synchronizer", "LayerSynchronizer"));
}

TEST_F(TransferValidation, TransferConfigsNoneIsTypeError) {
  TransferCacheArgs a = args(contiguous_);
  a.transfer_configs = nullptr;
  EXPECT_TRUE(Raises<TypeError>([&] { validate(a); }, "transfer_configs"));
}

TEST_F(TransferValidation, PlainModeNeedsTransferConfig) {
  configs_.push_back(
      TransferWithCacheKeyConfig(BlocksCacheKey{3}, LayerRange{0, 2}, LayerRange{0, 2}));
  EXPECT_TRUE(Raises<TypeError>([&] { validate(args(contiguous_)); }, "transfer_configs[1]",
                                "must be TransferConfig, got TransferWithCacheKeyConfig"));
}

TEST_F(TransferValidation, RemoteModeNeedsTransferWithCacheKeyConfig) {
  env_.remote_cache_accessible = true;
  EXPECT_TRUE(Raises<TypeError>([&] { validate(args(contiguous_)); }, "transfer_configs[0]",
                                "enable_remote_cache_accessible"));
  configs_ = {
      TransferWithCacheKeyConfig(CacheKeyByIdAndIndex(3, 9), LayerRange{0, 2}, LayerRange{0, 2})};
  EXPECT_NO_THROW(validate(args(contiguous_)));
}

TEST_F(TransferValidation, V1IgnoresRemoteModeAndNeedsTransferConfig) {
  env_.version = ApiVersion::kV1;
  env_.remote_cache_accessible = true;
  EXPECT_NO_THROW(validate(args(contiguous_)));
  EXPECT_EQ(validate(args(contiguous_)).wait_timeout_code, LLMStatusCode::LLM_WAIT_PROCESS_TIMEOUT);
}

// Item 5.
TEST_F(TransferValidation, NumTensorsMustBeEven) {
  const CacheView odd{4, CacheDesc(79, {4, 256}, DataType::DT_FLOAT16), addrs(79), false};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(args(odd)); }, "src_cache.cache_desc.num_tensors",
                                 "79 is not even"));
}

// Item 6.
TEST_F(TransferValidation, NoneSrcLayerRangeIsSetInPlace) {
  configs_ = {TransferConfig(7, addrs(80)), TransferConfig(8, addrs(4), LayerRange{3, 5})};
  validate(args(contiguous_));
  EXPECT_EQ(src_layer_range_of(configs_[0]), (LayerRange{0, 40}));
  EXPECT_EQ(src_layer_range_of(configs_[1]), (LayerRange{3, 5}));
}

TEST_F(TransferValidation, DefaultingStopsAtTheFailingConfig) {
  configs_ = {TransferConfig(7, addrs(3)), TransferConfig(8, addrs(80))};
  EXPECT_TRUE(
      RaisesParamInvalid([&] { validate(args(contiguous_)); }, "transfer_configs[0].dst_addrs"));
  EXPECT_EQ(src_layer_range_of(configs_[0]), (LayerRange{0, 40}));
  EXPECT_FALSE(src_layer_range_of(configs_[1]).has_value());
}

TEST_F(TransferValidation, DefaultRangeOfAnEmptyCacheIsRejected) {
  const CacheView empty{5, CacheDesc(0, {4, 256}, DataType::DT_FLOAT16), {}, false};
  EXPECT_TRUE(
      RaisesParamInvalid([&] { validate(args(empty)); }, "transfer_configs[0].src_layer_range"));
}

TEST_F(TransferValidation, BlocksSourceNeedsBatchIndexZero) {
  configs_ = {TransferConfig(7, addrs(80), std::nullopt, 1)};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(b2b_args()); },
                                 "transfer_configs[0].src_batch_index", "while src is blocks"));
}

TEST_F(TransferValidation, ContiguousSourceLeavesBatchIndexToTheLayerCheck) {
  configs_ = {TransferConfig(7, addrs(80), std::nullopt, 9)};
  EXPECT_NO_THROW(validate(args(contiguous_)));
}

TEST_F(TransferValidation, SrcLayerRangeMustFitTheLayers) {
  configs_ = {TransferConfig(7, addrs(2), LayerRange{40, 41})};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(args(contiguous_)); },
                                 "transfer_configs[0].src_layer_range",
                                 "stop 41 exceeds num_layers 40"));
  configs_ = {TransferConfig(7, addrs(80), LayerRange{0, 40})};
  EXPECT_NO_THROW(validate(args(contiguous_)));
}

TEST_F(TransferValidation, DstAddrsNeedTwoPerLayer) {
  configs_ = {TransferConfig(7, addrs(80)), TransferConfig(8, addrs(5), LayerRange{2, 5})};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(args(contiguous_)); },
                                 "transfer_configs[1].dst_addrs", "expected 6 addresses"));
}

TEST_F(TransferValidation, KeyConfigsHaveNoDstAddrsRule) {
  env_.remote_cache_accessible = true;
  configs_ = {TransferWithCacheKeyConfig(BlocksCacheKey{3}, LayerRange{1, 4}, LayerRange{0, 3})};
  EXPECT_NO_THROW(validate(b2b_args()));
  configs_ = {TransferWithCacheKeyConfig(BlocksCacheKey{3}, LayerRange{38, 41}, LayerRange{0, 3})};
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(b2b_args()); },
                                 "transfer_configs[0].src_layer_range", "exceeds"));
}

TEST_F(TransferValidation, LayerTransferTakesTheLayersAddressPair) {
  std::vector<std::uint64_t> dst = addrs(8, 0x900000);
  configs_ = {TransferConfig(7, dst, LayerRange{4, 8}, 2)};
  const TransferCachePlan plan = validate(args(contiguous_));
  const auto& config = std::get<TransferConfig>(configs_[0]);
  const LayerTransfer layer = make_layer_transfer(plan, config, 6);
  EXPECT_EQ(layer.layer_index, 6u);
  EXPECT_EQ(layer.dst_addrs, (std::vector<std::uint64_t>{dst[4], dst[5]}));
  EXPECT_EQ(layer.src_batch_index, 2u);
  EXPECT_EQ(layer.tensor_num_per_layer, 2u);
  EXPECT_TRUE(RaisesParamInvalid([&] { make_layer_transfer(plan, config, 8); }, "src_layer"));
}

}  // namespace
}  // namespace kvsim::impl
