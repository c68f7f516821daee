#include "impl/status.h"

namespace kvsim::impl {

std::string_view to_string(LLMStatusCode code) {
  switch (code) {
    case LLMStatusCode::LLM_SUCCESS:
      return "LLM_SUCCESS";
    case LLMStatusCode::LLM_FAILED:
      return "LLM_FAILED";
    case LLMStatusCode::LLM_UNKNOWN_ERROR:
      return "LLM_UNKNOWN_ERROR";
    case LLMStatusCode::LLM_WAIT_PROCESS_TIMEOUT:
      return "LLM_WAIT_PROCESS_TIMEOUT";
    case LLMStatusCode::LLM_KV_CACHE_NOT_EXIST:
      return "LLM_KV_CACHE_NOT_EXIST";
    case LLMStatusCode::LLM_REPEAT_REQUEST:
      return "LLM_REPEAT_REQUEST";
    case LLMStatusCode::LLM_REQUEST_ALREADY_COMPLETED:
      return "LLM_REQUEST_ALREADY_COMPLETED";
    case LLMStatusCode::LLM_PARAM_INVALID:
      return "LLM_PARAM_INVALID";
    case LLMStatusCode::LLM_ENGINE_FINALIZED:
      return "LLM_ENGINE_FINALIZED";
    case LLMStatusCode::LLM_NOT_YET_LINK:
      return "LLM_NOT_YET_LINK";
    case LLMStatusCode::LLM_ALREADY_LINK:
      return "LLM_ALREADY_LINK";
    case LLMStatusCode::LLM_LINK_FAILED:
      return "LLM_LINK_FAILED";
    case LLMStatusCode::LLM_UNLINK_FAILED:
      return "LLM_UNLINK_FAILED";
    case LLMStatusCode::LLM_NOTIFY_PROMPT_UNLINK_FAILED:
      return "LLM_NOTIFY_PROMPT_UNLINK_FAILED";
    case LLMStatusCode::LLM_CLUSTER_NUM_EXCEED_LIMIT:
      return "LLM_CLUSTER_NUM_EXCEED_LIMIT";
    case LLMStatusCode::LLM_PROCESSING_LINK:
      return "LLM_PROCESSING_LINK";
    case LLMStatusCode::LLM_DEVICE_OUT_OF_MEMORY:
      return "LLM_DEVICE_OUT_OF_MEMORY";
    case LLMStatusCode::LLM_PREFIX_ALREADY_EXIST:
      return "LLM_PREFIX_ALREADY_EXIST";
    case LLMStatusCode::LLM_PREFIX_NOT_EXIST:
      return "LLM_PREFIX_NOT_EXIST";
    case LLMStatusCode::LLM_SEQ_LENOVERLIMIT:
      return "LLM_SEQ_LENOVERLIMIT";
    case LLMStatusCode::LLM_NO_FREE_BLOCK:
      return "LLM_NO_FREE_BLOCK";
    case LLMStatusCode::LLM_BLOCKS_OUT_OF_MEMORY:
      return "LLM_BLOCKS_OUT_OF_MEMORY";
    case LLMStatusCode::LLM_CACHE_INCOMPATIBLE:
      return "LLM_CACHE_INCOMPATIBLE";
    case LLMStatusCode::LLM_CACHE_KEY_ALREADY_EXIST:
      return "LLM_CACHE_KEY_ALREADY_EXIST";
    case LLMStatusCode::LLM_COPY_CACHE_FAILED:
      return "LLM_COPY_CACHE_FAILED";
    case LLMStatusCode::LLM_CACHE_ID_ALREADY_EXIST:
      return "LLM_CACHE_ID_ALREADY_EXIST";
    case LLMStatusCode::LLM_EXIST_LINK:
      return "LLM_EXIST_LINK";
    case LLMStatusCode::LLM_FEATURE_NOT_ENABLED:
      return "LLM_FEATURE_NOT_ENABLED";
    case LLMStatusCode::LLM_TIMEOUT:
      return "LLM_TIMEOUT";
    case LLMStatusCode::LLM_LINK_BUSY:
      return "LLM_LINK_BUSY";
    case LLMStatusCode::LLM_OUT_OF_MEMORY:
      return "LLM_OUT_OF_MEMORY";
    case LLMStatusCode::LLM_DEVICE_MEM_ERROR:
      return "LLM_DEVICE_MEM_ERROR";
    case LLMStatusCode::LLM_SUSPECT_REMOTE_ERROR:
      return "LLM_SUSPECT_REMOTE_ERROR";
  }
  return "LLM_FAILED";
}

bool in_python_enum(LLMStatusCode code) {
  switch (code) {
    case LLMStatusCode::LLM_CACHE_INCOMPATIBLE:
    case LLMStatusCode::LLM_CACHE_KEY_ALREADY_EXIST:
    case LLMStatusCode::LLM_COPY_CACHE_FAILED:
    case LLMStatusCode::LLM_CACHE_ID_ALREADY_EXIST:
      return false;
    default:
      return true;
  }
}

const std::vector<LLMStatusCode>& all_status_codes() {
  static const std::vector<LLMStatusCode> kAll = {
      LLMStatusCode::LLM_SUCCESS,
      LLMStatusCode::LLM_FAILED,
      LLMStatusCode::LLM_UNKNOWN_ERROR,
      LLMStatusCode::LLM_WAIT_PROCESS_TIMEOUT,
      LLMStatusCode::LLM_KV_CACHE_NOT_EXIST,
      LLMStatusCode::LLM_REPEAT_REQUEST,
      LLMStatusCode::LLM_REQUEST_ALREADY_COMPLETED,
      LLMStatusCode::LLM_PARAM_INVALID,
      LLMStatusCode::LLM_ENGINE_FINALIZED,
      LLMStatusCode::LLM_NOT_YET_LINK,
      LLMStatusCode::LLM_ALREADY_LINK,
      LLMStatusCode::LLM_LINK_FAILED,
      LLMStatusCode::LLM_UNLINK_FAILED,
      LLMStatusCode::LLM_NOTIFY_PROMPT_UNLINK_FAILED,
      LLMStatusCode::LLM_CLUSTER_NUM_EXCEED_LIMIT,
      LLMStatusCode::LLM_PROCESSING_LINK,
      LLMStatusCode::LLM_DEVICE_OUT_OF_MEMORY,
      LLMStatusCode::LLM_PREFIX_ALREADY_EXIST,
      LLMStatusCode::LLM_PREFIX_NOT_EXIST,
      LLMStatusCode::LLM_SEQ_LENOVERLIMIT,
      LLMStatusCode::LLM_NO_FREE_BLOCK,
      LLMStatusCode::LLM_BLOCKS_OUT_OF_MEMORY,
      LLMStatusCode::LLM_CACHE_INCOMPATIBLE,
      LLMStatusCode::LLM_CACHE_KEY_ALREADY_EXIST,
      LLMStatusCode::LLM_COPY_CACHE_FAILED,
      LLMStatusCode::LLM_CACHE_ID_ALREADY_EXIST,
      LLMStatusCode::LLM_EXIST_LINK,
      LLMStatusCode::LLM_FEATURE_NOT_ENABLED,
      LLMStatusCode::LLM_TIMEOUT,
      LLMStatusCode::LLM_LINK_BUSY,
      LLMStatusCode::LLM_OUT_OF_MEMORY,
      LLMStatusCode::LLM_DEVICE_MEM_ERROR,
      LLMStatusCode::LLM_SUSPECT_REMOTE_ERROR,
  };
  return kAll;
}

std::optional<LLMStatusCode> status_from_value(std::int64_t value) {
  for (LLMStatusCode code : all_status_codes()) {
    if (to_int(code) == value) return code;
  }
  return std::nullopt;
}

LLMStatusCode code_2_status(std::int64_t raw) {
  // Python's _code_2_status table holds every enum member except LLM_UNKNOWN_ERROR (§2.3).
  const std::optional<LLMStatusCode> code = status_from_value(raw);
  if (!code || !in_python_enum(*code) || *code == LLMStatusCode::LLM_UNKNOWN_ERROR) {
    return LLMStatusCode::LLM_FAILED;
  }
  return *code;
}

}  // namespace kvsim::impl
