#include "impl/memory_pool.h"

#include <iterator>

namespace kvsim::impl {

MemoryPool::MemoryPool(std::uint64_t base, std::uint64_t size, std::uint32_t page_shift)
    : base_(base), size_(size), page_(std::uint64_t{1} << page_shift) {
  if (size > 0) free_.emplace(base, size);
}

std::optional<std::uint64_t> MemoryPool::allocate(std::uint64_t size) {
  if (size == 0 || size > size_) return std::nullopt;
  const std::uint64_t len = (size + page_ - 1) / page_ * page_;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < len) continue;
    const std::uint64_t addr = it->first;
    const std::uint64_t rest = it->second - len;
    free_.erase(it);
    if (rest > 0) free_.emplace(addr + len, rest);
    used_.emplace(addr, len);
    used_bytes_ += len;
    return addr;
  }
  return std::nullopt;
}

bool MemoryPool::free(std::uint64_t addr) {
  const auto it = used_.find(addr);
  if (it == used_.end()) return false;
  std::uint64_t start = addr;
  std::uint64_t len = it->second;
  used_bytes_ -= len;
  used_.erase(it);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && start + len == next->first) {
    len += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      len += prev->second;
      free_.erase(prev);
    }
  }
  free_.emplace(start, len);
  return true;
}

}  // namespace kvsim::impl
