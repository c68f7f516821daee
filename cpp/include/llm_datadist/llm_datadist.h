// kvsim's source-compatible declaration of CANN llm_datadist's llm_datadist/llm_datadist.h: the
// C++ LlmDataDist API with the real names, values, struct layouts, defaults and default
// arguments (spec/llm_datadist_cpp.md §2–§5). LlmDataDist's members are implemented in
// cpp/src/ (LlmDataDist::LlmDataDistImpl), which forwards to impl/.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "external/ge_common/api_error_codes.h"

/// Exports LlmDataDist from a shared library built with -DFUNC_VISIBILITY.
#ifdef FUNC_VISIBILITY
#define ASCEND_FUNC_VISIBILITY __attribute__((visibility("default")))
#else
#define ASCEND_FUNC_VISIBILITY
#endif

namespace llm_datadist {

// Internal linkage, as in the real header (it sits in an unnamed namespace there too).
namespace {
constexpr uint8_t kDefaultTensorNumPerLayer = 2U;
}

using Status = ge::Status;
using AscendString = ge::AscendString;
using DataType = ge::DataType;

// Option keys for Initialize and SetRole; every value is a string.
/// "ip:port" or "[ipv6]:port" to listen on; present makes this instance a server.
constexpr const char OPTION_LISTEN_IP_INFO[] = "llm.ListenIpInfo";
/// Required by Initialize: the device id, e.g. "0".
constexpr const char OPTION_DEVICE_ID[] = "llm.DeviceId";
/// Push/pull timeout in ms (positive integer; default 1000).
constexpr const char OPTION_SYNC_CACHE_WAIT_TIME[] = "llm.SyncKvCacheWaitTime";
/// Memory-pool configuration (JSON); unused by the C++ API, which allocates no caches.
constexpr const char OPTION_BUF_POOL_CFG[] = "llm.BufPoolCfg";
/// Declared by the real header; SetRole does not need it.
constexpr const char OPTION_ENABLE_SET_ROLE[] = "llm.EnableSwitchRole";
/// Rank-table JSON of the local communication resources; generated when absent.
constexpr const char OPTION_LOCAL_COMM_RES[] = "llm.LocalCommRes";
/// Transfer backend; the only accepted value is "hixl".
constexpr const char OPTION_TRANSFER_BACKEND[] = "llm.TransferBackend";
/// JSON handed to the hixl backend.
constexpr const char OPTION_GLOBAL_RESOURCE_CONFIG[] = "llm.GlobalResourceConfig";

// Status codes returned by LlmDataDist (the same numbers as ge::LLM_* in llm_error_codes.h).
constexpr Status LLM_SUCCESS = 0x0U;
constexpr Status LLM_FAILED = 0xFFFFFFFFU;
constexpr Status LLM_WAIT_PROC_TIMEOUT = 0x5010B001U;
constexpr Status LLM_KV_CACHE_NOT_EXIST = 0x5010B002U;
constexpr Status LLM_PARAM_INVALID = 0x5010B005U;
constexpr Status LLM_NOT_YET_LINK = 0x5010B007U;
constexpr Status LLM_ALREADY_LINK = 0x5010B008U;
constexpr Status LLM_LINK_FAILED = 0x5010B009U;
constexpr Status LLM_UNLINK_FAILED = 0x5010B00AU;
constexpr Status LLM_NOTIFY_PROMPT_UNLINK_FAILED = 0x5010B00BU;
constexpr Status LLM_CLUSTER_NUM_EXCEED_LIMIT = 0x5010B00CU;
constexpr Status LLM_PROCESSING_LINK = 0x5010B00DU;
constexpr Status LLM_DEVICE_OUT_OF_MEMORY = 0x5010B00EU;
constexpr Status LLM_EXIST_LINK = 0x5010B018U;
constexpr Status LLM_FEATURE_NOT_ENABLED = 0x5010B019U;
constexpr Status LLM_TIMEOUT = 0x5010B01AU;
constexpr Status LLM_LINK_BUSY = 0x5010B01BU;  ///< Reserved: never returned.
constexpr Status LLM_OUT_OF_MEMORY = 0x5010B01CU;

// The element types, so that `using namespace llm_datadist;` code can write DT_INT32.
// (ge::DT_HIFLOAT4 and ge::DT_MAX are not brought in, as in the real header.)
using ge::DT_BF16;
using ge::DT_BOOL;
using ge::DT_COMPLEX128;
using ge::DT_COMPLEX32;
using ge::DT_COMPLEX64;
using ge::DT_DOUBLE;
using ge::DT_DUAL;
using ge::DT_DUAL_SUB_INT8;
using ge::DT_DUAL_SUB_UINT8;
using ge::DT_FLOAT;
using ge::DT_FLOAT16;
using ge::DT_FLOAT4_E1M2;
using ge::DT_FLOAT4_E2M1;
using ge::DT_FLOAT6_E2M3;
using ge::DT_FLOAT6_E3M2;
using ge::DT_FLOAT8_E4M3FN;
using ge::DT_FLOAT8_E5M2;
using ge::DT_FLOAT8_E8M0;
using ge::DT_HIFLOAT8;
using ge::DT_INT16;
using ge::DT_INT2;
using ge::DT_INT32;
using ge::DT_INT4;
using ge::DT_INT64;
using ge::DT_INT8;
using ge::DT_QINT16;
using ge::DT_QINT32;
using ge::DT_QINT8;
using ge::DT_QUINT16;
using ge::DT_QUINT8;
using ge::DT_RESOURCE;
using ge::DT_STRING;
using ge::DT_STRING_REF;
using ge::DT_UINT1;
using ge::DT_UINT16;
using ge::DT_UINT2;
using ge::DT_UINT32;
using ge::DT_UINT64;
using ge::DT_UINT8;
using ge::DT_UNDEFINED;
using ge::DT_VARIANT;

// The structs below are aggregates with no constructors, field order as in the real header;
// the `reserved` tails keep their layout and are not read.

/// A host address and port.
struct IpInfo {
  AscendString ip;
  uint16_t port = 0U;
  uint8_t reserved[128];
};

/// A peer to link to or unlink from.
struct ClusterInfo {
  uint64_t remote_cluster_id = 0U;  ///< The peer's constructor cluster_id.
  int32_t remote_role_type = 0;     ///< 0 full (prompt), 1 incremental (decoder); not checked.
  std::vector<IpInfo> local_ip_infos;
  std::vector<IpInfo> remote_ip_infos;  ///< Exactly one: the peer's listen address.
  uint8_t reserved[128];
};

/// Role label of an LlmDataDist; kEnd is the invalid value.
enum class LlmRole : int32_t { kPrompt = 1, kDecoder = 2, kMix = 3, kEnd };

/// A remote cache: (cluster, registration id, batch). No defaults: write `CacheIndex{c, id, b}`.
struct CacheIndex {
  uint64_t cluster_id;
  int64_t cache_id;
  uint32_t batch_index;
  uint8_t reserved[128];
};

/// Where a cache's memory lives.
enum class CachePlacement : uint32_t {
  kHost = 0U,
  kDevice = 1U,
};

/// Shape and type of a cache's tensors (all tensors alike; shape[0] is the batch/block count).
struct CacheDesc {
  CachePlacement placement = CachePlacement::kDevice;
  uint32_t num_tensors = 0U;
  DataType data_type = DT_UNDEFINED;
  std::vector<int64_t> shape;
  uint8_t reserved[128];
};

/// A local cache as the caller describes it; push and pull read cache_id (push also
/// cache_desc.num_tensors and cache_desc.placement).
struct Cache {
  int64_t cache_id = -1;
  std::vector<uintptr_t> tensor_addrs;
  CacheDesc cache_desc;
  uint8_t reserved[128];
};

/// Layer selection of a transfer: inclusive [first, second] ranges, -1 for all layers, and the
/// number of consecutive tensors that make one layer.
struct KvCacheExtParam {
  std::pair<int32_t, int32_t> src_layer_range = {-1, -1};
  std::pair<int32_t, int32_t> dst_layer_range = {-1, -1};
  uint8_t tensor_num_per_layer = kDefaultTensorNumPerLayer;
  uint8_t reserved[127];
};

/// Options of RegisterKvCache; none are defined (pass `{}`).
struct RegisterCfg {
  uint8_t reserved[128] = {0};
};

/// One process's endpoint of KV-cache transfer: links to peers by cluster id and moves
/// registered caches to and from them. Every call is synchronous and returns a Status.
class ASCEND_FUNC_VISIBILITY LlmDataDist {
 public:
  /// `cluster_id` must be unique among the instances that link; `role` is a label.
  LlmDataDist(uint64_t cluster_id, LlmRole role);

