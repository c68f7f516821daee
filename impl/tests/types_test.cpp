// Enums and value classes of §2.1/§2.2 and their constructor checks.
#include "impl/types.h"

#include <gtest/gtest.h>

#include <string>

#include "impl/tests/expect_error.h"

namespace kvsim::impl {
namespace {

using testing::Raises;
using testing::RaisesParamInvalid;

TEST(Enums, ValuesMatchSpec) {
  EXPECT_EQ(static_cast<int>(LLMRole::PROMPT), 1);
  EXPECT_EQ(static_cast<int>(LLMRole::DECODER), 2);
  EXPECT_EQ(static_cast<int>(LLMRole::MIX), 3);
  EXPECT_EQ(static_cast<int>(Placement::HOST), 0);
  EXPECT_EQ(static_cast<int>(Placement::DEVICE), 1);
  EXPECT_EQ(static_cast<int>(Memtype::MEM_TYPE_DEVICE), 0);
  EXPECT_EQ(static_cast<int>(Memtype::MEM_TYPE_HOST), 1);
  EXPECT_EQ(static_cast<int>(RegisterMemStatus::OK), 0);
  EXPECT_EQ(static_cast<int>(RegisterMemStatus::PREPARING), 1);
  EXPECT_EQ(static_cast<int>(RegisterMemStatus::FAILED), 2);
  EXPECT_EQ(to_string(LLMRole::DECODER), "DECODER");
  EXPECT_EQ(to_string(Placement::HOST), "HOST");
  EXPECT_EQ(to_string(Memtype::MEM_TYPE_HOST), "MEM_TYPE_HOST");
  EXPECT_EQ(to_string(RegisterMemStatus::PREPARING), "PREPARING");
}

TEST(Enums, UnknownRegisterMemStatusIsFailed) {
  EXPECT_EQ(register_mem_status_from_int(0), RegisterMemStatus::OK);
  EXPECT_EQ(register_mem_status_from_int(1), RegisterMemStatus::PREPARING);
  EXPECT_EQ(register_mem_status_from_int(2), RegisterMemStatus::FAILED);
  EXPECT_EQ(register_mem_status_from_int(7), RegisterMemStatus::FAILED);
  EXPECT_EQ(register_mem_status_from_int(-1), RegisterMemStatus::FAILED);
}

TEST(DataTypes, ValuesAreGeDataTypeAndSizesAreBytes) {
  struct Row {
    DataType type;
    int value;
    std::uint32_t size;
    const char* name;
  };
  const Row rows[] = {
      {DataType::DT_FLOAT, 0, 4, "DT_FLOAT"},     {DataType::DT_FLOAT16, 1, 2, "DT_FLOAT16"},
      {DataType::DT_INT8, 2, 1, "DT_INT8"},       {DataType::DT_INT32, 3, 4, "DT_INT32"},
      {DataType::DT_UINT8, 4, 1, "DT_UINT8"},     {DataType::DT_INT16, 6, 2, "DT_INT16"},
      {DataType::DT_UINT16, 7, 2, "DT_UINT16"},   {DataType::DT_UINT32, 8, 4, "DT_UINT32"},
      {DataType::DT_INT64, 9, 8, "DT_INT64"},     {DataType::DT_UINT64, 10, 8, "DT_UINT64"},
      {DataType::DT_DOUBLE, 11, 8, "DT_DOUBLE"},  {DataType::DT_BOOL, 12, 1, "DT_BOOL"},
      {DataType::DT_STRING, 13, 16, "DT_STRING"}, {DataType::DT_BF16, 27, 2, "DT_BF16"},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(static_cast<int>(row.type), row.value) << row.name;
    EXPECT_EQ(element_size(row.type), row.size) << row.name;
    EXPECT_EQ(std::string(to_string(row.type)), row.name);
    EXPECT_TRUE(is_valid(row.type));
  }
  EXPECT_FALSE(is_valid(static_cast<DataType>(5)));
  EXPECT_TRUE(RaisesParamInvalid([] { element_size(static_cast<DataType>(5)); }, "data_type"));
}

TEST(LayerRangeTest, BehavesAsPythonRange) {
  EXPECT_EQ((LayerRange{0, 40}).size(), 40);
  EXPECT_EQ((LayerRange{5, 3}).size(), 0);
  EXPECT_EQ((LayerRange{0, 10, 3}).size(), 4);
  EXPECT_EQ((LayerRange{10, 0, -3}).size(), 4);
  EXPECT_EQ((LayerRange{0, 10, 0}).size(), 0);
  EXPECT_TRUE((LayerRange{2, 5}).contains(4));
  EXPECT_FALSE((LayerRange{2, 5}).contains(5));
  EXPECT_TRUE((LayerRange{0, 10, 3}).contains(9));
  EXPECT_FALSE((LayerRange{0, 10, 3}).contains(8));
  EXPECT_EQ((LayerRange{2, 5}).at(1), 3);
  EXPECT_EQ(to_string(LayerRange{0, 40}), "range(0, 40)");
  EXPECT_EQ(to_string(LayerRange{0, 40, 2}), "range(0, 40, 2)");
}

TEST(LayerRangeTest, CheckLayerRangeRules) {
  EXPECT_NO_THROW(check_layer_range("r", std::nullopt, true));
  EXPECT_TRUE(Raises<TypeError>([] { check_layer_range("r", std::nullopt, false); }, "r"));
  EXPECT_TRUE(RaisesParamInvalid(
      [] {
        check_layer_range("r", LayerRange{0, 4, 2}, true);
      },
      "r", "step must be 1"));
  EXPECT_TRUE(RaisesParamInvalid([] { check_layer_range("r", LayerRange{-1, 4}, true); }, "r"));
  EXPECT_TRUE(RaisesParamInvalid(
      [] {
        check_layer_range("r", LayerRange{4, 4}, true);
      },
      "r", "0 <= start < stop"));
  EXPECT_NO_THROW(check_layer_range("r", LayerRange{0, 1}, false));
}

TEST(CacheDescTest, SizeIsBytesOfOneTensor) {
  const CacheDesc desc(80, {4, 256}, DataType::DT_FLOAT16);
  EXPECT_EQ(desc.size(), 4u * 256u * 2u);
  EXPECT_EQ(desc.num_tensors(), 80u);
  EXPECT_EQ(desc.batch_size(), 4);
  EXPECT_EQ(desc.placement(), Placement::DEVICE);
  EXPECT_EQ(desc.seq_len_dim_index(), -1);
  EXPECT_FALSE(desc.kv_tensor_format().has_value());
  const CacheDesc bf16(2, {16, 128, 8, 128}, DataType::DT_BF16, Placement::HOST, 0, 1, "BSND");
  EXPECT_EQ(bf16.size(), 16u * 128u * 8u * 128u * 2u);
  EXPECT_EQ(bf16.kv_tensor_format(), "BSND");
}

TEST(CacheDescTest, BatchSizeFollowsBatchDimIndex) {
  const CacheDesc desc(2, {3, 5, 7}, DataType::DT_INT8, Placement::DEVICE, 1);
  EXPECT_EQ(desc.batch_size(), 5);
}

TEST(CacheDescTest, NumTensorsMustBeUint32) {
  EXPECT_TRUE(Raises<ValueError>([] { CacheDesc(-1, {1}, DataType::DT_INT8); },
                                 "cache_desc.num_tensors", "uint32"));
  EXPECT_TRUE(Raises<ValueError>([] { CacheDesc(4294967296, {1}, DataType::DT_INT8); },
                                 "cache_desc.num_tensors"));
}

TEST(CacheDescTest, DataTypeAndPlacementMustBeEnumerators) {
  EXPECT_TRUE(Raises<TypeError>([] { CacheDesc(2, {1}, static_cast<DataType>(99)); },
                                "cache_desc.data_type"));
  EXPECT_TRUE(
      Raises<TypeError>([] { CacheDesc(2, {1}, DataType::DT_INT8, static_cast<Placement>(7)); },
                        "cache_desc.placement"));
}

TEST(CacheDescTest, BatchDimIndexMustBeInRange) {
  EXPECT_TRUE(RaisesParamInvalid(
      [] {
        CacheDesc(2, {4, 8}, DataType::DT_INT8, Placement::DEVICE, 2);
      },
      "cache_desc.batch_dim_index", "out of range [0, 2)"));
  EXPECT_TRUE(RaisesParamInvalid(
      [] {
        CacheDesc(2, {4, 8}, DataType::DT_INT8, Placement::DEVICE, -1);
      },
      "cache_desc.batch_dim_index"));
  EXPECT_TRUE(RaisesParamInvalid([] { CacheDesc(2, {}, DataType::DT_INT8); },
                                 "cache_desc.batch_dim_index"));
}

TEST(CacheDescTest, SeqLenDimIndexIsInt32AndMinusOneOrInRange) {
  EXPECT_TRUE(Raises<ValueError>(
      [] {
        CacheDesc(2, {4, 8}, DataType::DT_INT8, Placement::DEVICE, 0, 2147483648);
      },
      "cache_desc.seq_len_dim_index", "int32"));
  EXPECT_TRUE(RaisesParamInvalid(
      [] {
        CacheDesc(2, {4, 8}, DataType::DT_INT8, Placement::DEVICE, 0, 2);
      },
      "cache_desc.seq_len_dim_index"));
  EXPECT_TRUE(RaisesParamInvalid(
      [] {
        CacheDesc(2, {4, 8}, DataType::DT_INT8, Placement::DEVICE, 0, -2);
      },
      "cache_desc.seq_len_dim_index"));
  EXPECT_NO_THROW(CacheDesc(2, {4, 8}, DataType::DT_INT8, Placement::DEVICE, 0, 1));
}

TEST(CacheDescTest, SizeNeedsPositiveDimsAndNoOverflow) {
  const CacheDesc dynamic(2, {4, -1}, DataType::DT_INT8);
  EXPECT_TRUE(RaisesParamInvalid([&] { (void)dynamic.size(); }, "cache_desc.shape", "dim -1"));
  const CacheDesc huge(2, {1ll << 40, 1ll << 40}, DataType::DT_INT8);
  EXPECT_TRUE(RaisesParamInvalid([&] { (void)huge.size(); }, "cache_desc.shape", "overflow"));
}

TEST(CacheKeys, DefaultsMatchSpec) {
  const CacheKey key{7, 11};
  EXPECT_EQ(key.model_id, 0u);
  EXPECT_EQ(key.prefix_id, kInvalidId);
  EXPECT_EQ(kInvalidId, 18446744073709551615ull);
  const BlocksCacheKey blocks{3};
  EXPECT_EQ(blocks.model_id, 0u);
  const CacheKeyByIdAndIndex by_id(1, 42);
  EXPECT_EQ(by_id.batch_index(), 0u);
  EXPECT_EQ(by_id.cache_id(), 42);
}

TEST(CacheKeys, ByIdBatchIndexMustBeUint32) {
  EXPECT_TRUE(Raises<ValueError>([] { CacheKeyByIdAndIndex(1, 2, -1); }, "batch_index"));
  EXPECT_TRUE(Raises<ValueError>([] { CacheKeyByIdAndIndex(1, 2, 4294967296); }, "batch_index"));
}

TEST(TransferConfigTest, DefaultsAndSetters) {
  TransferConfig config(9, {1, 2});
  EXPECT_EQ(config.dst_cluster_id(), 9u);
  EXPECT_FALSE(config.src_layer_range().has_value());
  EXPECT_FALSE(config.dst_layer_range().has_value());
  EXPECT_EQ(config.src_batch_index(), 0u);
  config.set_src_layer_range(LayerRange{1, 2});
  EXPECT_EQ(config.src_layer_range(), (LayerRange{1, 2}));
  config.set_src_batch_index(3);
  EXPECT_EQ(config.src_batch_index(), 3u);
}

TEST(TransferConfigTest, SrcLayerRangeMustBeStepOneAndNonEmpty) {
  EXPECT_TRUE(RaisesParamInvalid(
      [] {
        TransferConfig(1, {}, LayerRange{0, 4, 2});
      },
      "src_layer_range", "step"));
  EXPECT_TRUE(RaisesParamInvalid(
      [] {
        TransferConfig(1, {}, LayerRange{3, 3});
      },
      "src_layer_range"));
  EXPECT_TRUE(RaisesParamInvalid(
      [] {
        TransferConfig(1, {}, LayerRange{-2, 3});
      },
      "src_layer_range"));
  TransferConfig config(1, {});
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        config.set_src_layer_range(LayerRange{5, 1});
      },
      "src_layer_range"));
}

