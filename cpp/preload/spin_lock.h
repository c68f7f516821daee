// A lock for the shim's own tables: a spin on an atomic flag, because the shim's pthread calls
// must not wait through the pthread calls they stand in for. Held only for a table lookup.
#pragma once

#include <atomic>

namespace kvsim::cpp::preload {

class SpinLock {
 public:
  /// Holds the lock for its lifetime.
  class Guard {
   public:
    explicit Guard(SpinLock& lock) : flag_(lock.flag_) {
      while (flag_.test_and_set(std::memory_order_acquire)) {
      }
    }
    ~Guard() { flag_.clear(std::memory_order_release); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    std::atomic_flag& flag_;
  };

 private:
  std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
};

}  // namespace kvsim::cpp::preload
