// The public C++ headers declare the real interface: status and ACL values, DataType numbers,
// enum types, struct layouts and defaults, member signatures and default arguments, and
// AscendString's behaviour (spec/llm_datadist_cpp.md §2–§5); AscendString comes from
// libllm_datadist.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "acl/acl.h"
#include "graph/ascend_string.h"
#include "graph/types.h"
#include "llm_datadist/llm_datadist.h"
#include "llm_datadist/llm_engine_types.h"
#include "llm_datadist/llm_error_codes.h"

namespace {

namespace ld = llm_datadist;
using ge::AscendString;

// ---------------------------------------------------------------------------------------------
// Status codes

static_assert(std::is_same<ge::Status, uint32_t>::value, "ge::Status is uint32_t");
static_assert(std::is_same<ld::Status, ge::Status>::value, "llm_datadist::Status is ge::Status");
static_assert(std::is_same<decltype(ld::LLM_SUCCESS), const ld::Status>::value, "constexpr Status");
static_assert(std::is_same<decltype(ge::LLM_PARAM_INVALID), const ge::Status>::value, "");

static_assert(ge::SUCCESS == 0U, "");
static_assert(ge::FAILED == 0xFFFFFFFFU, "");
static_assert(ge::END_OF_SEQUENCE == 0x50100007U, "");

static_assert(ld::LLM_SUCCESS == 0x0U, "");
static_assert(ld::LLM_FAILED == 0xFFFFFFFFU, "");
static_assert(ld::LLM_WAIT_PROC_TIMEOUT == 0x5010B001U, "");
static_assert(ld::LLM_KV_CACHE_NOT_EXIST == 0x5010B002U, "");
static_assert(ld::LLM_PARAM_INVALID == 0x5010B005U, "");
static_assert(ld::LLM_NOT_YET_LINK == 0x5010B007U, "");
static_assert(ld::LLM_ALREADY_LINK == 0x5010B008U, "");
static_assert(ld::LLM_LINK_FAILED == 0x5010B009U, "");
static_assert(ld::LLM_UNLINK_FAILED == 0x5010B00AU, "");
static_assert(ld::LLM_NOTIFY_PROMPT_UNLINK_FAILED == 0x5010B00BU, "");
static_assert(ld::LLM_CLUSTER_NUM_EXCEED_LIMIT == 0x5010B00CU, "");
static_assert(ld::LLM_PROCESSING_LINK == 0x5010B00DU, "");
static_assert(ld::LLM_DEVICE_OUT_OF_MEMORY == 0x5010B00EU, "");
static_assert(ld::LLM_EXIST_LINK == 0x5010B018U, "");
static_assert(ld::LLM_FEATURE_NOT_ENABLED == 0x5010B019U, "");
static_assert(ld::LLM_TIMEOUT == 0x5010B01AU, "");
static_assert(ld::LLM_LINK_BUSY == 0x5010B01BU, "");
static_assert(ld::LLM_OUT_OF_MEMORY == 0x5010B01CU, "");

// ge:: numbers are 0x5010B000 | n, n = 1..28, and agree with llm_datadist:: where both exist.
constexpr ge::Status kLlmBase = 0x5010B000U;
static_assert(ge::LLM_WAIT_PROC_TIMEOUT == kLlmBase + 1, "");
static_assert(ge::LLM_KV_CACHE_NOT_EXIST == kLlmBase + 2, "");
static_assert(ge::LLM_REPEAT_REQUEST == kLlmBase + 3, "");
static_assert(ge::LLM_REQUEST_ALREADY_COMPLETED == kLlmBase + 4, "");
static_assert(ge::LLM_PARAM_INVALID == kLlmBase + 5, "");
static_assert(ge::LLM_ENGINE_FINALIZED == kLlmBase + 6, "");
static_assert(ge::LLM_NOT_YET_LINK == kLlmBase + 7, "");
static_assert(ge::LLM_ALREADY_LINK == kLlmBase + 8, "");
static_assert(ge::LLM_LINK_FAILED == kLlmBase + 9, "");
static_assert(ge::LLM_UNLINK_FAILED == kLlmBase + 10, "");
static_assert(ge::LLM_NOTIFY_PROMPT_UNLINK_FAILED == kLlmBase + 11, "");
static_assert(ge::LLM_CLUSTER_NUM_EXCEED_LIMIT == kLlmBase + 12, "");
static_assert(ge::LLM_PROCESSING_LINK == kLlmBase + 13, "");
static_assert(ge::LLM_DEVICE_OUT_OF_MEMORY == kLlmBase + 14, "");
static_assert(ge::LLM_PREFIX_ALREADY_EXIST == kLlmBase + 15, "");
static_assert(ge::LLM_PREFIX_NOT_EXIST == kLlmBase + 16, "");
static_assert(ge::LLM_SEQ_LEN_OVER_LIMIT == kLlmBase + 17, "");
static_assert(ge::LLM_NO_FREE_BLOCK == kLlmBase + 18, "");
static_assert(ge::LLM_BLOCKS_OUT_OF_MEMORY == kLlmBase + 19, "");
static_assert(ge::LLM_CACHE_INCOMPATIBLE == kLlmBase + 20, "");
static_assert(ge::LLM_CACHE_KEY_ALREADY_EXIST == kLlmBase + 21, "");
static_assert(ge::LLM_COPY_CACHE_FAILED == kLlmBase + 22, "");
static_assert(ge::LLM_CACHE_ID_ALREADY_EXIST == kLlmBase + 23, "");
static_assert(ge::LLM_EXIST_LINK == kLlmBase + 24, "");
static_assert(ge::LLM_FEATURE_NOT_ENABLED == kLlmBase + 25, "");
static_assert(ge::LLM_TIMEOUT == kLlmBase + 26, "");
static_assert(ge::LLM_LINK_BUSY == kLlmBase + 27, "");
static_assert(ge::LLM_OUT_OF_MEMORY == kLlmBase + 28, "");
static_assert(ge::LLM_PARAM_INVALID == ld::LLM_PARAM_INVALID, "");
static_assert(ge::LLM_TIMEOUT == ld::LLM_TIMEOUT, "");

// GE_ERRORNO_DEFINE composes the fields as metadef does, masking each one.
GE_ERRORNO_DEFINE(1, 1, 0, 8, 11, kComposed, 0x19);
GE_ERRORNO_DEFINE(0x103, 0, 0, 0, 0, kRuntimeMasked, 0x1001);
static_assert(kComposed == 0x5010B019U, "");
static_assert(kRuntimeMasked == ((3U << 30) | 1U), "fields masked to 8 bits, value to 12");

#ifndef LLM_ERROR_CODES
#error "llm_error_codes.h defines the LLM_ERROR_CODES guard"
#endif

TEST(HeaderCompat, StatusFactoryDescribesSuccessAndFailed) {
  EXPECT_EQ(ge::StatusFactory::Instance()->GetErrDesc(ge::SUCCESS), "success");
  EXPECT_EQ(ge::StatusFactory::Instance()->GetErrDesc(ge::FAILED), "failed");
  EXPECT_EQ(ge::StatusFactory::Instance()->GetErrDesc(ge::LLM_TIMEOUT), "");
  EXPECT_STREQ(ge::StatusFactory::Instance()->GetErrDescV2(ge::FAILED).GetString(), "failed");
  ge::StatusFactory::Instance()->RegisterErrorNo(ge::LLM_TIMEOUT, "first");
  ge::StatusFactory::Instance()->RegisterErrorNo(ge::LLM_TIMEOUT, std::string("second"));
  ge::StatusFactory::Instance()->RegisterErrorNo(ge::LLM_EXIST_LINK, static_cast<char*>(nullptr));
  EXPECT_EQ(ge::StatusFactory::Instance()->GetErrDesc(ge::LLM_TIMEOUT), "first");
  EXPECT_EQ(ge::StatusFactory::Instance()->GetErrDesc(ge::LLM_EXIST_LINK), "");
}

// ---------------------------------------------------------------------------------------------
// Data types

static_assert(ge::DT_FLOAT == 0 && ge::DT_FLOAT16 == 1 && ge::DT_INT8 == 2 && ge::DT_INT32 == 3,
              "");
static_assert(ge::DT_UINT8 == 4 && ge::DT_INT16 == 6 && ge::DT_UINT16 == 7 && ge::DT_UINT32 == 8,
              "");
static_assert(ge::DT_INT64 == 9 && ge::DT_UINT64 == 10 && ge::DT_DOUBLE == 11 && ge::DT_BOOL == 12,
              "");
static_assert(ge::DT_STRING == 13 && ge::DT_DUAL_SUB_INT8 == 14 && ge::DT_DUAL_SUB_UINT8 == 15, "");
static_assert(ge::DT_COMPLEX64 == 16 && ge::DT_COMPLEX128 == 17 && ge::DT_QINT8 == 18, "");
static_assert(ge::DT_QINT16 == 19 && ge::DT_QINT32 == 20 && ge::DT_QUINT8 == 21, "");
static_assert(ge::DT_QUINT16 == 22 && ge::DT_RESOURCE == 23 && ge::DT_STRING_REF == 24, "");
static_assert(ge::DT_DUAL == 25 && ge::DT_VARIANT == 26 && ge::DT_BF16 == 27, "");
static_assert(ge::DT_UNDEFINED == 28 && ge::DT_INT4 == 29 && ge::DT_UINT1 == 30, "");
static_assert(ge::DT_INT2 == 31 && ge::DT_UINT2 == 32 && ge::DT_COMPLEX32 == 33, "");
static_assert(ge::DT_HIFLOAT8 == 34 && ge::DT_FLOAT8_E5M2 == 35 && ge::DT_FLOAT8_E4M3FN == 36, "");
static_assert(ge::DT_FLOAT8_E8M0 == 37 && ge::DT_FLOAT6_E3M2 == 38 && ge::DT_FLOAT6_E2M3 == 39, "");
static_assert(ge::DT_FLOAT4_E2M1 == 40 && ge::DT_FLOAT4_E1M2 == 41 && ge::DT_HIFLOAT4 == 42, "");
static_assert(ge::DT_MAX == 43, "");
static_assert(static_cast<int>(ge::DT_BF16) == static_cast<int>(C_DT_BF16), "");
static_assert(static_cast<int>(ge::DT_MAX) == static_cast<int>(C_DT_MAX), "");

// Unscoped (converts to int), with no fixed underlying type; llm_datadist names the same type.
static_assert(std::is_enum<ge::DataType>::value, "");
static_assert(std::is_convertible<ge::DataType, int>::value, "DataType is an unscoped enum");
static_assert(std::is_same<ld::DataType, ge::DataType>::value, "");
static_assert(sizeof(ge::DataType) == 4, "");

// `using ge::DT_*` in llm_datadist: the same enumerators, DT_HIFLOAT4 and DT_MAX left out.
static_assert(ld::DT_INT32 == ge::DT_INT32 && ld::DT_UNDEFINED == ge::DT_UNDEFINED, "");
static_assert(ld::DT_FLOAT4_E1M2 == ge::DT_FLOAT4_E1M2 && ld::DT_HIFLOAT8 == ge::DT_HIFLOAT8, "");

TEST(HeaderCompat, SizeByDataType) {
  EXPECT_EQ(ge::GetSizeByDataType(ge::DT_FLOAT), 4);
  EXPECT_EQ(ge::GetSizeByDataType(ge::DT_FLOAT16), 2);
  EXPECT_EQ(ge::GetSizeByDataType(ge::DT_BF16), 2);
  EXPECT_EQ(ge::GetSizeByDataType(ge::DT_INT8), 1);
  EXPECT_EQ(ge::GetSizeByDataType(ge::DT_INT64), 8);
  EXPECT_EQ(ge::GetSizeByDataType(ge::DT_COMPLEX128), 16);
  EXPECT_EQ(ge::GetSizeByDataType(ge::DT_DUAL), 5);
  EXPECT_EQ(ge::GetSizeByDataType(ge::DT_STRING), -1);
  EXPECT_EQ(ge::GetSizeByDataType(ge::DT_UNDEFINED), -1);
  EXPECT_EQ(ge::GetSizeByDataType(static_cast<ge::DataType>(5)), -1);
  EXPECT_EQ(ge::GetSizeByDataType(ge::DT_MAX), -1);
  EXPECT_EQ(ge::GetSizeByDataType(ge::DT_INT4), ge::kDataTypeSizeBitOffset + 4);
  EXPECT_EQ(ge::GetSizeByDataType(ge::DT_UINT1), 1001);
  EXPECT_EQ(ge::GetSizeByDataType(ge::DT_FLOAT6_E2M3), 1006);
  EXPECT_EQ(ge::GetSizeByDataType(ge::DT_HIFLOAT4), 1004);
}

// ---------------------------------------------------------------------------------------------
// Enums of llm_datadist

static_assert(std::is_same<std::underlying_type<ld::LlmRole>::type, int32_t>::value, "");
static_assert(!std::is_convertible<ld::LlmRole, int>::value, "LlmRole is an enum class");
static_assert(static_cast<int32_t>(ld::LlmRole::kPrompt) == 1, "");
static_assert(static_cast<int32_t>(ld::LlmRole::kDecoder) == 2, "");
static_assert(static_cast<int32_t>(ld::LlmRole::kMix) == 3, "");
static_assert(static_cast<int32_t>(ld::LlmRole::kEnd) == 4, "");

static_assert(std::is_same<std::underlying_type<ld::CachePlacement>::type, uint32_t>::value, "");
static_assert(!std::is_convertible<ld::CachePlacement, unsigned>::value, "enum class");
static_assert(static_cast<uint32_t>(ld::CachePlacement::kHost) == 0U, "");
static_assert(static_cast<uint32_t>(ld::CachePlacement::kDevice) == 1U, "");

// ---------------------------------------------------------------------------------------------
// Option keys

static_assert(std::is_same<decltype(ld::OPTION_DEVICE_ID), const char[13]>::value, "char array");

TEST(HeaderCompat, OptionKeys) {
  EXPECT_STREQ(ld::OPTION_LISTEN_IP_INFO, "llm.ListenIpInfo");
  EXPECT_STREQ(ld::OPTION_DEVICE_ID, "llm.DeviceId");
  EXPECT_STREQ(ld::OPTION_SYNC_CACHE_WAIT_TIME, "llm.SyncKvCacheWaitTime");
  EXPECT_STREQ(ld::OPTION_BUF_POOL_CFG, "llm.BufPoolCfg");
  EXPECT_STREQ(ld::OPTION_ENABLE_SET_ROLE, "llm.EnableSwitchRole");
  EXPECT_STREQ(ld::OPTION_LOCAL_COMM_RES, "llm.LocalCommRes");
  EXPECT_STREQ(ld::OPTION_TRANSFER_BACKEND, "llm.TransferBackend");
  EXPECT_STREQ(ld::OPTION_GLOBAL_RESOURCE_CONFIG, "llm.GlobalResourceConfig");

  EXPECT_STREQ(llm::kPrompt, "Prompt");
  EXPECT_STREQ(llm::kDecoder, "Decoder");
  EXPECT_STREQ(llm::LLM_OPTION_CLUSTER_INFO, "llm.ClusterInfo");
  EXPECT_STREQ(llm::LLM_OPTION_ROLE, "llm.Role");
  EXPECT_STREQ(llm::LLM_OPTION_SYNC_KV_CACHE_WAIT_TIME, "llm.SyncKvCacheWaitTime");
  EXPECT_STREQ(llm::LLM_OPTION_OUTPUT_MAX_SIZE, "llm.OutputMaxSize");
  EXPECT_STREQ(llm::LLM_OPTION_ENABLE_SWITCH_ROLE, "llm.EnableSwitchRole");
  EXPECT_STREQ(llm::LLM_OPTION_BUF_POOL_CFG, "llm.BufPoolCfg");
}

// ---------------------------------------------------------------------------------------------
// Structs: aggregates, field types, field order, no extra fields.

static_assert(std::is_aggregate<ld::IpInfo>::value, "");
static_assert(std::is_aggregate<ld::ClusterInfo>::value, "");
static_assert(std::is_aggregate<ld::CacheIndex>::value, "");
static_assert(std::is_aggregate<ld::CacheDesc>::value, "");
static_assert(std::is_aggregate<ld::Cache>::value, "");
static_assert(std::is_aggregate<ld::KvCacheExtParam>::value, "");
static_assert(std::is_aggregate<ld::RegisterCfg>::value, "");

#define EXPECT_FIELD(S, field, Type) \
  static_assert(std::is_same<decltype(S::field), Type>::value, #S "::" #field " is " #Type)

EXPECT_FIELD(ld::IpInfo, ip, ge::AscendString);
EXPECT_FIELD(ld::IpInfo, port, uint16_t);
EXPECT_FIELD(ld::IpInfo, reserved, uint8_t[128]);
EXPECT_FIELD(ld::ClusterInfo, remote_cluster_id, uint64_t);
EXPECT_FIELD(ld::ClusterInfo, remote_role_type, int32_t);
EXPECT_FIELD(ld::ClusterInfo, local_ip_infos, std::vector<ld::IpInfo>);
EXPECT_FIELD(ld::ClusterInfo, remote_ip_infos, std::vector<ld::IpInfo>);
EXPECT_FIELD(ld::ClusterInfo, reserved, uint8_t[128]);
EXPECT_FIELD(ld::CacheIndex, cluster_id, uint64_t);
EXPECT_FIELD(ld::CacheIndex, cache_id, int64_t);
EXPECT_FIELD(ld::CacheIndex, batch_index, uint32_t);
EXPECT_FIELD(ld::CacheIndex, reserved, uint8_t[128]);
EXPECT_FIELD(ld::CacheDesc, placement, ld::CachePlacement);
EXPECT_FIELD(ld::CacheDesc, num_tensors, uint32_t);
EXPECT_FIELD(ld::CacheDesc, data_type, ge::DataType);
EXPECT_FIELD(ld::CacheDesc, shape, std::vector<int64_t>);
EXPECT_FIELD(ld::CacheDesc, reserved, uint8_t[128]);
EXPECT_FIELD(ld::Cache, cache_id, int64_t);
EXPECT_FIELD(ld::Cache, tensor_addrs, std::vector<uintptr_t>);
EXPECT_FIELD(ld::Cache, cache_desc, ld::CacheDesc);
EXPECT_FIELD(ld::Cache, reserved, uint8_t[128]);
using LayerRange = std::pair<int32_t, int32_t>;
EXPECT_FIELD(ld::KvCacheExtParam, src_layer_range, LayerRange);
EXPECT_FIELD(ld::KvCacheExtParam, dst_layer_range, LayerRange);
EXPECT_FIELD(ld::KvCacheExtParam, tensor_num_per_layer, uint8_t);
EXPECT_FIELD(ld::KvCacheExtParam, reserved, uint8_t[127]);
EXPECT_FIELD(ld::RegisterCfg, reserved, uint8_t[128]);

// The scalar-only structs are standard layout: their offsets are fixed by the field order.
static_assert(std::is_standard_layout<ld::CacheIndex>::value, "");
static_assert(std::is_trivial<ld::CacheIndex>::value, "CacheIndex has no defaults");
static_assert(offsetof(ld::CacheIndex, cluster_id) == 0, "");
static_assert(offsetof(ld::CacheIndex, cache_id) == 8, "");
static_assert(offsetof(ld::CacheIndex, batch_index) == 16, "");
static_assert(offsetof(ld::CacheIndex, reserved) == 20, "");
static_assert(sizeof(ld::CacheIndex) == 152, "");
static_assert(std::is_standard_layout<ld::KvCacheExtParam>::value, "");
static_assert(offsetof(ld::KvCacheExtParam, src_layer_range) == 0, "");
static_assert(offsetof(ld::KvCacheExtParam, dst_layer_range) == 8, "");
static_assert(offsetof(ld::KvCacheExtParam, tensor_num_per_layer) == 16, "");
static_assert(offsetof(ld::KvCacheExtParam, reserved) == 17, "");
static_assert(sizeof(ld::KvCacheExtParam) == 144, "");
static_assert(sizeof(ld::RegisterCfg) == 128, "");

// The others hold std::vector or AscendString: compare with reference structs declared here in
// the real field order (same size, alignment and member offsets means same order, no extras).
struct RefIpInfo {
  ge::AscendString ip;
  uint16_t port;
  uint8_t reserved[128];
};
struct RefClusterInfo {
  uint64_t remote_cluster_id;
  int32_t remote_role_type;
  std::vector<ld::IpInfo> local_ip_infos;
  std::vector<ld::IpInfo> remote_ip_infos;
  uint8_t reserved[128];
};
struct RefCacheDesc {
  ld::CachePlacement placement;
  uint32_t num_tensors;
  ge::DataType data_type;
  std::vector<int64_t> shape;
  uint8_t reserved[128];
};
struct RefCache {
  int64_t cache_id;
  std::vector<uintptr_t> tensor_addrs;
  ld::CacheDesc cache_desc;
  uint8_t reserved[128];
};
static_assert(sizeof(ld::IpInfo) == sizeof(RefIpInfo), "");
static_assert(sizeof(ld::ClusterInfo) == sizeof(RefClusterInfo), "");
static_assert(sizeof(ld::CacheDesc) == sizeof(RefCacheDesc), "");
static_assert(sizeof(ld::Cache) == sizeof(RefCache), "");
static_assert(alignof(ld::Cache) == alignof(RefCache), "");

template <typename S, typename M>
std::ptrdiff_t OffsetOf(const S& s, const M& member) {
  return reinterpret_cast<const char*>(&member) - reinterpret_cast<const char*>(&s);
}

TEST(HeaderCompat, FieldOffsetsMatchTheRealOrder) {
  const ld::IpInfo ip{};
  const RefIpInfo rip{};
  EXPECT_EQ(OffsetOf(ip, ip.ip), OffsetOf(rip, rip.ip));
  EXPECT_EQ(OffsetOf(ip, ip.port), OffsetOf(rip, rip.port));
  EXPECT_EQ(OffsetOf(ip, ip.reserved), OffsetOf(rip, rip.reserved));

  const ld::ClusterInfo ci{};
  const RefClusterInfo rci{};
  EXPECT_EQ(OffsetOf(ci, ci.remote_cluster_id), OffsetOf(rci, rci.remote_cluster_id));
  EXPECT_EQ(OffsetOf(ci, ci.remote_role_type), OffsetOf(rci, rci.remote_role_type));
  EXPECT_EQ(OffsetOf(ci, ci.local_ip_infos), OffsetOf(rci, rci.local_ip_infos));
  EXPECT_EQ(OffsetOf(ci, ci.remote_ip_infos), OffsetOf(rci, rci.remote_ip_infos));
  EXPECT_EQ(OffsetOf(ci, ci.reserved), OffsetOf(rci, rci.reserved));

  const ld::CacheDesc cd{};
  const RefCacheDesc rcd{};
  EXPECT_EQ(OffsetOf(cd, cd.placement), OffsetOf(rcd, rcd.placement));
  EXPECT_EQ(OffsetOf(cd, cd.num_tensors), OffsetOf(rcd, rcd.num_tensors));
  EXPECT_EQ(OffsetOf(cd, cd.data_type), OffsetOf(rcd, rcd.data_type));
  EXPECT_EQ(OffsetOf(cd, cd.shape), OffsetOf(rcd, rcd.shape));
  EXPECT_EQ(OffsetOf(cd, cd.reserved), OffsetOf(rcd, rcd.reserved));

  const ld::Cache c{};
  const RefCache rc{};
  EXPECT_EQ(OffsetOf(c, c.cache_id), OffsetOf(rc, rc.cache_id));
  EXPECT_EQ(OffsetOf(c, c.tensor_addrs), OffsetOf(rc, rc.tensor_addrs));
  EXPECT_EQ(OffsetOf(c, c.cache_desc), OffsetOf(rc, rc.cache_desc));
  EXPECT_EQ(OffsetOf(c, c.reserved), OffsetOf(rc, rc.reserved));
}

// ---------------------------------------------------------------------------------------------
// Aggregate initialisation in the shapes programs use, and the defaults.

// `CacheIndex{c, id, b}` leaves `reserved` to value-initialisation; -Wextra flags that on the
// real struct as on ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
constexpr ld::CacheIndex kIndex{1, 2, 0};
constexpr ld::CacheIndex kIndexTwoFields{7, 3};
#pragma GCC diagnostic pop
static_assert(kIndex.cluster_id == 1 && kIndex.cache_id == 2 && kIndex.batch_index == 0, "");
static_assert(kIndexTwoFields.batch_index == 0 && kIndexTwoFields.reserved[127] == 0, "");

constexpr ld::KvCacheExtParam kDefaultExt{};
static_assert(kDefaultExt.src_layer_range.first == -1 && kDefaultExt.src_layer_range.second == -1,
              "");
static_assert(kDefaultExt.dst_layer_range.first == -1 && kDefaultExt.dst_layer_range.second == -1,
              "");
static_assert(kDefaultExt.tensor_num_per_layer == 2, "");
static_assert(ld::kDefaultTensorNumPerLayer == 2U, "");
static_assert(std::is_same<decltype(ld::kDefaultTensorNumPerLayer), const uint8_t>::value, "");

constexpr ld::RegisterCfg kCfg{};
static_assert(kCfg.reserved[0] == 0 && kCfg.reserved[127] == 0, "");

TEST(HeaderCompat, Defaults) {
  ld::KvCacheExtParam ext;  // default-initialised: the member initialisers still apply
  EXPECT_EQ(ext.src_layer_range, std::make_pair(-1, -1));
  EXPECT_EQ(ext.dst_layer_range, std::make_pair(-1, -1));
  EXPECT_EQ(ext.tensor_num_per_layer, 2);

  const ld::Cache cache{};
  EXPECT_EQ(cache.cache_id, -1);
  EXPECT_TRUE(cache.tensor_addrs.empty());
  EXPECT_EQ(cache.cache_desc.placement, ld::CachePlacement::kDevice);

  const ld::CacheDesc desc{};
  EXPECT_EQ(desc.placement, ld::CachePlacement::kDevice);
  EXPECT_EQ(desc.num_tensors, 0U);
  EXPECT_EQ(desc.data_type, ge::DT_UNDEFINED);
  EXPECT_TRUE(desc.shape.empty());

  const ld::IpInfo ip{};
  EXPECT_EQ(ip.port, 0);
  EXPECT_EQ(ip.ip, AscendString());

  const ld::ClusterInfo cluster{};
  EXPECT_EQ(cluster.remote_cluster_id, 0U);
  EXPECT_EQ(cluster.remote_role_type, 0);
  EXPECT_TRUE(cluster.local_ip_infos.empty());
  EXPECT_TRUE(cluster.remote_ip_infos.empty());

  const ld::RegisterCfg cfg;  // `= {0}` zeroes it even without braces
  for (uint8_t b : cfg.reserved) EXPECT_EQ(b, 0);

  // Designated-style field assignment after `{}` and brace assignment of ranges, as xLLM does.
  ld::KvCacheExtParam layer{};
  layer.src_layer_range = {0, 0};
  layer.dst_layer_range = std::pair<int32_t, int32_t>(3, 3);
  layer.tensor_num_per_layer = 1;
  EXPECT_EQ(layer.dst_layer_range.first, 3);
}

// ---------------------------------------------------------------------------------------------
// LlmDataDist: pimpl layout, copy rules, member signatures and default arguments.

static_assert(sizeof(ld::LlmDataDist) == sizeof(void*), "one unique_ptr, nothing else");
static_assert(!std::is_copy_constructible<ld::LlmDataDist>::value, "");
static_assert(!std::is_copy_assignable<ld::LlmDataDist>::value, "");
static_assert(!std::is_move_constructible<ld::LlmDataDist>::value, "no implicit move either");
static_assert(!std::is_default_constructible<ld::LlmDataDist>::value, "");
static_assert(std::is_constructible<ld::LlmDataDist, uint64_t, ld::LlmRole>::value, "");
static_assert(std::is_constructible<ld::LlmDataDist, uint16_t, ld::LlmRole>::value,
              "the samples pass a uint16_t cluster id");

using Options = std::map<AscendString, AscendString>;
using Blocks = std::vector<uint64_t>;
using ld::Cache;
using ld::CacheDesc;
using ld::CacheIndex;
using ld::ClusterInfo;
using ld::KvCacheExtParam;
using ld::LlmDataDist;
using ld::LlmRole;
using ld::RegisterCfg;
using ld::Status;

#define EXPECT_MEMBER(name, Type) \
  static_assert(std::is_same<decltype(&LlmDataDist::name), Type>::value, #name " signature")

EXPECT_MEMBER(Initialize, Status (LlmDataDist::*)(const Options&));
EXPECT_MEMBER(Finalize, void (LlmDataDist::*)());
EXPECT_MEMBER(SetRole, Status (LlmDataDist::*)(LlmRole, const Options&));
EXPECT_MEMBER(LinkLlmClusters, Status (LlmDataDist::*)(const std::vector<ClusterInfo>&,
                                                       std::vector<Status>&, int32_t));
EXPECT_MEMBER(UnlinkLlmClusters, Status (LlmDataDist::*)(const std::vector<ClusterInfo>&,
                                                         std::vector<Status>&, int32_t, bool));
EXPECT_MEMBER(AllocateCache, Status (LlmDataDist::*)(const CacheDesc&, Cache&));
EXPECT_MEMBER(DeallocateCache, Status (LlmDataDist::*)(int64_t));
EXPECT_MEMBER(PullKvCache, Status (LlmDataDist::*)(const CacheIndex&, const Cache&, uint32_t,
                                                   int64_t, const KvCacheExtParam&));
EXPECT_MEMBER(PullKvBlocks, Status (LlmDataDist::*)(const CacheIndex&, const Cache&, const Blocks&,
                                                    const Blocks&, const KvCacheExtParam&));
EXPECT_MEMBER(CopyKvCache, Status (LlmDataDist::*)(const Cache&, const Cache&, uint32_t, uint32_t,
                                                   uint64_t, int64_t));
EXPECT_MEMBER(CopyKvBlocks, Status (LlmDataDist::*)(const Cache&, const Cache&, const Blocks&,
                                                    const std::vector<Blocks>&));
EXPECT_MEMBER(PushKvCache, Status (LlmDataDist::*)(const Cache&, const CacheIndex&, uint32_t,
                                                   int64_t, const KvCacheExtParam&));
EXPECT_MEMBER(PushKvBlocks, Status (LlmDataDist::*)(const Cache&, const CacheIndex&, const Blocks&,
                                                    const Blocks&, const KvCacheExtParam&));
EXPECT_MEMBER(RegisterKvCache, Status (LlmDataDist::*)(const CacheDesc&, const Blocks&,
                                                       const RegisterCfg&, int64_t&));
EXPECT_MEMBER(UnregisterKvCache, Status (LlmDataDist::*)(int64_t));

// Which argument counts a call accepts: the trailing defaulted parameters may be left out,
// the others may not. Checked in unevaluated context, so nothing is called or linked.
template <typename... A>
struct Args {};

#define CALL_PROBE(Name, member)                                                          \
  template <typename Tuple, typename = void>                                              \
  struct Name : std::false_type {};                                                       \
  template <typename... A>                                                                \
  struct Name<Args<A...>,                                                                 \
              decltype(void(std::declval<LlmDataDist&>().member(std::declval<A>()...)))>  \
      : std::is_same<decltype(std::declval<LlmDataDist&>().member(std::declval<A>()...)), \
                     Status> {}

CALL_PROBE(CanSetRole, SetRole);
CALL_PROBE(CanLink, LinkLlmClusters);
CALL_PROBE(CanUnlink, UnlinkLlmClusters);
CALL_PROBE(CanPullCache, PullKvCache);
CALL_PROBE(CanPullBlocks, PullKvBlocks);
CALL_PROBE(CanCopyCache, CopyKvCache);
CALL_PROBE(CanPushCache, PushKvCache);
CALL_PROBE(CanPushBlocks, PushKvBlocks);
CALL_PROBE(CanRegister, RegisterKvCache);

using Clusters = const std::vector<ClusterInfo>&;
using Rets = std::vector<Status>&;
using Idx = const CacheIndex&;
using C = const Cache&;
using B = const Blocks&;
using Ext = const KvCacheExtParam&;

static_assert(CanSetRole<Args<LlmRole>>::value, "SetRole(role) uses the default options");
static_assert(CanSetRole<Args<LlmRole, Options>>::value, "");
static_assert(!CanSetRole<Args<>>::value, "");

static_assert(CanLink<Args<Clusters, Rets>>::value, "timeout defaults");
static_assert(CanLink<Args<Clusters, Rets, int32_t>>::value, "");
static_assert(!CanLink<Args<Clusters>>::value, "rets has no default");

static_assert(CanUnlink<Args<Clusters, Rets>>::value, "timeout and force_flag default");
static_assert(CanUnlink<Args<Clusters, Rets, int32_t>>::value, "force_flag defaults");
static_assert(CanUnlink<Args<Clusters, Rets, int32_t, bool>>::value, "");
static_assert(!CanUnlink<Args<Clusters>>::value, "");

static_assert(CanPullCache<Args<Idx, C>>::value, "batch_index, size, ext default");
static_assert(CanPullCache<Args<Idx, C, uint32_t>>::value, "");
static_assert(CanPullCache<Args<Idx, C, uint32_t, int64_t>>::value, "");
static_assert(CanPullCache<Args<Idx, C, uint32_t, int64_t, Ext>>::value, "");
static_assert(!CanPullCache<Args<Idx>>::value, "");

static_assert(CanPullBlocks<Args<Idx, C, B, B>>::value, "ext defaults");
static_assert(CanPullBlocks<Args<Idx, C, B, B, Ext>>::value, "");
static_assert(!CanPullBlocks<Args<Idx, C, B>>::value, "");

static_assert(CanCopyCache<Args<C, C>>::value, "all four trailing parameters default");
static_assert(CanCopyCache<Args<C, C, uint32_t, uint32_t, uint64_t>>::value, "");
static_assert(CanCopyCache<Args<C, C, uint32_t, uint32_t, uint64_t, int64_t>>::value, "");
static_assert(!CanCopyCache<Args<C>>::value, "");

static_assert(CanPushCache<Args<C, Idx>>::value, "src_batch_index, size, ext default");
static_assert(CanPushCache<Args<C, Idx, uint32_t, int64_t, Ext>>::value, "");
static_assert(!CanPushCache<Args<C>>::value, "");

static_assert(CanPushBlocks<Args<C, Idx, B, B>>::value, "ext defaults");
static_assert(CanPushBlocks<Args<C, Idx, B, B, Ext>>::value, "");
static_assert(!CanPushBlocks<Args<C, Idx, B>>::value, "");

static_assert(CanRegister<Args<const CacheDesc&, B, const RegisterCfg&, int64_t&>>::value, "");
static_assert(!CanRegister<Args<const CacheDesc&, B, int64_t&>>::value, "cfg has no default");

// The calls as programs write them, `{}` arguments included; compiled, never run.
[[maybe_unused]] auto kCallsWithDefaults = [](LlmDataDist& dist) {
  std::vector<Status> rets;
  const std::vector<ClusterInfo> clusters;
  Cache cache{};
  CacheIndex index = {};
  int64_t id = -1;
  Status s = dist.SetRole(LlmRole::kDecoder);
  s |= dist.SetRole(LlmRole::kPrompt, {{ld::OPTION_LISTEN_IP_INFO, "10.0.0.1:26000"}});
  s |= dist.LinkLlmClusters(clusters, rets);
  s |= dist.UnlinkLlmClusters(clusters, rets, 1000, true);
  s |= dist.PullKvCache(index, cache);
  s |= dist.PullKvBlocks(index, cache, {1, 2}, {3, 4});
  s |= dist.PushKvCache(cache, index, 0U, -1, {});
  s |= dist.PushKvBlocks(cache, index, {1}, {2}, {});
  s |= dist.CopyKvCache(cache, cache);
  s |= dist.CopyKvBlocks(cache, cache, {1}, {{2}, {3}});
  s |= dist.RegisterKvCache(CacheDesc{}, {0x1000}, {}, id);
  return s;
};

// ---------------------------------------------------------------------------------------------
// AscendString

static_assert(std::is_convertible<const char*, AscendString>::value, "implicit from const char*");
static_assert(std::is_constructible<AscendString, const char*, size_t>::value, "");
static_assert(std::is_same<decltype(AscendString().GetString()), const char*>::value, "");
static_assert(std::is_same<decltype(AscendString().GetLength()), size_t>::value, "");
static_assert(std::is_same<decltype(AscendString().Hash()), size_t>::value, "");
static_assert(std::is_same<decltype(AscendString().Find(AscendString())), size_t>::value, "");

TEST(AscendString, ReadsItsCharacters) {
  const AscendString s("llm.DeviceId");
  EXPECT_STREQ(s.GetString(), "llm.DeviceId");
  EXPECT_EQ(s.GetLength(), 12U);

  const AscendString prefix("llm.DeviceId", 3);
  EXPECT_STREQ(prefix.GetString(), "llm");
  EXPECT_EQ(prefix.GetLength(), 3U);

  const AscendString with_nul("a\0b", 3);
  EXPECT_EQ(with_nul.GetLength(), 3U);
  EXPECT_EQ(std::memcmp(with_nul.GetString(), "a\0b", 4), 0);
}

TEST(AscendString, NullIsEmptyButNotEqualToEmpty) {
  const AscendString null;
  const AscendString from_nullptr(static_cast<const char*>(nullptr));
  const AscendString from_nullptr_len(nullptr, 4);
  const AscendString empty("");
  EXPECT_STREQ(null.GetString(), "");
  EXPECT_EQ(null.GetLength(), 0U);
  EXPECT_EQ(from_nullptr_len.GetLength(), 0U);
  EXPECT_TRUE(null == from_nullptr);
  EXPECT_TRUE(null == from_nullptr_len);
  EXPECT_FALSE(null == empty);
  EXPECT_TRUE(null != empty);
  EXPECT_TRUE(null == static_cast<const char*>(nullptr));
  EXPECT_FALSE(null == "");
  EXPECT_TRUE(null != "");
  EXPECT_FALSE(empty == static_cast<const char*>(nullptr));
  EXPECT_TRUE(empty == "");
}

TEST(AscendString, OrdersNullFirstThenByCharacters) {
  const AscendString null;
  const AscendString empty("");
  const AscendString a("a");
  const AscendString b("b");
  EXPECT_TRUE(null < empty);
  EXPECT_TRUE(null <= empty);
  EXPECT_FALSE(null > empty);
  EXPECT_FALSE(null >= empty);
  EXPECT_TRUE(empty > null);
  EXPECT_TRUE(empty >= null);
  EXPECT_FALSE(null < null);
  EXPECT_TRUE(null <= null);
  EXPECT_TRUE(null >= null);
  EXPECT_TRUE(empty < a);
  EXPECT_TRUE(a < b);
  EXPECT_TRUE(b > a);
  EXPECT_TRUE(a <= a);
  EXPECT_TRUE(a >= a);
  EXPECT_TRUE(a == AscendString("a"));
  EXPECT_TRUE(a != b);
  EXPECT_TRUE(AscendString("\xff") > AscendString("a")) << "compared as std::string does";
}

TEST(AscendString, ComparesWithCStringsUpToTheFirstNul) {
  const AscendString a("abc");
  EXPECT_TRUE(a == "abc");
  EXPECT_FALSE(a != "abc");
  EXPECT_TRUE(a != "abd");
  EXPECT_TRUE(AscendString("ab\0x", 4) == "ab");
}

TEST(AscendString, Finds) {
  const AscendString s("10.0.0.1:26000");
  EXPECT_EQ(s.Find(AscendString(":")), 8U);
  EXPECT_EQ(s.Find(AscendString("x")), std::string::npos);
  EXPECT_EQ(s.Find(AscendString()), std::string::npos);
  EXPECT_EQ(AscendString().Find(AscendString("")), std::string::npos);
  EXPECT_EQ(s.Find(AscendString("")), 0U);
}

TEST(AscendString, HashesAsStdString) {
  EXPECT_EQ(AscendString("abc").Hash(), std::hash<std::string>{}("abc"));
  EXPECT_EQ(AscendString().Hash(), std::hash<std::string>{}(""));
  EXPECT_EQ(std::hash<AscendString>{}(AscendString("k")), std::hash<std::string>{}("k"));
  std::unordered_map<AscendString, int> by_name;
  by_name["a"] = 1;
  by_name[AscendString("a", 1)] += 1;
  EXPECT_EQ(by_name.size(), 1U);
  EXPECT_EQ(by_name.at("a"), 2);
}

TEST(AscendString, KeysAnOptionsMap) {
  Options options;
  const std::string device = "3";
  options[ld::OPTION_DEVICE_ID] = device.c_str();
  options[ld::OPTION_LISTEN_IP_INFO] = (std::string("10.0.0.1") + ":" + "26000").c_str();
  options["llm.DeviceId"] = "4";  // same key
  ASSERT_EQ(options.size(), 2U);
  EXPECT_STREQ(options.at(ld::OPTION_DEVICE_ID).GetString(), "4");
  EXPECT_EQ(options.begin()->first, "llm.DeviceId");  // sorted: "llm.D..." < "llm.L..."
}

TEST(AscendString, CopiesAndMovesKeepTheValue) {
  AscendString a("value");
  const AscendString copy = a;
  const AscendString moved = std::move(a);
  EXPECT_EQ(copy, "value");
  EXPECT_EQ(moved, "value");
  EXPECT_EQ(a, "value") << "no implicit move: a move copies, as metadef's does";  // NOLINT
  AscendString assigned;
  assigned = "other";
  EXPECT_EQ(assigned, "other");
  EXPECT_EQ(sizeof(AscendString), sizeof(std::shared_ptr<std::string>));
}

// ---------------------------------------------------------------------------------------------
// ACL

static_assert(std::is_same<aclError, int>::value, "");
static_assert(std::is_same<aclrtStream, void*>::value, "");
static_assert(std::is_same<aclrtEvent, void*>::value, "");
static_assert(std::is_same<aclrtContext, void*>::value, "");
static_assert(std::is_same<aclFloat16, uint16_t>::value, "");
static_assert(std::is_same<decltype(ACL_SUCCESS), const int>::value, "");

static_assert(ACL_SUCCESS == 0 && ACL_ERROR_NONE == 0, "");
static_assert(ACL_ERROR_INVALID_PARAM == 100000, "");
static_assert(ACL_ERROR_UNINITIALIZE == 100001, "");
static_assert(ACL_ERROR_REPEAT_INITIALIZE == 100002, "");
static_assert(ACL_ERROR_INVALID_FILE == 100003, "");
static_assert(ACL_ERROR_DUMP_NOT_RUN == 100045, "");
static_assert(ACL_ERROR_PROF_REPEAT_SUBSCRIBE == 148046, "");
static_assert(ACL_ERROR_INVALID_BUNDLE_MODEL_ID == 148053, "");
static_assert(ACL_ERROR_BAD_ALLOC == 200000, "");
static_assert(ACL_ERROR_API_NOT_SUPPORT == 200001, "");
static_assert(ACL_ERROR_INVALID_DEVICE == 200002, "");
static_assert(ACL_ERROR_MEMORY_ADDRESS_UNALIGNED == 200003, "");
static_assert(ACL_ERROR_RESOURCE_NOT_MATCH == 200004, "");
static_assert(ACL_ERROR_INVALID_RESOURCE_HANDLE == 200005, "");
static_assert(ACL_ERROR_FEATURE_UNSUPPORTED == 200006, "");
static_assert(ACL_ERROR_PROF_MODULES_UNSUPPORTED == 200007, "");
static_assert(ACL_ERROR_STORAGE_OVER_LIMIT == 300000, "");
static_assert(ACL_ERROR_INTERNAL_ERROR == 500000, "");
static_assert(ACL_ERROR_FAILURE == 500001, "");
static_assert(ACL_ERROR_GE_FAILURE == 500002, "");
static_assert(ACL_ERROR_RT_FAILURE == 500003, "");
static_assert(ACL_ERROR_DRV_FAILURE == 500004, "");
static_assert(ACL_ERROR_PROFILING_FAILURE == 500005, "");

#ifndef ACL_ERROR_RT_PARAM_INVALID
#error "runtime codes are macros"
#endif
static_assert(ACL_RT_SUCCESS == 0, "");
static_assert(ACL_ERROR_RT_PARAM_INVALID == 107000, "");
static_assert(ACL_ERROR_RT_INVALID_DEVICEID == 107001, "");
static_assert(ACL_ERROR_RT_CONTEXT_NULL == 107002, "");
static_assert(ACL_ERROR_RT_STREAM_CONTEXT == 107003, "");
static_assert(ACL_ERROR_RT_WAIT_TIMEOUT == 107019, "");
static_assert(ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC == 107041, "");
static_assert(ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING == 107045, "");
static_assert(ACL_ERROR_RT_FEATURE_NOT_SUPPORT == 207000, "");
static_assert(ACL_ERROR_RT_MEMORY_ALLOCATION == 207001, "");
static_assert(ACL_ERROR_RT_MEMORY_FREE == 207002, "");
static_assert(ACL_ERROR_RT_NO_DEVICE == 207004, "");
static_assert(ACL_ERROR_RT_DEVICE_OOM == 207018, "");
static_assert(ACL_ERROR_RT_TIMEOUT == 207020, "");
static_assert(ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED == 207021, "");
static_assert(ACL_ERROR_RT_INTERNAL_ERROR == 507000, "");
static_assert(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT == 507046, "");
static_assert(ACL_ERROR_RT_EVENT_SYNC_TIMEOUT == 507047, "");
static_assert(ACL_ERROR_RT_COPY_DATA == 507052, "");
static_assert(ACL_ERROR_RT_DEVICE_MEM_ERROR == 507053, "Python's LLM_DEVICE_MEM_ERROR");
static_assert(ACL_ERROR_RT_LINK_ERROR == 507056, "");
static_assert(ACL_ERROR_RT_SUSPECT_REMOTE_ERROR == 507057, "Python's LLM_SUSPECT_REMOTE_ERROR");
static_assert(ACL_ERROR_RT_DRV_INTERNAL_ERROR == 507899, "");
static_assert(ACL_ERROR_RT_AICPU_INTERNAL_ERROR == 507900, "");
static_assert(ACL_ERROR_RT_SOCKET_CLOSE == 507901, "");
static_assert(ACL_ERROR_RT_CCU_EXCEPTION == 507916, "");

static_assert(ACL_MEM_MALLOC_HUGE_FIRST == 0 && ACL_MEM_MALLOC_HUGE_ONLY == 1, "");
static_assert(ACL_MEM_MALLOC_NORMAL_ONLY == 2 && ACL_MEM_MALLOC_HUGE_FIRST_P2P == 3, "");
static_assert(ACL_MEM_MALLOC_HUGE_ONLY_P2P == 4 && ACL_MEM_MALLOC_NORMAL_ONLY_P2P == 5, "");
static_assert(ACL_MEM_MALLOC_HUGE1G_ONLY == 6 && ACL_MEM_MALLOC_HUGE1G_ONLY_P2P == 7, "");
static_assert(ACL_MEM_TYPE_LOW_BAND_WIDTH == 0x100 && ACL_MEM_TYPE_HIGH_BAND_WIDTH == 0x1000, "");
static_assert(ACL_MEM_ACCESS_USER_SPACE_READONLY == 0x100000, "");

static_assert(ACL_MEMCPY_HOST_TO_HOST == 0 && ACL_MEMCPY_HOST_TO_DEVICE == 1, "");
static_assert(ACL_MEMCPY_DEVICE_TO_HOST == 2 && ACL_MEMCPY_DEVICE_TO_DEVICE == 3, "");
static_assert(ACL_MEMCPY_DEFAULT == 4 && ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE == 5, "");
static_assert(ACL_MEMCPY_INNER_DEVICE_TO_DEVICE == 6 && ACL_MEMCPY_INTER_DEVICE_TO_DEVICE == 7, "");

static_assert(ACL_DEVICE == 0 && ACL_HOST == 1, "");
static_assert(ACL_DDR_MEM == 0 && ACL_HBM_MEM == 1 && ACL_HBM_MEM_HUGE == 4, "");
static_assert(ACL_HBM_MEM_HUGE1G == 10 && ACL_MEM_NORMAL == 12 && ACL_MEM_P2P_HUGE1G == 17, "");

static_assert(ACL_DT_UNDEFINED == -1 && ACL_FLOAT == 0 && ACL_INT32 == 3 && ACL_BF16 == 27, "");
static_assert(ACL_FLOAT4_E1M2 == 41, "");
static_assert(static_cast<int>(ACL_INT64) == static_cast<int>(ge::DT_INT64), "");

#define EXPECT_ACL(fn, Type) \
  static_assert(std::is_same<decltype(&fn), Type>::value, #fn " signature")

EXPECT_ACL(aclInit, aclError (*)(const char*));
EXPECT_ACL(aclFinalize, aclError (*)());
EXPECT_ACL(aclGetRecentErrMsg, const char* (*)());
EXPECT_ACL(aclrtSetDevice, aclError (*)(int32_t));
EXPECT_ACL(aclrtResetDevice, aclError (*)(int32_t));
EXPECT_ACL(aclrtGetDevice, aclError (*)(int32_t*));
EXPECT_ACL(aclrtGetDeviceCount, aclError (*)(uint32_t*));
EXPECT_ACL(aclrtGetRunMode, aclError (*)(aclrtRunMode*));
EXPECT_ACL(aclrtCreateContext, aclError (*)(aclrtContext*, int32_t));
EXPECT_ACL(aclrtDestroyContext, aclError (*)(aclrtContext));
EXPECT_ACL(aclrtSetCurrentContext, aclError (*)(aclrtContext));
EXPECT_ACL(aclrtGetCurrentContext, aclError (*)(aclrtContext*));
EXPECT_ACL(aclrtCreateStream, aclError (*)(aclrtStream*));
EXPECT_ACL(aclrtDestroyStream, aclError (*)(aclrtStream));
EXPECT_ACL(aclrtSynchronizeStream, aclError (*)(aclrtStream));
EXPECT_ACL(aclrtCreateEvent, aclError (*)(aclrtEvent*));
EXPECT_ACL(aclrtDestroyEvent, aclError (*)(aclrtEvent));
EXPECT_ACL(aclrtRecordEvent, aclError (*)(aclrtEvent, aclrtStream));
EXPECT_ACL(aclrtSynchronizeEvent, aclError (*)(aclrtEvent));
EXPECT_ACL(aclrtMalloc, aclError (*)(void**, size_t, aclrtMemMallocPolicy));
EXPECT_ACL(aclrtFree, aclError (*)(void*));
EXPECT_ACL(aclrtMallocHost, aclError (*)(void**, size_t));
EXPECT_ACL(aclrtFreeHost, aclError (*)(void*));
EXPECT_ACL(aclrtMemcpy, aclError (*)(void*, size_t, const void*, size_t, aclrtMemcpyKind));
EXPECT_ACL(aclrtMemset, aclError (*)(void*, size_t, int32_t, size_t));
EXPECT_ACL(aclrtMemcpyAsync,
           aclError (*)(void*, size_t, const void*, size_t, aclrtMemcpyKind, aclrtStream));
EXPECT_ACL(aclrtGetMemInfo, aclError (*)(aclrtMemAttr, size_t*, size_t*));

}  // namespace

// llm_datadist leaves out ge::DT_HIFLOAT4 and ge::DT_MAX: with both namespaces nominated here, an
// unqualified name would be ambiguous if it declared them.
namespace kvsim_dt_probe {
constexpr int DT_HIFLOAT4 = -7;
constexpr int DT_MAX = -7;
}  // namespace kvsim_dt_probe
namespace kvsim_dt_lookup {
using namespace ::kvsim_dt_probe;
using namespace ::llm_datadist;
static_assert(DT_HIFLOAT4 == -7 && DT_MAX == -7, "not in llm_datadist");
static_assert(DT_INT32 == ge::DT_INT32, "");
}  // namespace kvsim_dt_lookup