TEST(TransferConfigTest, SrcBatchIndexMustBeUint32) {
  EXPECT_TRUE(
      Raises<ValueError>([] { TransferConfig(1, {}, std::nullopt, -1); }, "src_batch_index"));
  TransferConfig config(1, {});
  EXPECT_TRUE(
      Raises<ValueError>([&] { config.set_src_batch_index(4294967296); }, "src_batch_index"));
}

TEST(TransferWithCacheKeyConfigTest, RangesAreRequired) {
  EXPECT_TRUE(Raises<TypeError>(
      [] {
        TransferWithCacheKeyConfig(BlocksCacheKey{1}, std::nullopt, LayerRange{0, 2});
      },
      "src_layer_range"));
  EXPECT_TRUE(Raises<TypeError>(
      [] {
        TransferWithCacheKeyConfig(BlocksCacheKey{1}, LayerRange{0, 2}, std::nullopt);
      },
      "dst_layer_range"));
}

TEST(TransferWithCacheKeyConfigTest, RangesNeedEqualLengths) {
  EXPECT_TRUE(RaisesParamInvalid(
      [] {
        TransferWithCacheKeyConfig(BlocksCacheKey{1}, LayerRange{0, 2}, LayerRange{4, 7});
      },
      "dst_layer_range", "differs"));
  EXPECT_NO_THROW(
      TransferWithCacheKeyConfig(BlocksCacheKey{1}, LayerRange{0, 3}, LayerRange{4, 7}));
}

