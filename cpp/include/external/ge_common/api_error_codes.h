// kvsim's source-compatible declaration of CANN metadef's external/ge_common/api_error_codes.h:
// the ge error-number layout (GE_ERRORNO_DEFINE), ge::SUCCESS and ge::FAILED, and the
// StatusFactory that maps numbers to descriptions. llm_datadist/llm_datadist.h includes it by
// this path. Header-only: nothing to implement.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ge_api_types.h"
#include "ge_error_codes.h"
#include "graph/ascend_string.h"

/// Defines `constexpr ge::Status name` from the fields of a ge error number, high bits first:
/// runtime (2 bits) at 30, type (2) at 28, level (3) at 25, sysid (8) at 17, modid (5) at 12
/// and value (12) at 0. Each field is first masked to 8 bits (value to 12), as metadef does.
#ifndef GE_ERRORNO_DEFINE
#define GE_ERRORNO_DEFINE(runtime, type, level, sysid, modid, name, value) \
  constexpr ge::Status name =                                              \
      (((static_cast<uint32_t>(runtime) & 0xFFU) << 30U) |                 \
       ((static_cast<uint32_t>(type) & 0xFFU) << 28U) |                    \
       ((static_cast<uint32_t>(level) & 0xFFU) << 25U) |                   \
       ((static_cast<uint32_t>(sysid) & 0xFFU) << 17U) |                   \
       ((static_cast<uint32_t>(modid) & 0xFFU) << 12U) | (static_cast<uint32_t>(value) & 0xFFFU))
#endif

/// Registers `desc` as the description of error number `name` when the program starts.
#ifndef GE_ERRORNO_EXTERNAL
#define GE_ERRORNO_EXTERNAL(name, desc) const ge::ErrorNoRegisterar g_errorno_##name((name), (desc))
#endif

#ifndef GE_ERRORNO
/// GE_ERRORNO_DEFINE plus GE_ERRORNO_EXTERNAL.
#define GE_ERRORNO(runtime, type, level, sysid, modid, name, value, desc) \
  GE_ERRORNO_DEFINE(runtime, type, level, sysid, modid, name, value);     \
  GE_ERRORNO_EXTERNAL(name, desc)

namespace ge {

/// Process-wide table from error number to description. The first description registered for a
/// number wins.
class GE_FUNC_VISIBILITY StatusFactory {
 public:
  static StatusFactory* Instance() {
    static StatusFactory factory;
    return &factory;
  }

  void RegisterErrorNo(const uint32_t err, const std::string& desc) { descs_.emplace(err, desc); }

  /// As above; a null `desc` registers nothing.
  void RegisterErrorNo(const uint32_t err, const char* const desc) {
    if (desc != nullptr) descs_.emplace(err, desc);
  }

  /// The description of `err`, or "" if none was registered.
  std::string GetErrDesc(const uint32_t err) {
    const auto it = descs_.find(err);
    return it == descs_.end() ? std::string() : it->second;
  }

  /// GetErrDesc as an AscendString.
  AscendString GetErrDescV2(const uint32_t err) { return AscendString(GetErrDesc(err).c_str()); }

 protected:
  StatusFactory() = default;
  ~StatusFactory() = default;

 private:
  std::map<uint32_t, std::string> descs_;
};

/// Its constructor registers one description with StatusFactory (see GE_ERRORNO_EXTERNAL).
class GE_FUNC_VISIBILITY ErrorNoRegisterar {
 public:
  ErrorNoRegisterar(const uint32_t err, const std::string& desc) noexcept {
    StatusFactory::Instance()->RegisterErrorNo(err, desc);
  }
  ErrorNoRegisterar(const uint32_t err, const char* const desc) noexcept {
    StatusFactory::Instance()->RegisterErrorNo(err, desc);
  }
  ~ErrorNoRegisterar() = default;
};

GE_ERRORNO(0, 0, 0, 0, 0, SUCCESS, 0, "success");          // 0
GE_ERRORNO(3, 3, 7, 0xFF, 0x1F, FAILED, 0xFFF, "failed");  // 0xFFFFFFFF

}  // namespace ge
#endif  // GE_ERRORNO

namespace ge {
GE_ERRORNO_DEFINE(1, 1, 0, 8, 0, END_OF_SEQUENCE, 7);  // 0x50100007
}  // namespace ge
