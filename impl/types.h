// Enums, value classes and configuration of the llm_datadist API (spec §2.1, §2.2, §5).
//
// Integer arguments that Python range-checks (indices, sizes, counts) are std::int64_t here, so
// that a negative or oversized value reaches the check and raises ValueError as in Python
// (§2.3). Ids that may legitimately be 2**64-1 and addresses are std::uint64_t.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "impl/errors.h"

namespace kvsim::impl {

/// 2**64-1: the "no id" value of CacheKey.req_id and CacheKey.prefix_id (§2.2).
inline constexpr std::uint64_t kInvalidId = UINT64_MAX;

/// Role of an LLMDataDist; a label only in v2 (§2.1).
enum class LLMRole : std::int32_t { PROMPT = 1, DECODER = 2, MIX = 3 };
/// Where a cache lives (§2.1).
enum class Placement : std::int32_t { HOST = 0, DEVICE = 1 };
/// Memory type of a MemInfo (§2.1).
enum class Memtype : std::int32_t { MEM_TYPE_DEVICE = 0, MEM_TYPE_HOST = 1 };
/// Result of query_register_mem_status (§2.1).
enum class RegisterMemStatus : std::int32_t { OK = 0, PREPARING = 1, FAILED = 2 };

/// Element type; values are ge::DataType's (§2.1).
enum class DataType : std::int32_t {
  DT_FLOAT = 0,
  DT_FLOAT16 = 1,
  DT_INT8 = 2,
  DT_INT32 = 3,
  DT_UINT8 = 4,
  DT_INT16 = 6,
  DT_UINT16 = 7,
  DT_UINT32 = 8,
  DT_INT64 = 9,
  DT_UINT64 = 10,
  DT_DOUBLE = 11,
  DT_BOOL = 12,
  DT_STRING = 13,
  DT_BF16 = 27,
};

/// Enum names as Python prints them after the dot ("PROMPT", "DEVICE", "DT_BF16", ...).
std::string_view to_string(LLMRole role);
std::string_view to_string(Placement placement);
std::string_view to_string(Memtype memtype);
std::string_view to_string(RegisterMemStatus status);
std::string_view to_string(DataType data_type);

/// True if the value is one of the enumerators (a C++ cast can produce any other).
bool is_valid(LLMRole role);
bool is_valid(Placement placement);
bool is_valid(DataType data_type);

/// Python's int → RegisterMemStatus mapping: 0, 1, 2 as declared, anything else FAILED (§2.1).
RegisterMemStatus register_mem_status_from_int(std::int64_t value);

/// Bytes per element as llm_datadist computes them (DT_STRING counts 16, LLMUtils);
/// LLMException(LLM_PARAM_INVALID) for a value that is not a DataType.
std::uint32_t element_size(DataType data_type);

/// A Python `range(start, stop, step)` as used for layer ranges: half-open [start, stop).
struct LayerRange {
  std::int64_t start = 0;
  std::int64_t stop = 0;
  std::int64_t step = 1;

  /// len(range(start, stop, step)); 0 for step 0.
  std::int64_t size() const;
  /// `i in range(start, stop, step)`.
  bool contains(std::int64_t i) const;
  /// The i-th element, range[i], for 0 <= i < size().
  std::int64_t at(std::int64_t i) const { return start + i * step; }
  friend bool operator==(const LayerRange& a, const LayerRange& b) {
    return a.start == b.start && a.stop == b.stop && a.step == b.step;
  }
  friend bool operator!=(const LayerRange& a, const LayerRange& b) { return !(a == b); }
};

/// Python repr: "range(0, 40)" or "range(0, 40, 2)".
std::string to_string(const LayerRange& range);

/// Python check_layer_range (§2.2): None is a TypeError unless `allow_none`; step != 1 or not
/// 0 <= start < stop is LLMException(LLM_PARAM_INVALID). Errors name `argument`.
void check_layer_range(const std::string& argument, const std::optional<LayerRange>& range,
                       bool allow_none);

/// Description of the tensors of one cache (§2.2). The constructor runs Python's checks.
class CacheDesc {
 public:
  /// ValueError if num_tensors is not uint32 or seq_len_dim_index not int32; TypeError for an
  /// invalid data_type or placement; LLMException(LLM_PARAM_INVALID) if batch_dim_index is not in
  /// [0, len(shape)) or seq_len_dim_index is neither -1 nor in [0, len(shape)).
  CacheDesc(std::int64_t num_tensors, std::vector<std::int64_t> shape, DataType data_type,
            Placement placement = Placement::DEVICE, std::int64_t batch_dim_index = 0,
            std::int64_t seq_len_dim_index = -1,
            std::optional<std::string> kv_tensor_format = std::nullopt);