TEST(TransferWithCacheKeyConfigTest, BlocksKeyNeedsBatchZero) {
  EXPECT_TRUE(RaisesParamInvalid(
      [] {
        TransferWithCacheKeyConfig(BlocksCacheKey{1}, LayerRange{0, 2}, LayerRange{0, 2}, 1);
      },
      "src_batch_index", "BlocksCacheKey"));
  EXPECT_TRUE(Raises<ValueError>(
      [] {
        TransferWithCacheKeyConfig(CacheKeyByIdAndIndex(1, 2), LayerRange{0, 2}, LayerRange{0, 2},
                                   -1);
      },
      "src_batch_index"));
  const TransferWithCacheKeyConfig by_id(CacheKeyByIdAndIndex(5, 2), LayerRange{0, 2},
                                         LayerRange{0, 2}, 3);
  EXPECT_EQ(by_id.src_batch_index(), 3u);
}

TEST(TransferWithCacheKeyConfigTest, DstClusterIdIsTheKeysAtConstruction) {
  TransferWithCacheKeyConfig config(BlocksCacheKey{17, 2}, LayerRange{0, 2}, LayerRange{0, 2});
  EXPECT_EQ(config.dst_cluster_id(), 17u);
  config.set_cache_key(BlocksCacheKey{18});
  EXPECT_EQ(config.dst_cluster_id(), 17u);
  EXPECT_EQ(cluster_id_of(config.cache_key()), 18u);
  const AnyTransferConfig any = config;
  EXPECT_EQ(type_name(any), "TransferWithCacheKeyConfig");
  EXPECT_EQ(dst_cluster_id_of(any), 17u);
}

