// Typed errors raised by the hardware model. Every rejected call leaves the model unchanged.
#pragma once

#include <stdexcept>
#include <string>

namespace kvsim::model {

/// What rule a rejected model call broke.
enum class ErrorKind {
  kInvalidArgument,  ///< A value outside its documented domain (zero bandwidth, zero length...).
  kOutOfRange,       ///< An address or index outside the device, memory or table.
  kUnallocated,      ///< An access to HBM that is not inside one live allocation.
  kOverlap,          ///< Ranges that must not overlap do.
  kOutOfMemory,      ///< An allocation that does not fit.
  kUnknownPreset,    ///< A preset name with no file.
  kFormat,           ///< A preset, scenario or model file that does not parse or validate.
};

/// Human-readable name of an ErrorKind ("out of range", ...).
const char* to_string(ErrorKind kind);

/// The one exception type of model/: a kind plus a message naming the argument and the rule.
class ModelError : public std::runtime_error {
 public:
  ModelError(ErrorKind kind, const std::string& message);
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace kvsim::model
