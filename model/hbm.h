// Device memory: capacity, bandwidth, an allocator, and checked access to byte-exact content.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/content_store.h"
#include "model/units.h"

namespace kvsim::model {

/// One memory (an NPU/GPU's HBM, or a host's DRAM). Addresses are absolute: [base, base+capacity).
/// Every access must lie inside one live allocation; anything else throws ModelError and changes
/// nothing. A zero-length access is a no-op allowed anywhere in [base, base+capacity] (the end
/// included, like a one-past-the-end pointer), allocated or not.
class Hbm {
 public:
  /// `name` appears in error messages ("npu3.hbm"). Throws kInvalidArgument on zero capacity or
  /// a bandwidth not > 0, kOutOfRange if base+capacity overflows 64 bits.
  Hbm(std::string name, std::uint64_t base, std::uint64_t capacity, Bandwidth bandwidth);

  const std::string& name() const { return name_; }
  std::uint64_t base() const { return base_; }
  std::uint64_t capacity() const { return capacity_; }
  Bandwidth bandwidth() const { return bandwidth_; }
  std::uint64_t allocated_bytes() const { return allocated_bytes_; }

  /// First-fit allocation of `size` bytes aligned to `alignment` (a power of two). Throws
  /// kOutOfMemory if no free range fits, kInvalidArgument for size 0 or a bad alignment.
  std::uint64_t allocate(std::uint64_t size, std::uint64_t alignment = 64);
  /// Reserves exactly [addr, addr+size) (used to mirror memory a user allocated elsewhere).
  /// Throws kOutOfRange outside the memory, kOverlap if any byte is already allocated.
  void allocate_at(std::uint64_t addr, std::uint64_t size);
  /// Frees the allocation that starts at `addr` and forgets its content. Throws kUnallocated.
  void free(std::uint64_t addr);
  /// True if [addr, addr+len) lies inside one live allocation (len 0: addr in [base,
  /// base+capacity]).
  bool is_allocated(std::uint64_t addr, std::uint64_t len) const;
  /// is_allocated(addr, len) for len > 0, also giving the allocation [*start, *start + *size)
  /// that holds the range.
  bool allocation_holding(std::uint64_t addr, std::uint64_t len, std::uint64_t* start,
                          std::uint64_t* size) const {
    if (len == 0 || !is_allocated(addr, len)) return false;
    *start = hit_start_;  // is_allocated leaves the allocation it found here
    *size = hit_size_;
    return true;
  }
  /// Throws kUnallocated (or kOutOfRange outside the memory) unless is_allocated(addr, len).
  /// `what` ("read", "copy source") prefixes the message.
  void check_access(std::uint64_t addr, std::uint64_t len, const char* what) const;

  /// Allocations freed so far: ranges checked while it had a value are still allocated while it
  /// keeps it (the fabric checks a batch at post and lands it without checking again).
  std::uint64_t frees() const { return frees_; }
  /// Copies like copy(), without checking the ranges: the caller checked them when src.frees()
  /// and dst.frees() had their current values.
  static void copy_checked(const Hbm& src, std::uint64_t src_addr, Hbm& dst, std::uint64_t dst_addr,
                           std::uint64_t len) {
    dst.content_.copy_from(src.content_, src_addr, dst_addr, len);
  }

  /// Checked ContentStore::write / fill_pattern / read.
  void write(std::uint64_t addr, const std::vector<std::uint8_t>& bytes);
  void fill_pattern(std::uint64_t addr, std::uint64_t len, std::uint64_t seed);
  std::vector<std::uint8_t> read(std::uint64_t addr, std::uint64_t len) const;
  /// Copies between memories (or within one), after checking both ranges.
  static void copy(const Hbm& src, std::uint64_t src_addr, Hbm& dst, std::uint64_t dst_addr,
                   std::uint64_t len);

  const ContentStore& content() const { return content_; }
  ContentStore& content() { return content_; }

 private:
  std::string name_;
  std::uint64_t base_;
  std::uint64_t capacity_;
  Bandwidth bandwidth_;
  std::uint64_t allocated_bytes_ = 0;
  std::uint64_t frees_ = 0;
  std::map<std::uint64_t, std::uint64_t> allocations_;  ///< start -> size
  // The allocation is_allocated found last (size 0: none): a layer's descriptors mostly fall in
  // one tensor, so most checks end here. Cleared when an allocation is freed.
  mutable std::uint64_t hit_start_ = 0;
  mutable std::uint64_t hit_size_ = 0;
  ContentStore content_;

  std::uint64_t end() const { return base_ + capacity_; }
  /// "<name>: <what> of <len> bytes at 0x<addr>", the start of every access error.
  std::string describe(const char* what, std::uint64_t addr, std::uint64_t len) const;
};

}  // namespace kvsim::model
