// A happens-before vector clock as a launched program's shim and the world exchange it: the
// stamp a send carries to its receiver (cpp/preload/happens_before.h, cpp/server/control_net.h)
// and a call carries to the rule checker (python/kvsim/launch/rules.py decodes the same bytes).
// Encoding: u32 n, then n pairs (u32 thread, u32 count) in increasing thread order, little-endian;
// the empty string is the empty clock.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kvsim::cpp::wire {

/// Counts per thread; a thread not listed counts 0.
class VectorClock {
 public:
  /// The count of `thread`.
  std::uint32_t get(std::uint32_t thread) const;
  /// Sets the count of `thread`.
  void set(std::uint32_t thread, std::uint32_t count);
  /// Each thread's count becomes the larger of the two.
  void join(const VectorClock& other);
  bool empty() const { return entries_.empty(); }
  /// The bytes of the encoding above.
  std::string encode() const;
  /// Decodes an encoding (the empty string: the empty clock); WireError if it is not one.
  static VectorClock decode(const std::string& bytes);

 private:
  std::vector<std::pair<std::uint32_t, std::uint32_t>> entries_;
};

}  // namespace kvsim::cpp::wire