  std::uint32_t num_tensors() const { return num_tensors_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  DataType data_type() const { return data_type_; }
  Placement placement() const { return placement_; }
  std::int64_t batch_dim_index() const { return batch_dim_index_; }
  /// shape[batch_dim_index]: the batch size of a contiguous cache, num_blocks of a PA cache.
  std::int64_t batch_size() const { return shape_[static_cast<std::size_t>(batch_dim_index_)]; }
  std::int64_t seq_len_dim_index() const { return seq_len_dim_index_; }
  const std::optional<std::string>& kv_tensor_format() const { return kv_tensor_format_; }
  /// Bytes of ONE tensor (§2.2). LLMException(LLM_PARAM_INVALID) if a dim is <= 0 or the size
  /// overflows int64 (LLMUtils::CalcTensorMemSize).
  std::uint64_t size() const;

 private:
  std::uint32_t num_tensors_;
  std::vector<std::int64_t> shape_;
  DataType data_type_;
  Placement placement_;
  std::int64_t batch_dim_index_;
  std::int64_t seq_len_dim_index_;
  std::optional<std::string> kv_tensor_format_;
};

/// A local cache as the API's `Cache` exposes it (§2.2): what validation and geometry need.
struct CacheView {
  std::int64_t cache_id = -1;
  CacheDesc desc;
  std::vector<std::uint64_t> tensor_addrs{};
  bool is_blocks_cache = false;
  bool remote_accessible = false;
  /// A C++ RegisterKvCache registration (type MIX, llm_datadist_cpp.md §7): shape[0] is both its
  /// batch size and its block count, so it serves the cache and the blocks calls alike.
  bool mix = false;

  Placement placement() const { return desc.placement(); }
};

/// Key of a contiguous cache row: (cluster, request or prefix, model) (§2.2).
struct CacheKey {
  std::uint64_t cluster_id = 0;
  std::uint64_t req_id = kInvalidId;
  std::uint64_t model_id = 0;
  std::uint64_t prefix_id = kInvalidId;
};

/// Key of one batch row of a remote cache by id (§2.2).
class CacheKeyByIdAndIndex {
 public:
  /// ValueError unless batch_index is uint32.
  CacheKeyByIdAndIndex(std::uint64_t cluster_id, std::int64_t cache_id,
                       std::int64_t batch_index = 0);
  std::uint64_t cluster_id() const { return cluster_id_; }
  std::int64_t cache_id() const { return cache_id_; }
  std::uint32_t batch_index() const { return batch_index_; }

 private:
  std::uint64_t cluster_id_;
  std::int64_t cache_id_;
  std::uint32_t batch_index_;
};

/// Key of a remote blocks (PA) cache (§2.2).
struct BlocksCacheKey {
  std::uint64_t cluster_id = 0;
  std::uint64_t model_id = 0;
};

/// The cache key a TransferWithCacheKeyConfig targets.
using TransferCacheKey = std::variant<BlocksCacheKey, CacheKeyByIdAndIndex>;

/// The cluster id a TransferCacheKey names.
std::uint64_t cluster_id_of(const TransferCacheKey& key);

/// Destination of transfer_cache_async by explicit addresses (§2.2, §3).
class TransferConfig {
 public:
  /// LLMException if src_layer_range is given and not step 1 with 0 <= start < stop; ValueError
  /// unless src_batch_index is uint32.
  TransferConfig(std::uint64_t dst_cluster_id, std::vector<std::uint64_t> dst_addrs,
                 std::optional<LayerRange> src_layer_range = std::nullopt,
                 std::int64_t src_batch_index = 0);

