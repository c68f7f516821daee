// Scoped ownership of a platform Mutex (held across simulated time).
#pragma once

#include "impl/platform.h"

namespace kvsim::impl {

/// Locks in the constructor, unlocks in the destructor.
class LockGuard {
 public:
  explicit LockGuard(Mutex& mutex) : mutex_(mutex) { mutex_.lock(); }
  ~LockGuard() { mutex_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  Mutex& mutex_;
};

}  // namespace kvsim::impl
