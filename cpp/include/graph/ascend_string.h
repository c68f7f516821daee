// kvsim's source-compatible declaration of CANN metadef's graph/ascend_string.h: ge::AscendString
// and its std::hash. As in metadef (graph/type/ascend_string.cc), the members are defined in the
// library (libllm_datadist here, cpp/src/ascend_string.cpp), so the std::string inside is only
// ever touched by library code: a program built with -D_GLIBCXX_USE_CXX11_ABI=0, as the official
// samples' CMakeLists does, shares AscendStrings with kvsim's libraries safely.
#pragma once

#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "graph/types.h"

namespace ge {

/// An immutable string whose copies share one buffer. A string built by the default constructor
/// or from nullptr is *null*: it reads as "" but differs from "", equals only nullptr and other
/// null strings, and orders before every non-null string (metadef's AscendStringImpl rules).
class AscendString {
 public:
  AscendString() = default;

  // Declared, as in metadef, so that the class has no implicit move: a moved-from string keeps
  // its value.
  ~AscendString() = default;

  /// Copies the NUL-terminated `name`; nullptr gives a null string. Implicit, so a `const char*`
  /// converts (e.g. `options[OPTION_DEVICE_ID] = "0"`).
  AscendString(const char_t* const name);

  /// Copies exactly `length` chars from `name` (NULs included); nullptr gives a null string.
  AscendString(const char_t* const name, size_t length);

  /// The characters, NUL-terminated; "" for a null string. Valid while a copy is alive.
  const char_t* GetString() const;

  /// Number of chars (0 for a null string).
  size_t GetLength() const;

  /// Position of `ascend_string` within this string; std::string::npos if absent or if either
  /// is null.
  size_t Find(const AscendString& ascend_string) const;

  /// std::hash of the characters; a null string hashes as "".
  size_t Hash() const;

  bool operator<(const AscendString& d) const;
  bool operator>(const AscendString& d) const;
  bool operator<=(const AscendString& d) const;
  bool operator>=(const AscendString& d) const;
  bool operator==(const AscendString& d) const;
  bool operator!=(const AscendString& d) const;

  /// Equal to `d` up to its first NUL; a null string equals only nullptr.
  bool operator==(const char_t* const d) const;
  bool operator!=(const char_t* const d) const;

 private:
  std::shared_ptr<const std::string> name_;
};

}  // namespace ge

namespace std {
/// Lets AscendString key a std::unordered_map.
template <>
struct hash<ge::AscendString> {
  size_t operator()(const ge::AscendString& name) const { return name.Hash(); }
};
}  // namespace std