  std::uint64_t dst_cluster_id() const { return dst_cluster_id_; }
  void set_dst_cluster_id(std::uint64_t id) { dst_cluster_id_ = id; }
  /// (K, V) addresses per layer of src_layer_range, already offset to the destination row.
  const std::vector<std::uint64_t>& dst_addrs() const { return dst_addrs_; }
  void set_dst_addrs(std::vector<std::uint64_t> addrs) { dst_addrs_ = std::move(addrs); }
  const std::optional<LayerRange>& src_layer_range() const { return src_layer_range_; }
  /// Same checks as the constructor (Python property setter).
  void set_src_layer_range(std::optional<LayerRange> range);
  std::uint32_t src_batch_index() const { return src_batch_index_; }
  /// ValueError unless uint32.
  void set_src_batch_index(std::int64_t index);
  /// Python's plain attribute `dst_layer_range` (default None, never checked).
  const std::optional<LayerRange>& dst_layer_range() const { return dst_layer_range_; }
  void set_dst_layer_range(std::optional<LayerRange> range) { dst_layer_range_ = range; }

 private:
  std::uint64_t dst_cluster_id_;
  std::vector<std::uint64_t> dst_addrs_;
  std::optional<LayerRange> src_layer_range_;
  std::uint32_t src_batch_index_ = 0;
  std::optional<LayerRange> dst_layer_range_;
};

/// Destination of transfer_cache_async by remote cache key, for remote-accessible mode (§2.2).
class TransferWithCacheKeyConfig {
 public:
  /// TypeError if a range is None; LLMException if a range is not step 1 with
  /// 0 <= start < stop or the two lengths differ; ValueError unless src_batch_index is uint32;
  /// LLMException if the key is a BlocksCacheKey and src_batch_index != 0.
  TransferWithCacheKeyConfig(TransferCacheKey cache_key, std::optional<LayerRange> src_layer_range,
                             std::optional<LayerRange> dst_layer_range,
                             std::int64_t src_batch_index = 0);

  const TransferCacheKey& cache_key() const { return cache_key_; }
  /// Python setter; like Python it does not refresh dst_cluster_id().
  void set_cache_key(TransferCacheKey key) { cache_key_ = std::move(key); }
  const std::optional<LayerRange>& src_layer_range() const { return src_layer_range_; }
  /// Python setter: None allowed, otherwise the range checks.
  void set_src_layer_range(std::optional<LayerRange> range);
  const std::optional<LayerRange>& dst_layer_range() const { return dst_layer_range_; }
  /// Python setter: None allowed, otherwise the range checks.
  void set_dst_layer_range(std::optional<LayerRange> range);
  std::uint32_t src_batch_index() const { return src_batch_index_; }
  /// LLMException for a BlocksCacheKey and index != 0; ValueError unless uint32.
  void set_src_batch_index(std::int64_t index);
  /// cache_key.cluster_id as it was at construction (Python sets the attribute once).
  std::uint64_t dst_cluster_id() const { return dst_cluster_id_; }

