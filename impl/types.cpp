#include "impl/types.h"

#include <arpa/inet.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cstring>
#include <limits>

namespace kvsim::impl {

std::string_view to_string(LLMRole role) {
  switch (role) {
    case LLMRole::PROMPT:
      return "PROMPT";
    case LLMRole::DECODER:
      return "DECODER";
    case LLMRole::MIX:
      return "MIX";
  }
  return "?";
}

std::string_view to_string(Placement placement) {
  switch (placement) {
    case Placement::HOST:
      return "HOST";
    case Placement::DEVICE:
      return "DEVICE";
  }
  return "?";
}

std::string_view to_string(Memtype memtype) {
  switch (memtype) {
    case Memtype::MEM_TYPE_DEVICE:
      return "MEM_TYPE_DEVICE";
    case Memtype::MEM_TYPE_HOST:
      return "MEM_TYPE_HOST";
  }
  return "?";
}

std::string_view to_string(RegisterMemStatus status) {
  switch (status) {
    case RegisterMemStatus::OK:
      return "OK";
    case RegisterMemStatus::PREPARING:
      return "PREPARING";
    case RegisterMemStatus::FAILED:
      return "FAILED";
  }
  return "?";
}

std::string_view to_string(DataType data_type) {
  switch (data_type) {
    case DataType::DT_FLOAT:
      return "DT_FLOAT";
    case DataType::DT_FLOAT16:
      return "DT_FLOAT16";
    case DataType::DT_INT8:
      return "DT_INT8";
    case DataType::DT_INT32:
      return "DT_INT32";
    case DataType::DT_UINT8:
      return "DT_UINT8";
    case DataType::DT_INT16:
      return "DT_INT16";
    case DataType::DT_UINT16:
      return "DT_UINT16";
    case DataType::DT_UINT32:
      return "DT_UINT32";
    case DataType::DT_INT64:
      return "DT_INT64";
    case DataType::DT_UINT64:
      return "DT_UINT64";
    case DataType::DT_DOUBLE:
      return "DT_DOUBLE";
    case DataType::DT_BOOL:
      return "DT_BOOL";
    case DataType::DT_STRING:
      return "DT_STRING";
    case DataType::DT_BF16:
      return "DT_BF16";
  }
  return "?";
}

bool is_valid(LLMRole role) {
  return to_string(role) != "?";
}
bool is_valid(Placement placement) {
  return to_string(placement) != "?";
}
bool is_valid(DataType data_type) {
  return to_string(data_type) != "?";
}

RegisterMemStatus register_mem_status_from_int(std::int64_t value) {
  switch (value) {
    case 0:
      return RegisterMemStatus::OK;
    case 1:
      return RegisterMemStatus::PREPARING;
    default:
      return RegisterMemStatus::FAILED;
  }
}

std::uint32_t element_size(DataType data_type) {
  switch (data_type) {
    case DataType::DT_INT8:
    case DataType::DT_UINT8:
    case DataType::DT_BOOL:
      return 1;
    case DataType::DT_FLOAT16:
    case DataType::DT_BF16:
    case DataType::DT_INT16:
    case DataType::DT_UINT16:
      return 2;
    case DataType::DT_FLOAT:
    case DataType::DT_INT32:
    case DataType::DT_UINT32:
      return 4;
    case DataType::DT_INT64:
    case DataType::DT_UINT64:
    case DataType::DT_DOUBLE:
      return 8;
    case DataType::DT_STRING:
      return 16;
  }
  throw_param_invalid(
      "data_type",
      "data type " + std::to_string(static_cast<std::int32_t>(data_type)) + " is not supported");
}

std::int64_t LayerRange::size() const {
  if (step > 0 && stop > start) return (stop - start + step - 1) / step;
  if (step < 0 && start > stop) return (start - stop - step - 1) / -step;
  return 0;
}

bool LayerRange::contains(std::int64_t i) const {
  if (step > 0) return i >= start && i < stop && (i - start) % step == 0;
  if (step < 0) return i <= start && i > stop && (start - i) % -step == 0;
  return false;
}

std::string to_string(const LayerRange& range) {
  std::string text = "range(" + std::to_string(range.start) + ", " + std::to_string(range.stop);
  if (range.step != 1) text += ", " + std::to_string(range.step);
  return text + ")";
}

void check_layer_range(const std::string& argument, const std::optional<LayerRange>& range,
                       bool allow_none) {
  if (!range) {
    if (allow_none) return;
    throw_none(argument, "range");
  }
  if (range->step != 1) {
    throw_param_invalid(argument, "step must be 1, got " + std::to_string(range->step));
  }
  if (range->start < 0 || range->start >= range->stop) {
    throw_param_invalid(argument, "must satisfy 0 <= start < stop, got " + to_string(*range));
  }
}

CacheDesc::CacheDesc(std::int64_t num_tensors, std::vector<std::int64_t> shape, DataType data_type,
                     Placement placement, std::int64_t batch_dim_index,
                     std::int64_t seq_len_dim_index, std::optional<std::string> kv_tensor_format)
    : shape_(std::move(shape)),
      data_type_(data_type),
      placement_(placement),
      batch_dim_index_(batch_dim_index),
      seq_len_dim_index_(seq_len_dim_index),
      kv_tensor_format_(std::move(kv_tensor_format)) {
  check_uint32("cache_desc.num_tensors", num_tensors);
  num_tensors_ = static_cast<std::uint32_t>(num_tensors);
  if (!is_valid(data_type)) {
    throw TypeError("cache_desc.data_type",
                    "must be a DataType, got " + std::to_string(static_cast<int>(data_type)));
  }
  if (!is_valid(placement)) {
    throw TypeError("cache_desc.placement",
                    "must be a Placement, got " + std::to_string(static_cast<int>(placement)));
  }
  check_int32("cache_desc.seq_len_dim_index", seq_len_dim_index);
  const auto rank = static_cast<std::int64_t>(shape_.size());
  if (batch_dim_index < 0 || batch_dim_index >= rank) {
    throw_param_invalid(
        "cache_desc.batch_dim_index",
        std::to_string(batch_dim_index) + " out of range [0, " + std::to_string(rank) + ")");
  }
  if (seq_len_dim_index != -1 && (seq_len_dim_index < 0 || seq_len_dim_index >= rank)) {
    throw_param_invalid(
        "cache_desc.seq_len_dim_index",
        std::to_string(seq_len_dim_index) + " must be -1 or in [0, " + std::to_string(rank) + ")");
  }
}

std::uint64_t CacheDesc::size() const {
  // Python raises this LLMException without a status code; kvsim gives it LLM_PARAM_INVALID,
  // the code of the C++ CalcTensorMemSize that fails underneath (§2.2, [I]).
  std::int64_t bytes = element_size(data_type_);
  for (const std::int64_t dim : shape_) {
    if (dim <= 0) {
      throw_param_invalid("cache_desc.shape",
                          "dim " + std::to_string(dim) + " must be > 0 to compute the size");
    }
    if (bytes > std::numeric_limits<std::int64_t>::max() / dim) {
      throw_param_invalid("cache_desc.shape", "tensor size overflows int64");
    }
    bytes *= dim;
  }
  return static_cast<std::uint64_t>(bytes);
}

CacheKeyByIdAndIndex::CacheKeyByIdAndIndex(std::uint64_t cluster_id, std::int64_t cache_id,
                                           std::int64_t batch_index)
    : cluster_id_(cluster_id), cache_id_(cache_id) {
  check_uint32("batch_index", batch_index);
  batch_index_ = static_cast<std::uint32_t>(batch_index);
}

std::uint64_t cluster_id_of(const TransferCacheKey& key) {
  if (const auto* blocks = std::get_if<BlocksCacheKey>(&key)) return blocks->cluster_id;
  return std::get<CacheKeyByIdAndIndex>(key).cluster_id();
}

TransferConfig::TransferConfig(std::uint64_t dst_cluster_id, std::vector<std::uint64_t> dst_addrs,
                               std::optional<LayerRange> src_layer_range,
                               std::int64_t src_batch_index)
    : dst_cluster_id_(dst_cluster_id), dst_addrs_(std::move(dst_addrs)) {
  set_src_layer_range(src_layer_range);
  set_src_batch_index(src_batch_index);
}

void TransferConfig::set_src_layer_range(std::optional<LayerRange> range) {
  check_layer_range("src_layer_range", range, /*allow_none=*/true);
  src_layer_range_ = range;
}

void TransferConfig::set_src_batch_index(std::int64_t index) {
  check_uint32("src_batch_index", index);
  src_batch_index_ = static_cast<std::uint32_t>(index);
}

TransferWithCacheKeyConfig::TransferWithCacheKeyConfig(TransferCacheKey cache_key,
                                                       std::optional<LayerRange> src_layer_range,
                                                       std::optional<LayerRange> dst_layer_range,
                                                       std::int64_t src_batch_index)
    : cache_key_(std::move(cache_key)), dst_cluster_id_(cluster_id_of(cache_key_)) {
  check_layer_range("src_layer_range", src_layer_range, /*allow_none=*/false);
  check_layer_range("dst_layer_range", dst_layer_range, /*allow_none=*/false);
  // The Python source compares against src.start on both sides; the documented rule, equal
  // lengths (§2.2), is what kvsim checks.
  if (src_layer_range->size() != dst_layer_range->size()) {
    throw_param_invalid("dst_layer_range", "length " + std::to_string(dst_layer_range->size()) +
                                               " differs from src_layer_range length " +
                                               std::to_string(src_layer_range->size()));
  }
  src_layer_range_ = src_layer_range;
  dst_layer_range_ = dst_layer_range;
  set_src_batch_index(src_batch_index);
}

void TransferWithCacheKeyConfig::set_src_layer_range(std::optional<LayerRange> range) {
  check_layer_range("src_layer_range", range, /*allow_none=*/true);
  src_layer_range_ = range;
}

void TransferWithCacheKeyConfig::set_dst_layer_range(std::optional<LayerRange> range) {
  check_layer_range("dst_layer_range", range, /*allow_none=*/true);
  dst_layer_range_ = range;
}

void TransferWithCacheKeyConfig::set_src_batch_index(std::int64_t index) {
  check_uint32("src_batch_index", index);
  if (std::holds_alternative<BlocksCacheKey>(cache_key_) && index != 0) {
    throw_param_invalid("src_batch_index", "must be 0 when cache_key is a BlocksCacheKey, got " +
                                               std::to_string(index));
  }
  src_batch_index_ = static_cast<std::uint32_t>(index);
}

std::string_view type_name(const AnyTransferConfig& config) {
  return std::holds_alternative<TransferConfig>(config) ? "TransferConfig"
                                                        : "TransferWithCacheKeyConfig";
}

const std::optional<LayerRange>& src_layer_range_of(const AnyTransferConfig& config) {
  return std::visit(
      [](const auto& c) -> const std::optional<LayerRange>& { return c.src_layer_range(); },
      config);
}

std::uint64_t dst_cluster_id_of(const AnyTransferConfig& config) {
  return std::visit([](const auto& c) { return c.dst_cluster_id(); }, config);
}

std::uint32_t src_batch_index_of(const AnyTransferConfig& config) {
  return std::visit([](const auto& c) { return c.src_batch_index(); }, config);
}

std::uint32_t ip_to_int(const std::string& ip) {
  in_addr addr{};
  if (ip.find('\0') != std::string::npos || ::inet_aton(ip.c_str(), &addr) == 0) {
    throw RuntimeError("ip", "Can not parse ip str: \"" + ip + "\"");
  }
  std::array<unsigned char, 4> bytes{};
  std::memcpy(bytes.data(), &addr.s_addr, bytes.size());
  return static_cast<std::uint32_t>(bytes[0]) | static_cast<std::uint32_t>(bytes[1]) << 8 |
         static_cast<std::uint32_t>(bytes[2]) << 16 | static_cast<std::uint32_t>(bytes[3]) << 24;
}

std::string int_to_ip(std::uint32_t ip) {
  return std::to_string(ip & 0xFF) + "." + std::to_string((ip >> 8) & 0xFF) + "." +
         std::to_string((ip >> 16) & 0xFF) + "." + std::to_string((ip >> 24) & 0xFF);
}

void LLMClusterInfo::set_remote_role_type(LLMRole role) {
  if (!is_valid(role)) {
    throw TypeError("remote_role_type",
                    "must be an LLMRole, got " + std::to_string(static_cast<int>(role)));
  }
  remote_role_type_ = role;
}

void LLMClusterInfo::append_local_ip_info(const std::string& ip, std::int64_t port) {
  check_uint16("port", port);
  local_.push_back({ip_to_int(ip), static_cast<std::uint16_t>(port)});
}

void LLMClusterInfo::append_local_ip_info(std::uint32_t ip, std::int64_t port) {
  check_uint16("port", port);
  local_.push_back({ip, static_cast<std::uint16_t>(port)});
}

void LLMClusterInfo::append_remote_ip_info(const std::string& ip, std::int64_t port) {
  check_uint16("port", port);
  remote_.push_back({ip_to_int(ip), static_cast<std::uint16_t>(port)});
}

void LLMClusterInfo::append_remote_ip_info(std::uint32_t ip, std::int64_t port) {
  check_uint16("port", port);
  remote_.push_back({ip, static_cast<std::uint16_t>(port)});
}

void LLMConfig::set_device_id(std::int64_t device_id) {
  if (device_id < 0) {
    throw_param_invalid(
        "device_id", "should be greater than or equal to zero, got " + std::to_string(device_id));
  }
  check_int32("device_id", device_id);
  device_id_ = static_cast<std::int32_t>(device_id);
}

void LLMConfig::set_sync_kv_timeout(std::int64_t millis) {
  if (millis <= 0) {
    throw_param_invalid("sync_kv_timeout",
                        "should be greater than zero, got " + std::to_string(millis));
  }
  check_int32("sync_kv_timeout", millis);
  sync_kv_timeout_ = std::to_string(millis);
}

namespace {

bool all_digits(const std::string& text) {
  if (text.empty()) return false;
  for (const char c : text) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

// Parses a whole string as a decimal integer; nullopt if it is not one or overflows.
std::optional<std::int64_t> parse_int(const std::string& text) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

void LLMConfig::set_sync_kv_timeout(const std::string& millis) {
  if (!all_digits(millis)) {
    throw_param_invalid("sync_kv_timeout", "must be digit, got \"" + millis + "\"");
  }
  const std::optional<std::int64_t> value = parse_int(millis);
  if (!value) throw ValueError("sync_kv_timeout", millis + " is not a int32 value");
  if (*value <= 0) throw_param_invalid("sync_kv_timeout", "should be greater than zero");
  check_int32("sync_kv_timeout", *value);
  sync_kv_timeout_ = millis;
}

void LLMConfig::set_link_total_time(std::int64_t seconds) {
  if (seconds < 0 || seconds > static_cast<std::int64_t>(UINT32_MAX)) {
    throw_param_invalid("link_total_time",
                        "should be an integer between [0, 2^32-1], got " + std::to_string(seconds));
  }
  link_total_time_ = seconds;
}

void LLMConfig::set_link_retry_count(std::int64_t count) {
  if (count < 1 || count > 100) {
    throw_param_invalid("link_retry_count",
                        "should be an integer between [1, 100], got " + std::to_string(count));
  }
  link_retry_count_ = count;
}

void LLMConfig::set_rdma_traffic_class(std::int64_t value) {
  check_uint32("rdma_traffic_class", value);
  rdma_traffic_class_ = value;
}

void LLMConfig::set_rdma_service_level(std::int64_t value) {
  check_uint32("rdma_service_level", value);
  rdma_service_level_ = value;
}

void LLMConfig::set_mem_utilization(double value) {
  if (!(value >= 0.0 && value <= 1.0)) {
    throw_param_invalid("mem_utilization", "must be in range [0,1], got " + std::to_string(value));
  }
  mem_utilization_ = value;
}

namespace {

// Python's str(float) for values in [0, 1]: the shortest round-trip digits, with ".0" added
// when the result would otherwise look like an integer.
std::string python_float_str(double value) {
  std::array<char, 64> buf{};
  const auto [ptr, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), value);
  std::string text(buf.data(), ptr);
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

}  // namespace

std::map<std::string, std::string> LLMConfig::generate_options() const {
  std::map<std::string, std::string> options = ge_options_;
  if (device_id_) {
    options[kOptionDeviceId] = std::to_string(*device_id_);
    options[kOptionSessionDeviceId] = std::to_string(*device_id_);
  }
  if (sync_kv_timeout_) options[kOptionSyncKvCacheWaitTime] = *sync_kv_timeout_;
  if (!deploy_res_path_.empty()) options[kOptionDeployResPath] = deploy_res_path_;
  if (!buf_pool_cfg_.empty()) options[kOptionBufPoolCfg] = buf_pool_cfg_;
  if (!mem_pool_cfg_.empty()) options[kOptionMemPoolConfig] = mem_pool_cfg_;
  if (!host_mem_pool_cfg_.empty()) options[kOptionHostMemPoolConfig] = host_mem_pool_cfg_;
  if (enable_cache_manager_)
    options[kOptionEnableCacheManager] = *enable_cache_manager_ ? "1" : "0";
  if (enable_remote_cache_accessible_) {
    options[kOptionEnableRemoteCacheAccessible] = *enable_remote_cache_accessible_ ? "1" : "0";
  }
  if (!listen_ip_info_.empty()) options[kOptionListenIpInfo] = listen_ip_info_;
  if (link_total_time_) options[kOptionLinkTotalTime] = std::to_string(*link_total_time_);
  if (link_retry_count_) options[kOptionLinkRetryCount] = std::to_string(*link_retry_count_);
  if (rdma_traffic_class_) options[kOptionRdmaTrafficClass] = std::to_string(*rdma_traffic_class_);
  if (rdma_service_level_) options[kOptionRdmaServiceLevel] = std::to_string(*rdma_service_level_);
  if (local_comm_res_) options[kOptionLocalCommRes] = *local_comm_res_;
  if (transfer_backend_) options[kOptionTransferBackend] = *transfer_backend_;
  if (global_resource_config_) options[kOptionGlobalResourceConfig] = *global_resource_config_;
  if (output_max_size_) options[kOptionOutputMaxSize] = std::to_string(*output_max_size_);
  if (enable_switch_role_) options[kOptionEnableSwitchRole] = "1";
  options[kOptionMemoryUtilization] = python_float_str(mem_utilization_);
  return options;
}

namespace {

const std::string* find_option(const std::map<std::string, std::string>& options, const char* key) {
  const auto it = options.find(key);
  return it == options.end() ? nullptr : &it->second;
}

// An integer option in [lo, hi]; LLM_PARAM_INVALID naming the key otherwise.
std::int64_t int_option(const char* key, const std::string& text, std::int64_t lo,
                        std::int64_t hi) {
  const std::optional<std::int64_t> value = parse_int(text);
  if (!value || *value < lo || *value > hi) {
    throw_param_invalid(key, "\"" + text + "\" is not an integer in [" + std::to_string(lo) + ", " +
                                 std::to_string(hi) + "]");
  }
  return *value;
}

// A "0"/"1" flag; anything else fails as LLMUtils::ParseFlag does (LLM_ASSERT → LLM_FAILED).
std::optional<bool> flag_option(const std::map<std::string, std::string>& options,
                                const char* key) {
  const std::string* text = find_option(options, key);
  if (text == nullptr) return std::nullopt;
  if (*text != "0" && *text != "1") {
    throw LLMException(LLMStatusCode::LLM_FAILED, key,
                       "value \"" + *text + "\" is invalid, should be \"0\" or \"1\"");
  }
  return *text == "1";
}

}  // namespace

MemPoolConfig parse_mem_pool_config(const std::string& option_key, const std::string& json,
                                    bool host) {
  // A flat JSON object whose values are non-negative integers: all these options hold.
  std::map<std::string, std::string> fields;
  std::size_t pos = 0;
  const auto fail = [&](const std::string& why) -> void {
    throw_param_invalid(option_key, why + " in " + json);
  };
  const auto skip_ws = [&] {
    while (pos < json.size() && std::isspace(static_cast<unsigned char>(json[pos])) != 0) ++pos;
  };
  const auto expect = [&](char c) {
    skip_ws();
    if (pos >= json.size() || json[pos] != c) fail(std::string("expected '") + c + "'");
    ++pos;
  };
  expect('{');
  skip_ws();
  if (pos < json.size() && json[pos] == '}') {
    ++pos;
  } else {
    while (true) {
      expect('"');
      const std::size_t close = json.find('"', pos);
      if (close == std::string::npos) fail("unterminated key");
      const std::string key = json.substr(pos, close - pos);
      pos = close + 1;
      expect(':');
      skip_ws();
      const std::size_t start = pos;
      while (pos < json.size() && std::isdigit(static_cast<unsigned char>(json[pos])) != 0) ++pos;
      if (pos == start) fail("value of \"" + key + "\" is not a non-negative integer");
      fields[key] = json.substr(start, pos - start);
      skip_ws();
      if (pos < json.size() && json[pos] == ',') {
        ++pos;
        continue;
      }
      expect('}');
      break;
    }
  }
  skip_ws();
  if (pos != json.size()) fail("trailing characters");

  MemPoolConfig config;
  const auto size_it = fields.find("memory_size");
  if (size_it == fields.end()) fail("\"memory_size\" is required");
  config.memory_size = static_cast<std::uint64_t>(
      int_option(option_key.c_str(), size_it->second, 1, std::numeric_limits<std::int64_t>::max()));
  const auto shift_it = fields.find("page_shift");
  if (shift_it != fields.end()) {
    config.page_shift =
        static_cast<std::uint32_t>(int_option(option_key.c_str(), shift_it->second, 10, 30));
  }
  if (host && config.memory_size > kMaxHostMemPoolBytes) {
    fail("host memory_size " + std::to_string(config.memory_size) + " exceeds 20 GiB");
  }
  return config;
}

namespace {

// The rules of hixl src/python/llm_datadist/llm_datadist/v2/llm_datadist.py,
// LLMDataDist._setup_engine_option, and of TransferEngineFactory::Create
// (src/llm_datadist/transfer_engine/transfer_engine.cc).
void check_generation_options(const std::map<std::string, std::string>& options,
                              EngineOptions& out) {
  if (out.local_comm_res && !out.enable_cache_manager) {
    throw_param_invalid(kOptionLocalCommRes,
                        "llm.LocalCommRes is not supported when llm.EnableCacheManager is not "
                        "configured.");
  }
  if (find_option(options, kOptionTransferBackend) == nullptr) return;
  if (!out.enable_cache_manager) {
    throw_param_invalid(kOptionTransferBackend,
                        "llm.TransferBackend is not supported when llm.EnableCacheManager is not "
                        "configured.");
  }
  if (find_option(options, kOptionEnableRemoteCacheAccessible) == nullptr) {
    out.enable_remote_cache_accessible = true;
  }
  if (!out.enable_remote_cache_accessible) {
    throw_param_invalid(kOptionTransferBackend,
                        "llm.TransferBackend is not supported when llm.EnableRemoteCacheAccessible "
                        "is not enable.");
  }
  if (!out.listen_ip_info) {
    throw_param_invalid(kOptionTransferBackend,
                        "llm.TransferBackend is not supported when llm.listenIpInfo is not "
                        "configured.");
  }
  if (out.transfer_backend != kTransferBackendHixl) {
    throw LLMException(LLMStatusCode::LLM_FAILED, kOptionTransferBackend,
                       "Transfer backend:" + out.transfer_backend + " is not supported.");
  }
}

}  // namespace

EngineOptions parse_engine_options(const std::map<std::string, std::string>& options) {
  EngineOptions out;
  const std::string* device = find_option(options, kOptionDeviceId);
  const char* device_key = kOptionDeviceId;
  if (device == nullptr) {
    device = find_option(options, kOptionCppDeviceId);
    device_key = kOptionCppDeviceId;
  }
  // LLMUtils::ParseDeviceId: device 0 when the option is absent (v1 requires it: init checks).
  if (device != nullptr) {
    out.device_id = static_cast<std::int32_t>(
        int_option(device_key, *device, 0, std::numeric_limits<std::int32_t>::max()));
  }

  if (const std::string* text = find_option(options, kOptionSyncKvCacheWaitTime)) {
    if (!all_digits(*text)) {
      throw_param_invalid(kOptionSyncKvCacheWaitTime,
                          "\"" + *text + "\" is not a positive integer (milliseconds)");
    }
    out.sync_kv_timeout_ms = static_cast<std::int32_t>(
        int_option(kOptionSyncKvCacheWaitTime, *text, 1, std::numeric_limits<std::int32_t>::max()));
  }

  const std::string* listen = find_option(options, kOptionListenIpInfo);
  const char* listen_key = kOptionListenIpInfo;
  if (listen == nullptr) {
    listen = find_option(options, kOptionCppListenIpInfo);
    listen_key = kOptionCppListenIpInfo;
  }
  if (listen != nullptr) {
    const std::size_t colon = listen->find(':');
    if (colon == std::string::npos || listen->find(':', colon + 1) != std::string::npos) {
      throw_param_invalid(listen_key, "\"" + *listen + "\" is invalid, expect ip:port");
    }
    const std::string ip = listen->substr(0, colon);
    in_addr parsed{};
    if (::inet_pton(AF_INET, ip.c_str(), &parsed) != 1) {
      throw_param_invalid(listen_key, "\"" + ip + "\" is not a valid ip address");
    }
    // The C++ parser admits ports up to 2**32-1; kvsim keeps them to uint16 like
    // LLMClusterInfo does ([I], §5).
    const auto port = int_option(listen_key, listen->substr(colon + 1), 0, 65535);
    out.listen_ip_info = IpInfo{ip_to_int(ip), static_cast<std::uint16_t>(port)};
  }

  if (const std::string* text = find_option(options, kOptionLocalCommRes)) {
    out.local_comm_res = *text;
  }
  // local_comm_res turns cache manager and remote-accessible on unless set explicitly (§5).
  const bool comm_res = out.local_comm_res.has_value();
  out.enable_cache_manager = flag_option(options, kOptionEnableCacheManager).value_or(comm_res);
  out.enable_remote_cache_accessible =
      flag_option(options, kOptionEnableRemoteCacheAccessible).value_or(comm_res);
  out.enable_switch_role = flag_option(options, kOptionEnableSwitchRole).value_or(false);

  if (const std::string* text = find_option(options, kOptionMemPoolConfig)) {
    out.mem_pool = parse_mem_pool_config(kOptionMemPoolConfig, *text, /*host=*/false);
  }
  if (const std::string* text = find_option(options, kOptionHostMemPoolConfig)) {
    out.host_mem_pool = parse_mem_pool_config(kOptionHostMemPoolConfig, *text, /*host=*/true);
  }
  if (const std::string* text = find_option(options, kOptionLinkTotalTime)) {
    const auto seconds = int_option(kOptionLinkTotalTime, *text, 0, UINT32_MAX);
    out.link_total_time_s =
        seconds == 0 ? kHcclConnectTimeoutS : static_cast<std::uint32_t>(seconds);
  }
  if (const std::string* text = find_option(options, kOptionLinkRetryCount)) {
    out.link_retry_count =
        static_cast<std::uint32_t>(int_option(kOptionLinkRetryCount, *text, 1, 100));
  }
  if (const std::string* text = find_option(options, kOptionRdmaTrafficClass)) {
    const auto value = int_option(kOptionRdmaTrafficClass, *text, 0, 255);
    if (value % 4 != 0) {
      throw_param_invalid(kOptionRdmaTrafficClass, *text + " is not a multiple of 4");
    }
    out.rdma_traffic_class = static_cast<std::uint32_t>(value);
  }
  if (const std::string* text = find_option(options, kOptionRdmaServiceLevel)) {
    out.rdma_service_level =
        static_cast<std::uint32_t>(int_option(kOptionRdmaServiceLevel, *text, 0, 7));
  }
  if (const std::string* text = find_option(options, kOptionTransferBackend)) {
    out.transfer_backend = *text;
  }
  check_generation_options(options, out);
  if (const std::string* text = find_option(options, kOptionGlobalResourceConfig)) {
    out.global_resource_config = *text;
  }
  return out;
}

}  // namespace kvsim::impl
