// kvsim's source-compatible declaration of CANN metadef's graph/ascend_string.h: ge::AscendString
// and its std::hash. Header-only: every member is defined here (kvsim aims at source, not binary,
// compatibility with CANN), so there is nothing for cpp/src/ to implement.
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
  AscendString(const char_t* const name)
      : name_(name == nullptr ? nullptr : std::make_shared<const std::string>(name)) {}

  /// Copies exactly `length` chars from `name` (NULs included); nullptr gives a null string.
  AscendString(const char_t* const name, size_t length)
      : name_(name == nullptr ? nullptr : std::make_shared<const std::string>(name, length)) {}

  /// The characters, NUL-terminated; "" for a null string. Valid while a copy is alive.
  const char_t* GetString() const { return name_ == nullptr ? "" : name_->c_str(); }

  /// Number of chars (0 for a null string).
  size_t GetLength() const { return name_ == nullptr ? 0U : name_->size(); }

  /// Position of `ascend_string` within this string; std::string::npos if absent or if either
  /// is null.
  size_t Find(const AscendString& ascend_string) const {
    if (name_ == nullptr || ascend_string.name_ == nullptr) return std::string::npos;
    return name_->find(*ascend_string.name_);
  }

  /// std::hash of the characters; a null string hashes as "".
  size_t Hash() const {
    return name_ == nullptr ? std::hash<std::string>{}(std::string())
                            : std::hash<std::string>{}(*name_);
  }

  bool operator<(const AscendString& d) const { return Compare(d) < 0; }
  bool operator>(const AscendString& d) const { return Compare(d) > 0; }
  bool operator<=(const AscendString& d) const { return Compare(d) <= 0; }
  bool operator>=(const AscendString& d) const { return Compare(d) >= 0; }
  bool operator==(const AscendString& d) const { return Compare(d) == 0; }
  bool operator!=(const AscendString& d) const { return Compare(d) != 0; }

  /// Equal to `d` up to its first NUL; a null string equals only nullptr.
  bool operator==(const char_t* const d) const {
    if (name_ == nullptr || d == nullptr) return name_ == nullptr && d == nullptr;
    return std::strcmp(name_->c_str(), d) == 0;
  }
  bool operator!=(const char_t* const d) const { return !(*this == d); }

 private:
  /// Three-way comparison: null first, then the characters as std::string orders them.
  int Compare(const AscendString& d) const {
    if (name_ == nullptr || d.name_ == nullptr) {
      return static_cast<int>(d.name_ == nullptr) - static_cast<int>(name_ == nullptr);
    }
    return name_->compare(*d.name_);
  }

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
