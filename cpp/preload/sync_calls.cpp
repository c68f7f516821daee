// Thread synchronisation of a launched program in simulated time: mutexes, condition variables,
// read-write locks, spin locks, barriers and semaphores (what std::mutex, std::condition_variable,
// CPython's GIL and threading locks are built on). A call that would block tries the C library's
// non-blocking form and, while that fails, waits in the world (cpp/preload/waits.h); the calls
// that release wake the world's waiters. So a blocked thread never blocks the world: the world
// knows what it waits on, runs another thread meanwhile, and times its timeouts in simulated
// time. Condition variables and barriers live in the world alone (the C library's own object is
// only initialised and destroyed). Semaphores shared between processes (sem_open, sem_init with
// pshared: multiprocessing's locks and queues) wait and wake launch-wide (waits.h object_key);
// other process-shared objects wait only for the threads of their own process.
// Outside a launch (and when the world cannot answer) every call goes to the C library.
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_map>

#include "cpp/preload/real_calls.h"
#include "cpp/preload/spin_lock.h"
#include "cpp/preload/waits.h"

namespace {

using kvsim::cpp::preload::Deadline;
using kvsim::cpp::preload::simulated;
using kvsim::cpp::preload::time_left;
using kvsim::cpp::preload::wait_on;
using kvsim::cpp::preload::WaitResult;
using kvsim::cpp::preload::wake;
using kvsim::cpp::wire::WaitKind;

constexpr std::uint32_t kAll = std::numeric_limits<std::uint32_t>::max();

// One blocking attempt loop: `attempt` returns 0 on success, EBUSY/EAGAIN to wait, or an error.
// `fallback` is the C library's blocking call, for when the world cannot answer.
template <typename Attempt, typename Fallback>
int acquire(std::uint64_t key, WaitKind kind, const Deadline* deadline, Attempt attempt,
            Fallback fallback) {
  for (;;) {
    const int rc = attempt();
    if (rc != EBUSY && rc != EAGAIN) return rc;
    std::optional<std::uint64_t> left;
    if (deadline != nullptr) {
      left = time_left(*deadline);
      if (!left) return EINVAL;
      if (*left == 0) return ETIMEDOUT;
    }
    switch (wait_on(key, kind, left)) {
      case WaitResult::kNoWorld:
        return fallback();
      case WaitResult::kTimedOut: {
        const int last = attempt();
        return last == EBUSY || last == EAGAIN ? ETIMEDOUT : last;
      }
      case WaitResult::kWoken:
        break;
    }
  }
}

// glibc's pthread_mutex_t: the low bits of __kind are the type, __owner the holder's thread id.
constexpr int kKindMask = 3;

int lock_mutex(pthread_mutex_t* m, const Deadline* deadline) {
  return acquire(
      kvsim::cpp::preload::object_key(m, false), WaitKind::kMutex, deadline,
      [m] {
        const int rc = KVSIM_REAL(pthread_mutex_trylock)(m);
        if (rc == EBUSY && (m->__data.__kind & kKindMask) == PTHREAD_MUTEX_ERRORCHECK &&
            m->__data.__owner == gettid()) {
          return EDEADLK;
        }
        return rc;
      },
      [m, deadline] {
        return deadline == nullptr
                   ? KVSIM_REAL(pthread_mutex_lock)(m)
                   : KVSIM_REAL(pthread_mutex_clocklock)(m, deadline->clock, deadline->at);
      });
}

int unlock_mutex(pthread_mutex_t* m) {
  const int rc = KVSIM_REAL(pthread_mutex_unlock)(m);
  if (rc == 0) wake(m, 1);
  return rc;
}

// glibc keeps a condition variable's clock in bit 1 of __wrefs (pthread_condattr_setclock).
clockid_t cond_clock(const pthread_cond_t* c) {
  return (c->__data.__wrefs & 2U) != 0 ? CLOCK_MONOTONIC : CLOCK_REALTIME;
}

int cond_wait(pthread_cond_t* c, pthread_mutex_t* m, const Deadline* deadline) {
  std::optional<std::uint64_t> left;
  if (deadline != nullptr) {
    left = time_left(*deadline);
    if (!left) return EINVAL;
  }
  const int unlocked = unlock_mutex(m);
  if (unlocked != 0) return unlocked;
  // No other thread of the program runs before this wait is registered: no signal is missed.
  const WaitResult r =
      left && *left == 0 ? WaitResult::kTimedOut : wait_on(c, WaitKind::kCondition, left);
  const int relocked = lock_mutex(m, nullptr);
  if (relocked != 0) return relocked;
  return r == WaitResult::kTimedOut ? ETIMEDOUT : 0;  // kNoWorld: a spurious wake-up
}

int rw_acquire(pthread_rwlock_t* rw, bool write, const Deadline* deadline) {
  return acquire(
      kvsim::cpp::preload::object_key(rw, false), WaitKind::kRwLock, deadline,
      [rw, write] {
        if (rw->__data.__cur_writer == gettid()) return EDEADLK;
        return write ? KVSIM_REAL(pthread_rwlock_trywrlock)(rw)
                     : KVSIM_REAL(pthread_rwlock_tryrdlock)(rw);
      },
      [rw, write, deadline] {
        if (deadline == nullptr) {
          return write ? KVSIM_REAL(pthread_rwlock_wrlock)(rw)
                       : KVSIM_REAL(pthread_rwlock_rdlock)(rw);
        }
        return write ? KVSIM_REAL(pthread_rwlock_clockwrlock)(rw, deadline->clock, deadline->at)
                     : KVSIM_REAL(pthread_rwlock_clockrdlock)(rw, deadline->clock, deadline->at);
      });
}

// Semaphores answer -1 and errno, not the error.
int sem_result(int rc) {
  if (rc == 0) return 0;
  errno = rc;
  return -1;
}

// glibc's sem_t: a counter, then its futex flag: FUTEX_PRIVATE (0) for a semaphore of one process,
// FUTEX_SHARED (LLL_SHARED, 128) for one shared between processes (sem_open, sem_init with
// pshared).
bool process_shared(const sem_t* s) {
  int futex_flag = 0;
  std::memcpy(&futex_flag, reinterpret_cast<const char*>(s) + sizeof(std::uint64_t),
              sizeof(futex_flag));
  return futex_flag != 0;
}

int sem_acquire(sem_t* s, const Deadline* deadline) {
  return sem_result(acquire(
      kvsim::cpp::preload::object_key(s, process_shared(s)), WaitKind::kSemaphore, deadline,
      [s] { return KVSIM_REAL(sem_trywait)(s) == 0 ? 0 : errno; },
      [s, deadline] {
        const int rc = deadline == nullptr
                           ? KVSIM_REAL(sem_wait)(s)
                           : KVSIM_REAL(sem_clockwait)(s, deadline->clock, deadline->at);
        return rc == 0 ? 0 : errno;
      }));
}

// Barriers are counted here: glibc's would wait on a futex the world cannot see.
struct Barrier {
  unsigned count = 0;
  unsigned arrived = 0;
  std::uint64_t round = 0;
};

class Barriers {
 public:
  void add(const void* b, unsigned count) {
    kvsim::cpp::preload::SpinLock::Guard g(lock_);
    (*all_)[b] = Barrier{count, 0, 0};
  }
  void remove(const void* b) {
    kvsim::cpp::preload::SpinLock::Guard g(lock_);
    all_->erase(b);
  }
  // Counts an arrival: the round to wait for the end of, or nullopt if the caller completes it.
  std::optional<std::uint64_t> arrive(const void* b, bool& known) {
    kvsim::cpp::preload::SpinLock::Guard g(lock_);
    auto it = all_->find(b);
    known = it != all_->end();
    if (!known) return std::nullopt;
    Barrier& s = it->second;
    if (++s.arrived < s.count) return s.round;
    s.arrived = 0;
    ++s.round;
    return std::nullopt;
  }
  std::uint64_t round(const void* b) {
    kvsim::cpp::preload::SpinLock::Guard g(lock_);
    auto it = all_->find(b);
    return it == all_->end() ? 0 : it->second.round;
  }