  ~LlmDataDist();

  /// Starts the instance with OPTION_* keys (OPTION_DEVICE_ID is required). Must precede every
  /// other call; pair it with Finalize.
  Status Initialize(const std::map<AscendString, AscendString>& options);

  /// Unlinks every peer, drops the registrations and releases the device.
  void Finalize();

  /// Switches role: with OPTION_LISTEN_IP_INFO in `options` the instance serves on that
  /// address, without it becomes a client. Links must be removed first.
  Status SetRole(LlmRole role, const std::map<AscendString, AscendString>& options = {});

  /// Links to `clusters`; `rets` receives one status per cluster.
  Status LinkLlmClusters(const std::vector<ClusterInfo>& clusters, std::vector<Status>& rets,
                         int32_t timeout_in_millis = 1000);

  /// Unlinks `clusters`; `force_flag` tears down only this end (both ends must then call it).
  Status UnlinkLlmClusters(const std::vector<ClusterInfo>& clusters, std::vector<Status>& rets,
                           int32_t timeout_in_millis = 1000, bool force_flag = false);

  /// Not supported by the C++ API: returns LLM_FEATURE_NOT_ENABLED.
  Status AllocateCache(const CacheDesc& cache_desc, Cache& cache);

  /// Not supported by the C++ API: returns LLM_FEATURE_NOT_ENABLED.
  Status DeallocateCache(int64_t cache_id);