 private:
  TransferCacheKey cache_key_;
  std::optional<LayerRange> src_layer_range_;
  std::optional<LayerRange> dst_layer_range_;
  std::uint32_t src_batch_index_ = 0;
  std::uint64_t dst_cluster_id_;
};

/// One element of transfer_cache_async's transfer_configs.
using AnyTransferConfig = std::variant<TransferConfig, TransferWithCacheKeyConfig>;

/// Python class name of the alternative held ("TransferConfig", ...).
std::string_view type_name(const AnyTransferConfig& config);
/// The config's src_layer_range.
const std::optional<LayerRange>& src_layer_range_of(const AnyTransferConfig& config);
/// The config's dst_cluster_id.
std::uint64_t dst_cluster_id_of(const AnyTransferConfig& config);
/// The config's src_batch_index.
std::uint32_t src_batch_index_of(const AnyTransferConfig& config);

/// Python `int.from_bytes(socket.inet_aton(ip), "little")` (§2.2): "1.2.3.4" → 0x04030201.
/// Accepts what inet_aton accepts; RuntimeError("Can not parse ip str") otherwise.
std::uint32_t ip_to_int(const std::string& ip);
/// Inverse of ip_to_int, dotted quad (LLMUtils::IntToIp).
std::string int_to_ip(std::uint32_t ip);

/// One (ip, port) entry of an LLMClusterInfo.
struct IpInfo {
  std::uint32_t ip = 0;
  std::uint16_t port = 0;
  friend bool operator==(const IpInfo& a, const IpInfo& b) {
    return a.ip == b.ip && a.port == b.port;
  }
};

/// Peer description for link_clusters (§2.2).
class LLMClusterInfo {
 public:
  std::optional<std::uint64_t> remote_cluster_id() const { return remote_cluster_id_; }
  void set_remote_cluster_id(std::uint64_t id) { remote_cluster_id_ = id; }
  std::optional<LLMRole> remote_role_type() const { return remote_role_type_; }
  /// TypeError for a value that is not an LLMRole.
  void set_remote_role_type(LLMRole role);
  /// ValueError unless port is uint16, then RuntimeError if ip does not parse.
  void append_local_ip_info(const std::string& ip, std::int64_t port);
  /// ValueError unless port is uint16; ip is taken as already converted.
  void append_local_ip_info(std::uint32_t ip, std::int64_t port);
  /// As append_local_ip_info, for the remote side.
  void append_remote_ip_info(const std::string& ip, std::int64_t port);
  void append_remote_ip_info(std::uint32_t ip, std::int64_t port);
  const std::vector<IpInfo>& local_ip_info_list() const { return local_; }
  const std::vector<IpInfo>& remote_ip_info_list() const { return remote_; }