 private:
  kvsim::cpp::preload::SpinLock lock_;
  std::unordered_map<const void*, Barrier>* all_ = new std::unordered_map<const void*, Barrier>();
};

Barriers& barriers() {
  static auto* b = new Barriers();
  return *b;
}

}  // namespace

extern "C" {

int pthread_mutex_lock(pthread_mutex_t* m) {
  if (!simulated()) return KVSIM_REAL(pthread_mutex_lock)(m);
  return lock_mutex(m, nullptr);
}

int pthread_mutex_timedlock(pthread_mutex_t* m, const struct timespec* at) {
  if (!simulated()) return KVSIM_REAL(pthread_mutex_timedlock)(m, at);
  const Deadline d{CLOCK_REALTIME, at};
  return lock_mutex(m, &d);
}

int pthread_mutex_clocklock(pthread_mutex_t* m, clockid_t clock, const struct timespec* at) {
  if (!simulated()) return KVSIM_REAL(pthread_mutex_clocklock)(m, clock, at);
  const Deadline d{clock, at};
  return lock_mutex(m, &d);
}

int pthread_mutex_unlock(pthread_mutex_t* m) {
  if (!simulated()) return KVSIM_REAL(pthread_mutex_unlock)(m);
  return unlock_mutex(m);
}

int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m) {
  if (!simulated()) return KVSIM_REAL(pthread_cond_wait)(c, m);
  return cond_wait(c, m, nullptr);
}

