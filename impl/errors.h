// The C++ equivalents of the exceptions llm_datadist's Python API raises (spec §2.3), and the
// small range checks that raise them. Every error names the argument at fault and the rule.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "impl/status.h"

namespace kvsim::impl {

/// An exception of base `Base` that carries the argument at fault and the rule it broke;
/// what() is "argument: rule".
template <class Base>
class DetailedError : public Base {
 public:
  DetailedError(std::string argument, std::string rule)
      : Base(argument + ": " + rule), argument_(std::move(argument)), rule_(std::move(rule)) {}
  /// The argument at fault, as a path ("transfer_configs[0].src_layer_range").
  const std::string& argument() const noexcept { return argument_; }
  /// The rule it broke ("stop 41 exceeds num_layers 40").
  const std::string& rule() const noexcept { return rule_; }

 private:
  std::string argument_;
  std::string rule_;
};

/// Python TypeError: an argument of the wrong type, or None where a value is required (§2.3).
class TypeError : public DetailedError<std::invalid_argument> {
 public:
  using DetailedError::DetailedError;
};

/// Python ValueError: an integer outside its uint16/uint32/uint64/int32 domain (§2.3).
class ValueError : public DetailedError<std::out_of_range> {
 public:
  using DetailedError::DetailedError;
};

/// Python RuntimeError: e.g. a call before `init` (§2.3) or an unparsable IP string.
class RuntimeError : public DetailedError<std::runtime_error> {
 public:
  using DetailedError::DetailedError;
};

/// Python LLMException (a RuntimeError) with its `status_code` (§2.3).
class LLMException : public RuntimeError {
 public:
  LLMException(LLMStatusCode status, std::string argument, std::string rule)
      : RuntimeError(std::move(argument), std::move(rule)), status_(status) {}
  /// The status the exception carries.
  LLMStatusCode status_code() const noexcept { return status_; }

 private:
  LLMStatusCode status_;
};

/// Throws LLMException(LLM_PARAM_INVALID): the semantic-check failure of §2.3.
[[noreturn]] void throw_param_invalid(std::string argument, std::string rule);

/// Throws TypeError for a None where a value is required.
[[noreturn]] void throw_none(std::string argument, std::string_view expected_type);

/// ValueError unless 0 <= value <= UINT16_MAX (Python check_uint16).
void check_uint16(const std::string& argument, std::int64_t value);
/// ValueError unless 0 <= value <= UINT32_MAX (Python check_uint32).
void check_uint32(const std::string& argument, std::int64_t value);
/// ValueError unless INT32_MIN <= value <= INT32_MAX (Python check_int32).
void check_int32(const std::string& argument, std::int64_t value);
/// ValueError if value < 0 (Python check_uint64; larger values cannot reach an int64).
void check_uint64(const std::string& argument, std::int64_t value);

/// Python handle_llm_status: throws LLMException(code_2_status(ret)) unless ret is success.
void handle_llm_status(std::int64_t ret, const std::string& func_name, const std::string& info);

/// Throws RuntimeError if `initialized` is false: any API call before `init` (§2.3).
void check_initialized(bool initialized, const std::string& api_name);

}  // namespace kvsim::impl
