// Assertions that a call raises exactly one impl error type, with the expected status and an
// argument path that the message names.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <typeinfo>

#include "impl/diagnostics.h"
#include "impl/errors.h"

namespace kvsim::impl::testing {

namespace detail {

template <class E>
::testing::AssertionResult check_detail(const E& e, const std::string& argument,
                                        const std::string& rule_part) {
  if (typeid(e) != typeid(E)) {
    return ::testing::AssertionFailure()
           << "threw a subclass " << typeid(e).name() << ": " << e.what();
  }
  if (e.argument() != argument) {
    return ::testing::AssertionFailure() << "argument is '" << e.argument() << "', expected '"
                                         << argument << "' (" << e.what() << ")";
  }
  if (std::string(e.what()).find(argument) == std::string::npos) {
    return ::testing::AssertionFailure() << "message does not name the argument: " << e.what();
  }
  if (!rule_part.empty() && e.rule().find(rule_part) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "rule '" << e.rule() << "' does not contain '" << rule_part << "'";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace detail

/// Success iff fn throws exactly E (not a subclass) for `argument`, its rule containing
/// `rule_part` when given.
template <class E, class Fn>
::testing::AssertionResult Raises(Fn&& fn, const std::string& argument,
                                  const std::string& rule_part = "") {
  try {
    fn();
  } catch (const E& e) {
    return detail::check_detail(e, argument, rule_part);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw " << typeid(e).name() << ": " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

/// Success iff fn throws an LLMException with `status` for `argument`.
template <class Fn>
::testing::AssertionResult RaisesLLM(Fn&& fn, LLMStatusCode status, const std::string& argument,
                                     const std::string& rule_part = "") {
  try {
    fn();
  } catch (const LLMException& e) {
    if (e.status_code() != status) {
      return ::testing::AssertionFailure()
             << "status " << to_string(e.status_code()) << ", expected " << to_string(status)
             << " (" << e.what() << ")";
    }
    return detail::check_detail(e, argument, rule_part);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw " << typeid(e).name() << ": " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

/// Success iff fn throws the DiagnosticError strict mode raises for a `kind` diagnostic, with
/// that kind's status, for `argument`.
template <class Fn>
::testing::AssertionResult RaisesStrict(Fn&& fn, DiagnosticKind kind, const std::string& argument) {
  try {
    fn();
  } catch (const DiagnosticError& e) {
    if (e.diagnostic().kind != kind || e.status_code() != strict_status(kind)) {
      return ::testing::AssertionFailure() << "wrong diagnostic or status: " << e.what();
    }
    if (e.argument() != argument || std::string(e.what()).find(argument) == std::string::npos) {
      return ::testing::AssertionFailure() << "argument is '" << e.argument() << "', expected '"
                                           << argument << "' (" << e.what() << ")";
    }
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw " << typeid(e).name() << ": " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

/// RaisesLLM with LLM_PARAM_INVALID, the status of every semantic check (§2.3).
template <class Fn>
::testing::AssertionResult RaisesParamInvalid(Fn&& fn, const std::string& argument,
                                              const std::string& rule_part = "") {
  return RaisesLLM(std::forward<Fn>(fn), LLMStatusCode::LLM_PARAM_INVALID, argument, rule_part);
}

}  // namespace kvsim::impl::testing
