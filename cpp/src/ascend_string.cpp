// ge::AscendString's members (graph/ascend_string.h), out of line as in metadef's
// graph/type/ascend_string.cc, so that only this library reads the std::string they share.
#include "graph/ascend_string.h"

namespace ge {

namespace {

// Three-way comparison: null first, then the characters as std::string orders them
// (metadef's AscendStringImpl).
int compare(const std::shared_ptr<const std::string>& a,
            const std::shared_ptr<const std::string>& b) {
  if (a == nullptr || b == nullptr) {
    return static_cast<int>(b == nullptr) - static_cast<int>(a == nullptr);
  }
  return a->compare(*b);
}

}  // namespace

AscendString::AscendString(const char_t* const name)
    : name_(name == nullptr ? nullptr : std::make_shared<const std::string>(name)) {}

AscendString::AscendString(const char_t* const name, size_t length)
    : name_(name == nullptr ? nullptr : std::make_shared<const std::string>(name, length)) {}

const char_t* AscendString::GetString() const {
  return name_ == nullptr ? "" : name_->c_str();
}

size_t AscendString::GetLength() const {
  return name_ == nullptr ? 0U : name_->size();
}

size_t AscendString::Find(const AscendString& ascend_string) const {
  if (name_ == nullptr || ascend_string.name_ == nullptr) return std::string::npos;
  return name_->find(*ascend_string.name_);
}

size_t AscendString::Hash() const {
  return std::hash<std::string>{}(name_ == nullptr ? std::string() : *name_);
}

bool AscendString::operator<(const AscendString& d) const {
  return compare(name_, d.name_) < 0;
}
bool AscendString::operator>(const AscendString& d) const {
  return compare(name_, d.name_) > 0;
}
bool AscendString::operator<=(const AscendString& d) const {
  return compare(name_, d.name_) <= 0;
}
bool AscendString::operator>=(const AscendString& d) const {
  return compare(name_, d.name_) >= 0;
}
bool AscendString::operator==(const AscendString& d) const {
  return compare(name_, d.name_) == 0;
}
bool AscendString::operator!=(const AscendString& d) const {
  return compare(name_, d.name_) != 0;
}

bool AscendString::operator==(const char_t* const d) const {
  if (name_ == nullptr || d == nullptr) return name_ == nullptr && d == nullptr;
  return std::strcmp(name_->c_str(), d) == 0;
}

bool AscendString::operator!=(const char_t* const d) const {
  return !(*this == d);
}

}  // namespace ge