 private:
  std::optional<std::uint64_t> remote_cluster_id_;
  std::optional<LLMRole> remote_role_type_;
  std::vector<IpInfo> local_;
  std::vector<IpInfo> remote_;
};

/// Option keys (§5).
inline constexpr const char* kOptionDeviceId = "ge.exec.deviceId";
inline constexpr const char* kOptionSessionDeviceId = "ge.session_device_id";
inline constexpr const char* kOptionCppDeviceId = "llm.DeviceId";
inline constexpr const char* kOptionSyncKvCacheWaitTime = "llm.SyncKvCacheWaitTime";
inline constexpr const char* kOptionListenIpInfo = "llm.listenIpInfo";
inline constexpr const char* kOptionCppListenIpInfo = "llm.ListenIpInfo";
inline constexpr const char* kOptionEnableCacheManager = "llm.EnableCacheManager";
inline constexpr const char* kOptionEnableRemoteCacheAccessible = "llm.EnableRemoteCacheAccessible";
inline constexpr const char* kOptionMemPoolConfig = "llm.MemPoolConfig";
inline constexpr const char* kOptionHostMemPoolConfig = "llm.HostMemPoolConfig";
inline constexpr const char* kOptionEnableSwitchRole = "llm.EnableSwitchRole";
inline constexpr const char* kOptionBufPoolCfg = "llm.BufPoolCfg";
inline constexpr const char* kOptionLinkTotalTime = "llm.LinkTotalTime";
inline constexpr const char* kOptionLinkRetryCount = "llm.LinkRetryCount";
inline constexpr const char* kOptionRdmaTrafficClass = "llm.RdmaTrafficClass";
inline constexpr const char* kOptionRdmaServiceLevel = "llm.RdmaServiceLevel";
inline constexpr const char* kOptionLocalCommRes = "llm.LocalCommRes";
inline constexpr const char* kOptionTransferBackend = "llm.TransferBackend";
/// The one llm.TransferBackend value the library accepts.
inline constexpr const char* kTransferBackendHixl = "hixl";
inline constexpr const char* kOptionGlobalResourceConfig = "llm.GlobalResourceConfig";
inline constexpr const char* kOptionMemoryUtilization = "llm.MemoryUtilization";
inline constexpr const char* kOptionOutputMaxSize = "llm.OutputMaxSize";
inline constexpr const char* kOptionDeployResPath = "llm.deployResPath";

/// Python LlmConfig (§5): setters run Python's checks; generate_options() emits exactly the keys
/// Python emits — only options that were set, plus llm.MemoryUtilization (default 0.95).
/// Effective defaults of unset options (sync_kv_timeout 1000 ms, ...) are applied by
/// parse_engine_options(), as the C++ engine does at init.
class LLMConfig {
 public:
  /// LLMException if negative; ValueError unless int32. One device only (§5).
  void set_device_id(std::int64_t device_id);
  std::optional<std::int32_t> device_id() const { return device_id_; }
  /// Milliseconds; LLMException unless > 0, ValueError unless int32 (§5).
  void set_sync_kv_timeout(std::int64_t millis);
  /// Python also takes a digit string; LLMException unless all digits and > 0.
  void set_sync_kv_timeout(const std::string& millis);
  /// The value as it will be emitted, if set.
  const std::optional<std::string>& sync_kv_timeout() const { return sync_kv_timeout_; }
  /// "ip:port"; when set, this side is the server (§5). Checked at init.
  void set_listen_ip_info(std::string value) { listen_ip_info_ = std::move(value); }
  const std::string& listen_ip_info() const { return listen_ip_info_; }
  void set_enable_cache_manager(bool on) { enable_cache_manager_ = on; }
  bool enable_cache_manager() const { return enable_cache_manager_.value_or(false); }
  void set_enable_remote_cache_accessible(bool on) { enable_remote_cache_accessible_ = on; }
  bool enable_remote_cache_accessible() const {
    return enable_remote_cache_accessible_.value_or(false);
  }
  void set_enable_switch_role(bool on) { enable_switch_role_ = on; }
  bool enable_switch_role() const { return enable_switch_role_; }
  /// JSON {"memory_size": N, "page_shift": M}; checked at init.
  void set_mem_pool_cfg(std::string json) { mem_pool_cfg_ = std::move(json); }
  const std::string& mem_pool_cfg() const { return mem_pool_cfg_; }
  void set_host_mem_pool_cfg(std::string json) { host_mem_pool_cfg_ = std::move(json); }
  const std::string& host_mem_pool_cfg() const { return host_mem_pool_cfg_; }
  void set_buf_pool_cfg(std::string value) { buf_pool_cfg_ = std::move(value); }
  const std::string& buf_pool_cfg() const { return buf_pool_cfg_; }
  /// Seconds; LLMException unless in [0, 2**32-1]. 0 means HCCL_CONNECT_TIMEOUT (§5).
  void set_link_total_time(std::int64_t seconds);
  std::int64_t link_total_time() const { return link_total_time_.value_or(0); }
  /// LLMException unless in [1, 100] (§5).
  void set_link_retry_count(std::int64_t count);
  std::int64_t link_retry_count() const { return link_retry_count_.value_or(1); }
  /// ValueError unless uint32 (the [0,255], multiple-of-4 rule is checked at init, §5).
  void set_rdma_traffic_class(std::int64_t value);
  std::optional<std::int64_t> rdma_traffic_class() const { return rdma_traffic_class_; }
  /// ValueError unless uint32 (the [0,7] rule is checked at init, §5).
  void set_rdma_service_level(std::int64_t value);
  std::optional<std::int64_t> rdma_service_level() const { return rdma_service_level_; }
  void set_local_comm_res(std::string value) { local_comm_res_ = std::move(value); }
  std::string local_comm_res() const { return local_comm_res_.value_or(""); }
  void set_transfer_backend(std::string value) { transfer_backend_ = std::move(value); }
  std::string transfer_backend() const { return transfer_backend_.value_or(""); }
  void set_global_resource_config(std::string value) { global_resource_config_ = std::move(value); }
  std::string global_resource_config() const { return global_resource_config_.value_or(""); }
  /// v1/offline; LLMException unless in [0, 1].
  void set_mem_utilization(double value);
  double mem_utilization() const { return mem_utilization_; }
  /// v1/offline.
  void set_output_max_size(std::int64_t value) { output_max_size_ = value; }
  std::optional<std::int64_t> output_max_size() const { return output_max_size_; }
  /// v1/offline.
  void set_deploy_res_path(std::string value) { deploy_res_path_ = std::move(value); }
  const std::string& deploy_res_path() const { return deploy_res_path_; }
  /// Extra GE options, copied first so that LLMConfig's own keys win.
  void set_ge_options(std::map<std::string, std::string> options) {
    ge_options_ = std::move(options);
  }
  const std::map<std::string, std::string>& ge_options() const { return ge_options_; }

