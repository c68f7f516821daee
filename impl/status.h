// LLMStatusCode: the status codes of llm_datadist with the real library's values (spec §6).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace kvsim::impl {

/// Base of the LLM error numbers, GE_ERRORNO(runtime 1, type 1, level 0, sysid 8, modid 11) (§6).
inline constexpr std::int64_t kLlmErrorBase = 0x5010B000;

/// Status codes; names and values as Python's `LLMStatusCode` and C++ `llm_error_codes.h` (§6).
enum class LLMStatusCode : std::int64_t {
  LLM_SUCCESS = 0,
  LLM_FAILED = 0xFFFFFFFF,
  LLM_UNKNOWN_ERROR = -1,
  LLM_WAIT_PROCESS_TIMEOUT = kLlmErrorBase + 1,
  LLM_KV_CACHE_NOT_EXIST = kLlmErrorBase + 2,
  LLM_REPEAT_REQUEST = kLlmErrorBase + 3,
  LLM_REQUEST_ALREADY_COMPLETED = kLlmErrorBase + 4,
  LLM_PARAM_INVALID = kLlmErrorBase + 5,
  LLM_ENGINE_FINALIZED = kLlmErrorBase + 6,
  LLM_NOT_YET_LINK = kLlmErrorBase + 7,
  LLM_ALREADY_LINK = kLlmErrorBase + 8,
  LLM_LINK_FAILED = kLlmErrorBase + 9,
  LLM_UNLINK_FAILED = kLlmErrorBase + 10,
  LLM_NOTIFY_PROMPT_UNLINK_FAILED = kLlmErrorBase + 11,
  LLM_CLUSTER_NUM_EXCEED_LIMIT = kLlmErrorBase + 12,
  LLM_PROCESSING_LINK = kLlmErrorBase + 13,
  LLM_DEVICE_OUT_OF_MEMORY = kLlmErrorBase + 14,
  LLM_PREFIX_ALREADY_EXIST = kLlmErrorBase + 15,
  LLM_PREFIX_NOT_EXIST = kLlmErrorBase + 16,
  LLM_SEQ_LENOVERLIMIT = kLlmErrorBase + 17,
  LLM_NO_FREE_BLOCK = kLlmErrorBase + 18,
  LLM_BLOCKS_OUT_OF_MEMORY = kLlmErrorBase + 19,
  LLM_CACHE_INCOMPATIBLE = kLlmErrorBase + 20,       ///< C++ only (§6).
  LLM_CACHE_KEY_ALREADY_EXIST = kLlmErrorBase + 21,  ///< C++ only (§6).
  LLM_COPY_CACHE_FAILED = kLlmErrorBase + 22,        ///< C++ only (§6).
  LLM_CACHE_ID_ALREADY_EXIST = kLlmErrorBase + 23,   ///< C++ only (§6).
  LLM_EXIST_LINK = kLlmErrorBase + 24,
  LLM_FEATURE_NOT_ENABLED = kLlmErrorBase + 25,
  LLM_TIMEOUT = kLlmErrorBase + 26,
  LLM_LINK_BUSY = kLlmErrorBase + 27,
  LLM_OUT_OF_MEMORY = kLlmErrorBase + 28,
  LLM_DEVICE_MEM_ERROR = 507053,
  LLM_SUSPECT_REMOTE_ERROR = 507057,
};

/// The numeric value of a code.
constexpr std::int64_t to_int(LLMStatusCode code) {
  return static_cast<std::int64_t>(code);
}

/// The enum name ("LLM_PARAM_INVALID"); the C++-only codes 20–23 give their C++ names.
std::string_view to_string(LLMStatusCode code);

/// False only for the C++-only codes 20–23, which Python's enum lacks (§6).
bool in_python_enum(LLMStatusCode code);

/// Python's `code_2_status`: a raw C++ return value as an LLMStatusCode. Values missing from
/// Python's table — any unknown value, the C++-only 20–23 and -1 — map to LLM_FAILED (§2.3).
LLMStatusCode code_2_status(std::int64_t raw);

/// The enumerator with exactly this value, if there is one (C++ view, includes 20–23).
std::optional<LLMStatusCode> status_from_value(std::int64_t value);

/// Every enumerator, in declaration order.
const std::vector<LLMStatusCode>& all_status_codes();

}  // namespace kvsim::impl