TEST(IpConversion, StringsBecomeLittleEndianInts) {
  EXPECT_EQ(ip_to_int("1.2.3.4"), 0x04030201u);
  EXPECT_EQ(ip_to_int("192.168.1.10"), 0x0A01A8C0u);
  EXPECT_EQ(ip_to_int("127.1"), 0x0100007Fu);  // inet_aton shorthand, as Python accepts
  EXPECT_EQ(int_to_ip(0x0A01A8C0u), "192.168.1.10");
  EXPECT_EQ(int_to_ip(ip_to_int("10.0.255.7")), "10.0.255.7");
}

TEST(IpConversion, UnparsableIpIsRuntimeError) {
  EXPECT_TRUE(Raises<RuntimeError>([] { ip_to_int("300.1.1.1"); }, "ip", "Can not parse ip"));
  EXPECT_TRUE(Raises<RuntimeError>([] { ip_to_int("host.example"); }, "ip"));
}

TEST(ClusterInfo, CollectsIpInfo) {
  LLMClusterInfo info;
  EXPECT_FALSE(info.remote_cluster_id().has_value());
  info.set_remote_cluster_id(2);
  info.set_remote_role_type(LLMRole::DECODER);
  info.append_local_ip_info("1.2.3.4", 26000);
  info.append_remote_ip_info(0x0100007Fu, 26001);
  EXPECT_EQ(info.remote_cluster_id(), 2u);
  EXPECT_EQ(info.remote_role_type(), LLMRole::DECODER);
  ASSERT_EQ(info.local_ip_info_list().size(), 1u);
  EXPECT_EQ(info.local_ip_info_list()[0], (IpInfo{0x04030201u, 26000}));
  EXPECT_EQ(info.remote_ip_info_list()[0], (IpInfo{0x0100007Fu, 26001}));
}

TEST(ClusterInfo, PortMustBeUint16AndIpParsable) {
  LLMClusterInfo info;
  EXPECT_TRUE(Raises<ValueError>([&] { info.append_local_ip_info("1.2.3.4", 65536); }, "port"));
  EXPECT_TRUE(Raises<ValueError>([&] { info.append_remote_ip_info(1u, -1); }, "port"));
  EXPECT_TRUE(Raises<RuntimeError>([&] { info.append_remote_ip_info("1.2.3.400", 80); }, "ip"));
  EXPECT_TRUE(Raises<TypeError>([&] { info.set_remote_role_type(static_cast<LLMRole>(9)); },
                                "remote_role_type"));
  EXPECT_TRUE(info.local_ip_info_list().empty());
  EXPECT_TRUE(info.remote_ip_info_list().empty());
}

}  // namespace
}  // namespace kvsim::impl
