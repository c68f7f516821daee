// The exception classes of §2.3 and the helpers that raise them.
#include "impl/errors.h"

#include <gtest/gtest.h>

#include <limits>
#include <type_traits>

#include "impl/tests/expect_error.h"

namespace kvsim::impl {
namespace {

using testing::Raises;
using testing::RaisesLLM;

TEST(Errors, HierarchyMirrorsPython) {
  static_assert(std::is_base_of_v<RuntimeError, LLMException>);
  static_assert(std::is_base_of_v<std::runtime_error, RuntimeError>);
  static_assert(std::is_base_of_v<std::invalid_argument, TypeError>);
  static_assert(std::is_base_of_v<std::out_of_range, ValueError>);
  static_assert(!std::is_base_of_v<RuntimeError, TypeError>);
  static_assert(!std::is_base_of_v<RuntimeError, ValueError>);
  SUCCEED();
}

TEST(Errors, WhatIsArgumentColonRule) {
  const LLMException e(LLMStatusCode::LLM_PARAM_INVALID, "transfer_configs[0].src_layer_range",
                       "stop 41 exceeds num_layers 40");
  EXPECT_STREQ(e.what(), "transfer_configs[0].src_layer_range: stop 41 exceeds num_layers 40");
  EXPECT_EQ(e.argument(), "transfer_configs[0].src_layer_range");
  EXPECT_EQ(e.rule(), "stop 41 exceeds num_layers 40");
  EXPECT_EQ(e.status_code(), LLMStatusCode::LLM_PARAM_INVALID);
}

// §2.3: a wrong type (here None where a value is required) is a TypeError.
TEST(Errors, NoneIsTypeError) {
  EXPECT_TRUE(Raises<TypeError>([] { throw_none("layer_synchronizer", "LayerSynchronizer"); },
                                "layer_synchronizer", "got None"));
}

// §2.3: an integer out of its domain is a ValueError.
TEST(Errors, IntegerRangeChecksRaiseValueError) {
  EXPECT_TRUE(Raises<ValueError>([] { check_uint32("batch_index", -1); }, "batch_index", "uint32"));
  EXPECT_TRUE(Raises<ValueError>([] { check_uint32("batch_index", 4294967296); }, "batch_index"));
  EXPECT_NO_THROW(check_uint32("batch_index", 0));
  EXPECT_NO_THROW(check_uint32("batch_index", 4294967295));
  EXPECT_TRUE(Raises<ValueError>([] { check_uint16("port", 65536); }, "port", "uint16"));
  EXPECT_TRUE(Raises<ValueError>([] { check_uint16("port", -1); }, "port"));
  EXPECT_NO_THROW(check_uint16("port", 65535));
  EXPECT_TRUE(Raises<ValueError>([] { check_int32("device_id", 2147483648); }, "device_id"));
  EXPECT_TRUE(Raises<ValueError>([] { check_int32("device_id", -2147483649); }, "device_id"));
  EXPECT_NO_THROW(check_int32("device_id", -2147483648));
  EXPECT_TRUE(Raises<ValueError>([] { check_uint64("dst_block_memory_size", -1); },
                                 "dst_block_memory_size", "uint64"));
  EXPECT_NO_THROW(check_uint64("x", std::numeric_limits<std::int64_t>::max()));
}

// §2.3: semantic checks are LLMException(LLM_PARAM_INVALID).
TEST(Errors, SemanticCheckIsParamInvalid) {
  EXPECT_TRUE(RaisesLLM([] { throw_param_invalid("size", "should be -1 or > 0"); },
                        LLMStatusCode::LLM_PARAM_INVALID, "size"));
}

// §2.3: a non-success C++ return becomes LLMException(code_2_status(ret)).
TEST(Errors, HandleLlmStatusRaisesMappedCode) {
  EXPECT_NO_THROW(handle_llm_status(0, "[pull_cache]", ""));
  EXPECT_TRUE(RaisesLLM([] { handle_llm_status(1343270938, "[pull_cache]", "cache_key = x"); },
                        LLMStatusCode::LLM_TIMEOUT, "[pull_cache]", "LLM_TIMEOUT"));
  EXPECT_TRUE(RaisesLLM([] { handle_llm_status(77, "[push_cache]", ""); },
                        LLMStatusCode::LLM_FAILED, "[push_cache]"));
  EXPECT_TRUE(RaisesLLM([] { handle_llm_status(1343270932, "[copy_cache]", ""); },
                        LLMStatusCode::LLM_FAILED, "[copy_cache]"));
}

// §2.3: any call before init is a plain RuntimeError, not an LLMException.
TEST(Errors, CallBeforeInitIsRuntimeError) {
  EXPECT_NO_THROW(check_initialized(true, "link_clusters"));
  EXPECT_TRUE(Raises<RuntimeError>([] { check_initialized(false, "link_clusters"); },
                                   "link_clusters", "before LLMDataDist.init"));
}

}  // namespace
}  // namespace kvsim::impl
