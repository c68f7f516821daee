#include "model/hbm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <utility>

#include "model/errors.h"
#include "model/units.h"

namespace kvsim::model {
namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

}  // namespace

Hbm::Hbm(std::string name, std::uint64_t base, std::uint64_t capacity, Bandwidth bandwidth)
    : name_(std::move(name)), base_(base), capacity_(capacity), bandwidth_(bandwidth) {
  if (capacity_ == 0) {
    throw ModelError(ErrorKind::kInvalidArgument, name_ + ": capacity must be > 0");
  }
  if (!(bandwidth_ > 0) || !std::isfinite(bandwidth_)) {
    throw ModelError(ErrorKind::kInvalidArgument,
                     name_ + ": bandwidth must be a finite number > 0 bytes/s");
  }
  // The end address must be representable, so that ranges inside the memory never overflow.
  if (capacity_ > kMax - base_) {
    throw ModelError(ErrorKind::kOutOfRange, name_ + ": base " + format_address(base_) +
                                                 " + capacity " + std::to_string(capacity_) +
                                                 " runs past the 64-bit address space");
  }
}

std::string Hbm::describe(const char* what, std::uint64_t addr, std::uint64_t len) const {
  return name_ + ": " + (what ? what : "access") + " of " + std::to_string(len) + " bytes at " +
         format_address(addr);
}

std::uint64_t Hbm::allocate(std::uint64_t size, std::uint64_t alignment) {
  if (size == 0) {
    throw ModelError(ErrorKind::kInvalidArgument, name_ + ": allocate size must be > 0");
  }
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    throw ModelError(ErrorKind::kInvalidArgument,
                     name_ + ": allocate alignment " + std::to_string(alignment) + " (size " +
                         std::to_string(size) + ") is not a power of two");
  }
  // Alignment is of the absolute address, whatever the base.
  auto fit = [&](std::uint64_t gap_begin, std::uint64_t gap_end, std::uint64_t& at) {
    const std::uint64_t rem = gap_begin & (alignment - 1);
    const std::uint64_t pad = rem == 0 ? 0 : alignment - rem;
    if (pad > gap_end - gap_begin || size > gap_end - gap_begin - pad) return false;
    at = gap_begin + pad;
    return true;
  };
  std::uint64_t at = 0;
  std::uint64_t cursor = base_;
  std::uint64_t largest = 0;
  bool found = false;
  for (const auto& [start, len] : allocations_) {
    largest = std::max(largest, start - cursor);
    if (fit(cursor, start, at)) {
      found = true;
      break;
    }
    cursor = start + len;
  }
  if (!found) {
    largest = std::max(largest, end() - cursor);
    found = fit(cursor, end(), at);
  }
  if (!found) {
    throw ModelError(ErrorKind::kOutOfMemory,
                     name_ + ": cannot allocate " + std::to_string(size) + " bytes (alignment " +
                         std::to_string(alignment) +
                         "): " + std::to_string(capacity_ - allocated_bytes_) +
                         " bytes free, largest free range " + std::to_string(largest) + " bytes");
  }
  allocations_.emplace(at, size);
  allocated_bytes_ += size;
  return at;
}

void Hbm::allocate_at(std::uint64_t addr, std::uint64_t size) {
  if (size == 0) {
    throw ModelError(ErrorKind::kInvalidArgument,
                     describe("allocate_at", addr, size) + ": size must be > 0");
  }
  if (addr < base_ || addr > end() || size > end() - addr) {
    throw ModelError(ErrorKind::kOutOfRange,
                     describe("allocate_at", addr, size) + " is outside the memory [" +
                         format_address(base_) + ", " + format_address(end()) + ")");
  }
  auto it = allocations_.upper_bound(addr);
  if (it != allocations_.begin() && std::prev(it)->first + std::prev(it)->second > addr) --it;
  if (it != allocations_.end() && it->first < addr + size) {
    throw ModelError(ErrorKind::kOverlap,
                     describe("allocate_at", addr, size) + " overlaps the allocation of " +
                         std::to_string(it->second) + " bytes at " + format_address(it->first));
  }
  allocations_.emplace(addr, size);
  allocated_bytes_ += size;
}

void Hbm::free(std::uint64_t addr) {
  const auto it = allocations_.find(addr);
  if (it == allocations_.end()) {
    std::string where;
    auto next = allocations_.upper_bound(addr);
    if (next != allocations_.begin()) {
      const auto prev = std::prev(next);
      if (addr - prev->first < prev->second) {
        where = " (it lies inside the allocation of " + std::to_string(prev->second) +
                " bytes at " + format_address(prev->first) + ")";
      }
    }
    throw ModelError(ErrorKind::kUnallocated, name_ + ": free of " + format_address(addr) +
                                                  ", which does not start a live allocation" +
                                                  where);
  }
  content_.clear(it->first, it->second);
  allocated_bytes_ -= it->second;
  allocations_.erase(it);
  hit_size_ = 0;
  ++frees_;
}

bool Hbm::is_allocated(std::uint64_t addr, std::uint64_t len) const {
  if (len == 0) return addr >= base_ && addr <= end();
  if (len > kMax - addr) return false;
  if (hit_size_ > 0 && addr - hit_start_ < hit_size_ && len <= hit_size_ - (addr - hit_start_)) {
    return true;
  }
  auto it = allocations_.upper_bound(addr);
  if (it == allocations_.begin()) return false;
  --it;
  if (addr - it->first < it->second && len <= it->second - (addr - it->first)) {
    hit_start_ = it->first;
    hit_size_ = it->second;
    return true;
  }
  return false;
}

void Hbm::check_access(std::uint64_t addr, std::uint64_t len, const char* what) const {
  if (addr < base_ || addr > end() || len > end() - addr) {
    throw ModelError(ErrorKind::kOutOfRange,
                     describe(what, addr, len) + " is outside the memory [" +
                         format_address(base_) + ", " + format_address(end()) + ")");
  }
  if (is_allocated(addr, len)) return;
  std::string why = " (" + format_address(addr) + " is not allocated)";
  auto it = allocations_.upper_bound(addr);
  if (it != allocations_.begin()) {
    --it;
    if (addr - it->first < it->second) {
      why = " (it runs past the end " + format_address(it->first + it->second) +
            " of the allocation at " + format_address(it->first) + ")";
    }
  }
  throw ModelError(ErrorKind::kUnallocated,
                   describe(what, addr, len) + " is not inside one live allocation" + why);
}

void Hbm::write(std::uint64_t addr, const std::vector<std::uint8_t>& bytes) {
  check_access(addr, bytes.size(), "write");
  content_.write(addr, bytes.data(), bytes.size());
}

void Hbm::fill_pattern(std::uint64_t addr, std::uint64_t len, std::uint64_t seed) {
  check_access(addr, len, "fill_pattern");
  content_.fill_pattern(addr, len, seed);
}

std::vector<std::uint8_t> Hbm::read(std::uint64_t addr, std::uint64_t len) const {
  check_access(addr, len, "read");
  return content_.read(addr, len);
}

void Hbm::copy(const Hbm& src, std::uint64_t src_addr, Hbm& dst, std::uint64_t dst_addr,
               std::uint64_t len) {
  src.check_access(src_addr, len, "copy source");
  dst.check_access(dst_addr, len, "copy destination");
  dst.content_.copy_from(src.content_, src_addr, dst_addr, len);
}

}  // namespace kvsim::model