  /// The option map for LLMDataDist.init, key for key as Python's generate_options (§5).
  std::map<std::string, std::string> generate_options() const;

 private:
  std::optional<std::int32_t> device_id_;
  std::optional<std::string> sync_kv_timeout_;
  std::string listen_ip_info_;
  std::optional<bool> enable_cache_manager_;
  std::optional<bool> enable_remote_cache_accessible_;
  bool enable_switch_role_ = false;
  std::string mem_pool_cfg_;
  std::string host_mem_pool_cfg_;
  std::string buf_pool_cfg_;
  std::optional<std::int64_t> link_total_time_;
  std::optional<std::int64_t> link_retry_count_;
  std::optional<std::int64_t> rdma_traffic_class_;
  std::optional<std::int64_t> rdma_service_level_;
  std::optional<std::string> local_comm_res_;
  std::optional<std::string> transfer_backend_;
  std::optional<std::string> global_resource_config_;
  double mem_utilization_ = 0.95;
  std::optional<std::int64_t> output_max_size_;
  std::string deploy_res_path_;
  std::map<std::string, std::string> ge_options_;
};

/// A parsed llm.MemPoolConfig / llm.HostMemPoolConfig (§5).
struct MemPoolConfig {
  std::uint64_t memory_size = 0;
  std::uint32_t page_shift = 16;
};

/// Host memory pool limit, 20 GiB (HDK < 25.5, §5).
inline constexpr std::uint64_t kMaxHostMemPoolBytes = 20ull << 30;
/// Default of llm.SyncKvCacheWaitTime in milliseconds (§5).
inline constexpr std::int32_t kDefaultSyncKvTimeoutMs = 1000;
/// HCCL_CONNECT_TIMEOUT used when llm.LinkTotalTime is 0, in seconds (§5).
inline constexpr std::uint32_t kHcclConnectTimeoutS = 120;

/// The effective engine settings after init parsed the option map, with defaults applied.
struct EngineOptions {
  std::int32_t device_id = 0;
  std::int32_t sync_kv_timeout_ms = kDefaultSyncKvTimeoutMs;
  std::optional<IpInfo> listen_ip_info{};  ///< Set: this side is the server.
  bool enable_cache_manager = false;
  bool enable_remote_cache_accessible = false;
  bool enable_switch_role = false;
  std::optional<MemPoolConfig> mem_pool{};
  std::optional<MemPoolConfig> host_mem_pool{};
  std::uint32_t link_total_time_s = kHcclConnectTimeoutS;
  std::uint32_t link_retry_count = 1;
  std::uint32_t rdma_traffic_class = 132;
  std::uint32_t rdma_service_level = 4;
  std::optional<std::string> local_comm_res{};
  std::string transfer_backend{};
  std::string global_resource_config{};
};

/// Parses and range-checks an option map as LLMDataDist.init would (§5); throws
/// LLMException naming the option key. Flags must be "0"/"1" (LLM_FAILED, as LLMUtils::ParseFlag);
/// an llm.TransferBackend other than "hixl" is LLM_FAILED; every other rule is LLM_PARAM_INVALID.
/// llm.LocalCommRes (even "") turns llm.EnableCacheManager and llm.EnableRemoteCacheAccessible on
/// unless given; llm.TransferBackend needs the cache manager, remote-accessible caches (on unless
/// given) and llm.listenIpInfo (§1, hixl v2/llm_datadist.py _setup_engine_option).
EngineOptions parse_engine_options(const std::map<std::string, std::string>& options);

/// Parses a memory pool JSON object (§5): memory_size > 0 required, page_shift in [10, 31)
/// (default 16), a host pool at most kMaxHostMemPoolBytes. LLMException(LLM_PARAM_INVALID).
MemPoolConfig parse_mem_pool_config(const std::string& option_key, const std::string& json,
                                    bool host);

}  // namespace kvsim::impl
