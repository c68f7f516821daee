// The values the C++ API's calls carry (llm_datadist/llm_datadist.h, spec llm_datadist_cpp.md
// §2), as plain structs that the engine, the in-process library and the wire protocol of launched
// programs share. The public header's structs convert to these one to one.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kvsim::cpp {

/// ge::Status / llm_datadist::Status: the LLM_* codes, LLMStatusCode's values.
using Status = std::uint32_t;
/// Options of Initialize and SetRole, as strings.
using Options = std::map<std::string, std::string>;

/// llm_datadist::IpInfo.
struct IpAddress {
  std::string ip;
  std::uint16_t port = 0;
};

/// llm_datadist::ClusterInfo.
struct Cluster {
  std::uint64_t remote_cluster_id = 0;
  std::int32_t remote_role_type = 0;
  std::vector<IpAddress> local;
  std::vector<IpAddress> remote;
};

/// llm_datadist::CacheDesc (placement kHost = 0, kDevice = 1; data_type a ge::DataType).
struct Desc {
  std::uint32_t placement = 1;
  std::uint32_t num_tensors = 0;
  std::int32_t data_type = 28;  // DT_UNDEFINED
  std::vector<std::int64_t> shape;
};

/// llm_datadist::Cache: only some calls read more than cache_id.
struct CacheRef {
  std::int64_t cache_id = -1;
  std::vector<std::uint64_t> tensor_addrs;
  Desc desc;
};

/// llm_datadist::CacheIndex.
struct Index {
  std::uint64_t cluster_id = 0;
  std::int64_t cache_id = 0;
  std::uint32_t batch_index = 0;
};

/// llm_datadist::KvCacheExtParam: inclusive layer ranges, -1 for all layers.
struct ExtParam {
  std::int32_t src_first = -1;
  std::int32_t src_second = -1;
  std::int32_t dst_first = -1;
  std::int32_t dst_second = -1;
  std::uint8_t tensor_num_per_layer = 2;
};

}  // namespace kvsim::cpp
