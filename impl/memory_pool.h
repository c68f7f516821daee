// A memory pool over one platform allocation, for allocate_cache / allocate_blocks_cache (spec §4,
// §5 llm.MemPoolConfig): first fit at page granularity (2**page_shift), freed ranges coalesce.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace kvsim::impl {

/// Hands out page-aligned ranges of [base, base + size).
class MemoryPool {
 public:
  /// A pool over `size` bytes at `base` with pages of 2**page_shift bytes.
  MemoryPool(std::uint64_t base, std::uint64_t size, std::uint32_t page_shift);
  /// The lowest free range of `size` bytes rounded up to whole pages; nullopt if none fits or
  /// size is 0.
  std::optional<std::uint64_t> allocate(std::uint64_t size);
  /// Returns a range that allocate() handed out (false if `addr` starts none).
  bool free(std::uint64_t addr);
  std::uint64_t base() const { return base_; }
  std::uint64_t capacity() const { return size_; }
  /// Bytes handed out (whole pages).
  std::uint64_t used() const { return used_bytes_; }

 private:
  std::uint64_t base_;
  std::uint64_t size_;
  std::uint64_t page_;
  std::uint64_t used_bytes_ = 0;
  std::map<std::uint64_t, std::uint64_t> free_;  ///< start → length
  std::map<std::uint64_t, std::uint64_t> used_;  ///< start → length
};

}  // namespace kvsim::impl
