#include "impl/errors.h"

#include <limits>

namespace kvsim::impl {

void throw_param_invalid(std::string argument, std::string rule) {
  throw LLMException(LLMStatusCode::LLM_PARAM_INVALID, std::move(argument), std::move(rule));
}

void throw_none(std::string argument, std::string_view expected_type) {
  throw TypeError(std::move(argument), "must be " + std::string(expected_type) + ", got None");
}

namespace {

void check_range(const std::string& argument, std::int64_t value, std::int64_t lo, std::int64_t hi,
                 const char* type_name) {
  if (value < lo || value > hi) {
    throw ValueError(argument, std::to_string(value) + " is not a " + type_name + " value");
  }
}

}  // namespace

void check_uint16(const std::string& argument, std::int64_t value) {
  check_range(argument, value, 0, std::numeric_limits<std::uint16_t>::max(), "uint16");
}

void check_uint32(const std::string& argument, std::int64_t value) {
  check_range(argument, value, 0, std::numeric_limits<std::uint32_t>::max(), "uint32");
}

void check_int32(const std::string& argument, std::int64_t value) {
  check_range(argument, value, std::numeric_limits<std::int32_t>::min(),
              std::numeric_limits<std::int32_t>::max(), "int32");
}

void check_uint64(const std::string& argument, std::int64_t value) {
  check_range(argument, value, 0, std::numeric_limits<std::int64_t>::max(), "uint64");
}

void handle_llm_status(std::int64_t ret, const std::string& func_name, const std::string& info) {
  if (ret == to_int(LLMStatusCode::LLM_SUCCESS)) return;
  const LLMStatusCode status = code_2_status(ret);
  std::string rule = "failed, error code is " + std::string(to_string(status));
  if (!info.empty()) rule += ", " + info;
  throw LLMException(status, func_name, rule);
}

void check_initialized(bool initialized, const std::string& api_name) {
  if (!initialized) throw RuntimeError(api_name, "called before LLMDataDist.init");
}

}  // namespace kvsim::impl
