// HCCL rank tables (spec §5 llm.LocalCommRes, §8 vLLM-Ascend): the JSON that `link` receives,
// version 1.0 or 1.2, `server_list[].device[]` with `device_id`, `device_ip` and `rank_id`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvsim::impl {

/// One device of a rank table.
struct RankTableDevice {
  std::uint32_t rank_id = 0;
  std::string device_ip;
  std::string device_id;  ///< The device's index in its server, as written (not checked).
  std::string server_id;
};

/// Parses a rank table. LLMException(LLM_PARAM_INVALID) naming the field ("rank_table",
/// "rank_table.server_list[1].device[0].rank_id") for bad JSON, a version other than "1.0" or
/// "1.2", a missing or mistyped field, or a rank id given twice. rank_id and device_id may be
/// strings of digits or ints (HCCL writes strings); super_device_id, host_ip, server_count,
/// status and super_pod_list are accepted and ignored ([I]: kvsim has no super pods).
std::vector<RankTableDevice> parse_rank_table(const std::string& text);

}  // namespace kvsim::impl