  /// Reads batch `src_cache_index.batch_index` of a remote cache into batch `batch_index` of
  /// `dst_cache`; `size` in bytes, -1 for the whole batch.
  Status PullKvCache(const CacheIndex& src_cache_index, const Cache& dst_cache,
                     uint32_t batch_index = 0U, int64_t size = -1,
                     const KvCacheExtParam& ext_param = {});

  /// Reads blocks `src_blocks` of a remote cache into blocks `dst_blocks` of `dst_cache`.
  Status PullKvBlocks(const CacheIndex& src_cache_index, const Cache& dst_cache,
                      const std::vector<uint64_t>& src_blocks,
                      const std::vector<uint64_t>& dst_blocks,
                      const KvCacheExtParam& ext_param = {});

  /// Not supported by the C++ API: returns LLM_FEATURE_NOT_ENABLED.
  Status CopyKvCache(const Cache& src_cache, const Cache& dst_cache, uint32_t src_batch_index = 0U,
                     uint32_t dst_batch_index = 0U, uint64_t offset = 0U, int64_t size = -1);

  /// Not supported by the C++ API: returns LLM_FEATURE_NOT_ENABLED.
  Status CopyKvBlocks(const Cache& src_cache, const Cache& dst_cache,
                      const std::vector<uint64_t>& src_blocks,
                      const std::vector<std::vector<uint64_t>>& dst_blocks_list);

  /// Writes batch `src_batch_index` of `src_cache` to a remote cache; `size` must be -1.
  Status PushKvCache(const Cache& src_cache, const CacheIndex& dst_cache_index,
                     uint32_t src_batch_index = 0U, int64_t size = -1,
                     const KvCacheExtParam& ext_param = {});

  /// Writes blocks `src_blocks` of `src_cache` to blocks `dst_blocks` of a remote cache.
  Status PushKvBlocks(const Cache& src_cache, const CacheIndex& dst_cache_index,
                      const std::vector<uint64_t>& src_blocks,
                      const std::vector<uint64_t>& dst_blocks,
                      const KvCacheExtParam& ext_param = {});

  /// Registers caller-owned memory, one address per tensor; `cache_id` receives the next id of
  /// this instance (1, 2, 3, ...). `cfg` is not read.
  Status RegisterKvCache(const CacheDesc& cache_desc, const std::vector<uint64_t>& addrs,
                         const RegisterCfg& cfg, int64_t& cache_id);

  /// Drops a registration; an unknown id succeeds.
  Status UnregisterKvCache(int64_t cache_id);

 private:
  class LlmDataDistImpl;
  std::unique_ptr<LlmDataDistImpl> impl_;
};

}  // namespace llm_datadist