int pthread_cond_timedwait(pthread_cond_t* c, pthread_mutex_t* m, const struct timespec* at) {
  if (!simulated()) return KVSIM_REAL(pthread_cond_timedwait)(c, m, at);
  const Deadline d{cond_clock(c), at};
  return cond_wait(c, m, &d);
}

int pthread_cond_clockwait(pthread_cond_t* c, pthread_mutex_t* m, clockid_t clock,
                           const struct timespec* at) {
  if (!simulated()) return KVSIM_REAL(pthread_cond_clockwait)(c, m, clock, at);
  const Deadline d{clock, at};
  return cond_wait(c, m, &d);
}

int pthread_cond_signal(pthread_cond_t* c) {
  if (!simulated()) return KVSIM_REAL(pthread_cond_signal)(c);
  wake(c, 1);
  return 0;
}

int pthread_cond_broadcast(pthread_cond_t* c) {
  if (!simulated()) return KVSIM_REAL(pthread_cond_broadcast)(c);
  wake(c, kAll);
  return 0;
}

int pthread_rwlock_rdlock(pthread_rwlock_t* rw) {
  if (!simulated()) return KVSIM_REAL(pthread_rwlock_rdlock)(rw);
  return rw_acquire(rw, false, nullptr);
}

int pthread_rwlock_wrlock(pthread_rwlock_t* rw) {
  if (!simulated()) return KVSIM_REAL(pthread_rwlock_wrlock)(rw);
  return rw_acquire(rw, true, nullptr);
}

int pthread_rwlock_timedrdlock(pthread_rwlock_t* rw, const struct timespec* at) {
  if (!simulated()) return KVSIM_REAL(pthread_rwlock_timedrdlock)(rw, at);
  const Deadline d{CLOCK_REALTIME, at};
  return rw_acquire(rw, false, &d);
}

int pthread_rwlock_timedwrlock(pthread_rwlock_t* rw, const struct timespec* at) {
  if (!simulated()) return KVSIM_REAL(pthread_rwlock_timedwrlock)(rw, at);
  const Deadline d{CLOCK_REALTIME, at};
  return rw_acquire(rw, true, &d);
}

