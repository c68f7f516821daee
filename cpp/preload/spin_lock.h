// A lock for the shim's own tables: a spin on an atomic flag, because the shim's pthread calls
// must not wait through the pthread calls they stand in for. Held only for a table lookup.
#pragma once

#include <atomic>

// ThreadSanitizer's annotation calls (weak: defined only in a program built with TSan). Inside
// TSan's blocking interceptors (pthread_cond_wait's BlockingCall raises ignore_interceptors, and
// the shim's condition variables run there as their REAL) TSan treats atomics as plain accesses,
// so the lock also tells TSan of the order it makes.
extern "C" void __tsan_acquire(void* addr) __attribute__((weak));
extern "C" void __tsan_release(void* addr) __attribute__((weak));

namespace kvsim::cpp::preload {

class SpinLock {
 public:
  /// Holds the lock for its lifetime.
  class Guard {
   public:
    explicit Guard(SpinLock& lock) : flag_(lock.flag_) {
      while (flag_.test_and_set(std::memory_order_acquire)) {
      }
      if (&__tsan_acquire != nullptr) __tsan_acquire(&flag_);
    }
    ~Guard() {
      if (&__tsan_release != nullptr) __tsan_release(&flag_);
      flag_.clear(std::memory_order_release);
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    std::atomic_flag& flag_;
  };

 private:
  std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
};

}  // namespace kvsim::cpp::preload
