#include "model/errors.h"

namespace kvsim::model {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return "invalid argument";
    case ErrorKind::kOutOfRange:
      return "out of range";
    case ErrorKind::kUnallocated:
      return "unallocated";
    case ErrorKind::kOverlap:
      return "overlap";
    case ErrorKind::kOutOfMemory:
      return "out of memory";
    case ErrorKind::kUnknownPreset:
      return "unknown preset";
    case ErrorKind::kFormat:
      return "format";
  }
  return "unknown";
}

ModelError::ModelError(ErrorKind kind, const std::string& message)
    : std::runtime_error(std::string(to_string(kind)) + ": " + message), kind_(kind) {}

}  // namespace kvsim::model