int pthread_rwlock_clockrdlock(pthread_rwlock_t* rw, clockid_t clock, const struct timespec* at) {
  if (!simulated()) return KVSIM_REAL(pthread_rwlock_clockrdlock)(rw, clock, at);
  const Deadline d{clock, at};
  return rw_acquire(rw, false, &d);
}

int pthread_rwlock_clockwrlock(pthread_rwlock_t* rw, clockid_t clock, const struct timespec* at) {
  if (!simulated()) return KVSIM_REAL(pthread_rwlock_clockwrlock)(rw, clock, at);
  const Deadline d{clock, at};
  return rw_acquire(rw, true, &d);
}

int pthread_rwlock_unlock(pthread_rwlock_t* rw) {
  const int rc = KVSIM_REAL(pthread_rwlock_unlock)(rw);
  if (rc == 0 && simulated()) wake(rw, kAll);  // readers and writers try again
  return rc;
}

int pthread_spin_lock(pthread_spinlock_t* s) {
  if (!simulated()) return KVSIM_REAL(pthread_spin_lock)(s);
  return acquire(
      kvsim::cpp::preload::object_key(const_cast<int*>(s), false), WaitKind::kMutex, nullptr,
      [s] { return KVSIM_REAL(pthread_spin_trylock)(s); },
      [s] { return KVSIM_REAL(pthread_spin_lock)(s); });
}

int pthread_spin_unlock(pthread_spinlock_t* s) {
  const int rc = KVSIM_REAL(pthread_spin_unlock)(s);
  if (rc == 0 && simulated()) wake(const_cast<int*>(s), 1);
  return rc;
}

int pthread_barrier_init(pthread_barrier_t* b, const pthread_barrierattr_t* attr, unsigned count) {
  const int rc = KVSIM_REAL(pthread_barrier_init)(b, attr, count);  // checks count and attr
  if (rc == 0) barriers().add(b, count);
  return rc;
}

int pthread_barrier_destroy(pthread_barrier_t* b) {
  barriers().remove(b);
  return KVSIM_REAL(pthread_barrier_destroy)(b);
}

int pthread_barrier_wait(pthread_barrier_t* b) {
  bool known = false;
  if (!simulated()) return KVSIM_REAL(pthread_barrier_wait)(b);
  const std::optional<std::uint64_t> round = barriers().arrive(b, known);
  if (!known) return KVSIM_REAL(pthread_barrier_wait)(b);
  if (!round) {
    wake(b, kAll);
    return PTHREAD_BARRIER_SERIAL_THREAD;
  }
  while (barriers().round(b) == *round) {
    if (wait_on(b, WaitKind::kBarrier, std::nullopt) == WaitResult::kNoWorld) break;
  }
  return 0;
}

int sem_wait(sem_t* s) {
  if (!simulated()) return KVSIM_REAL(sem_wait)(s);
  return sem_acquire(s, nullptr);
}

int sem_timedwait(sem_t* s, const struct timespec* at) {
  if (!simulated()) return KVSIM_REAL(sem_timedwait)(s, at);
  const Deadline d{CLOCK_REALTIME, at};
  return sem_acquire(s, &d);
}

int sem_clockwait(sem_t* s, clockid_t clock, const struct timespec* at) {
  if (!simulated()) return KVSIM_REAL(sem_clockwait)(s, clock, at);
  const Deadline d{clock, at};
  return sem_acquire(s, &d);
}

int sem_post(sem_t* s) {
  const int rc = KVSIM_REAL(sem_post)(s);
  if (rc == 0 && simulated()) wake(kvsim::cpp::preload::object_key(s, process_shared(s)), 1);
  return rc;
}

int sched_yield() {
  if (!simulated()) return KVSIM_REAL(sched_yield)();
  // The other ready threads of the program run first (a wait of no time queues this one last).
  (void)kvsim::cpp::preload::sleep_ps(0);
  return 0;
}

}  // extern "C"
