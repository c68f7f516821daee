// LLMStatusCode values and mappings against the literal numbers of spec §6.
#include "impl/status.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

namespace kvsim::impl {
namespace {

struct Row {
  LLMStatusCode code;
  std::int64_t value;
  const char* name;
};

// The contract: spec §6, as literal decimal numbers (0x5010B000 = 1343270912).
const Row kSpecTable[] = {
    {LLMStatusCode::LLM_SUCCESS, 0, "LLM_SUCCESS"},
    {LLMStatusCode::LLM_FAILED, 4294967295, "LLM_FAILED"},
    {LLMStatusCode::LLM_UNKNOWN_ERROR, -1, "LLM_UNKNOWN_ERROR"},
    {LLMStatusCode::LLM_WAIT_PROCESS_TIMEOUT, 1343270913, "LLM_WAIT_PROCESS_TIMEOUT"},
    {LLMStatusCode::LLM_KV_CACHE_NOT_EXIST, 1343270914, "LLM_KV_CACHE_NOT_EXIST"},
    {LLMStatusCode::LLM_REPEAT_REQUEST, 1343270915, "LLM_REPEAT_REQUEST"},
    {LLMStatusCode::LLM_REQUEST_ALREADY_COMPLETED, 1343270916, "LLM_REQUEST_ALREADY_COMPLETED"},
    {LLMStatusCode::LLM_PARAM_INVALID, 1343270917, "LLM_PARAM_INVALID"},
    {LLMStatusCode::LLM_ENGINE_FINALIZED, 1343270918, "LLM_ENGINE_FINALIZED"},
    {LLMStatusCode::LLM_NOT_YET_LINK, 1343270919, "LLM_NOT_YET_LINK"},
    {LLMStatusCode::LLM_ALREADY_LINK, 1343270920, "LLM_ALREADY_LINK"},
    {LLMStatusCode::LLM_LINK_FAILED, 1343270921, "LLM_LINK_FAILED"},
    {LLMStatusCode::LLM_UNLINK_FAILED, 1343270922, "LLM_UNLINK_FAILED"},
    {LLMStatusCode::LLM_NOTIFY_PROMPT_UNLINK_FAILED, 1343270923, "LLM_NOTIFY_PROMPT_UNLINK_FAILED"},
    {LLMStatusCode::LLM_CLUSTER_NUM_EXCEED_LIMIT, 1343270924, "LLM_CLUSTER_NUM_EXCEED_LIMIT"},
    {LLMStatusCode::LLM_PROCESSING_LINK, 1343270925, "LLM_PROCESSING_LINK"},
    {LLMStatusCode::LLM_DEVICE_OUT_OF_MEMORY, 1343270926, "LLM_DEVICE_OUT_OF_MEMORY"},
    {LLMStatusCode::LLM_PREFIX_ALREADY_EXIST, 1343270927, "LLM_PREFIX_ALREADY_EXIST"},
    {LLMStatusCode::LLM_PREFIX_NOT_EXIST, 1343270928, "LLM_PREFIX_NOT_EXIST"},
    {LLMStatusCode::LLM_SEQ_LENOVERLIMIT, 1343270929, "LLM_SEQ_LENOVERLIMIT"},
    {LLMStatusCode::LLM_NO_FREE_BLOCK, 1343270930, "LLM_NO_FREE_BLOCK"},
    {LLMStatusCode::LLM_BLOCKS_OUT_OF_MEMORY, 1343270931, "LLM_BLOCKS_OUT_OF_MEMORY"},
    {LLMStatusCode::LLM_CACHE_INCOMPATIBLE, 1343270932, "LLM_CACHE_INCOMPATIBLE"},
    {LLMStatusCode::LLM_CACHE_KEY_ALREADY_EXIST, 1343270933, "LLM_CACHE_KEY_ALREADY_EXIST"},
    {LLMStatusCode::LLM_COPY_CACHE_FAILED, 1343270934, "LLM_COPY_CACHE_FAILED"},
    {LLMStatusCode::LLM_CACHE_ID_ALREADY_EXIST, 1343270935, "LLM_CACHE_ID_ALREADY_EXIST"},
    {LLMStatusCode::LLM_EXIST_LINK, 1343270936, "LLM_EXIST_LINK"},
    {LLMStatusCode::LLM_FEATURE_NOT_ENABLED, 1343270937, "LLM_FEATURE_NOT_ENABLED"},
    {LLMStatusCode::LLM_TIMEOUT, 1343270938, "LLM_TIMEOUT"},
    {LLMStatusCode::LLM_LINK_BUSY, 1343270939, "LLM_LINK_BUSY"},
    {LLMStatusCode::LLM_OUT_OF_MEMORY, 1343270940, "LLM_OUT_OF_MEMORY"},
    {LLMStatusCode::LLM_DEVICE_MEM_ERROR, 507053, "LLM_DEVICE_MEM_ERROR"},
    {LLMStatusCode::LLM_SUSPECT_REMOTE_ERROR, 507057, "LLM_SUSPECT_REMOTE_ERROR"},
};

TEST(StatusCode, ValuesAndNamesMatchSpecTable) {
  for (const Row& row : kSpecTable) {
    EXPECT_EQ(to_int(row.code), row.value) << row.name;
    EXPECT_EQ(std::string(to_string(row.code)), row.name);
  }
}

TEST(StatusCode, EveryEnumeratorIsInTheSpecTable) {
  EXPECT_EQ(all_status_codes().size(), std::size(kSpecTable));
  std::set<std::int64_t> values;
  for (LLMStatusCode code : all_status_codes()) values.insert(to_int(code));
  EXPECT_EQ(values.size(), all_status_codes().size()) << "values must be distinct";
}

TEST(StatusCode, LlmCodesAreBasePlusN) {
  EXPECT_EQ(kLlmErrorBase, 1343270912);
  EXPECT_EQ(to_int(LLMStatusCode::LLM_TIMEOUT), 0x5010B01A);
  EXPECT_EQ(to_int(LLMStatusCode::LLM_OUT_OF_MEMORY) - kLlmErrorBase, 28);
}

TEST(StatusCode, OnlyCodes20To23AreMissingFromPython) {
  for (LLMStatusCode code : all_status_codes()) {
    const std::int64_t n = to_int(code) - kLlmErrorBase;
    EXPECT_EQ(in_python_enum(code), !(n >= 20 && n <= 23)) << to_string(code);
  }
}

TEST(StatusCode, Code2StatusMapsKnownPythonCodesToThemselves) {
  for (LLMStatusCode code : all_status_codes()) {
    if (!in_python_enum(code) || code == LLMStatusCode::LLM_UNKNOWN_ERROR) continue;
    EXPECT_EQ(code_2_status(to_int(code)), code) << to_string(code);
  }
}

TEST(StatusCode, Code2StatusMapsUnknownToFailed) {
  EXPECT_EQ(code_2_status(12345), LLMStatusCode::LLM_FAILED);
  EXPECT_EQ(code_2_status(1343270912 + 99), LLMStatusCode::LLM_FAILED);
  EXPECT_EQ(code_2_status(1343270932), LLMStatusCode::LLM_FAILED);  // C++-only 20
  EXPECT_EQ(code_2_status(1343270935), LLMStatusCode::LLM_FAILED);  // C++-only 23
  EXPECT_EQ(code_2_status(-1), LLMStatusCode::LLM_FAILED);          // not in Python's table
  EXPECT_EQ(code_2_status(0), LLMStatusCode::LLM_SUCCESS);
  EXPECT_EQ(code_2_status(4294967295), LLMStatusCode::LLM_FAILED);
  EXPECT_EQ(code_2_status(507057), LLMStatusCode::LLM_SUSPECT_REMOTE_ERROR);
}

TEST(StatusCode, StatusFromValueFindsEveryEnumeratorOnly) {
  EXPECT_EQ(status_from_value(1343270935), LLMStatusCode::LLM_CACHE_ID_ALREADY_EXIST);
  EXPECT_EQ(status_from_value(-1), LLMStatusCode::LLM_UNKNOWN_ERROR);
  EXPECT_FALSE(status_from_value(7).has_value());
}

}  // namespace
}  // namespace kvsim::impl
