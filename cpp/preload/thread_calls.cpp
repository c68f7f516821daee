// Threads of a launched program: pthread_create announces the new thread to the world before it
// starts, so that the world gives it its turn after the threads ready before it (one thread of a
// program runs at a time) and counts the program as running until that thread connects; its
// start would otherwise be invisible, and what ran first would depend on the host's scheduling.
// pthread_join waits in the world until the thread has ended (then the C library's join, which
// returns at once or after the thread's last instructions). Both are happens-before edges of the
// rule checker (cpp/preload/happens_before.h).
//
// Under ThreadSanitizer (a program built with -fsanitize=thread) the program's pthread_create is
// TSan's interceptor, which reaches this one as its REAL(pthread_create) with TSan's own start
// routine and a ThreadParam (compiler-rt lib/tsan/rtl/tsan_interceptors_posix.cpp). That start
// routine sets the thread up for TSan before it calls the program's routine, and nothing may
// run on the thread before it (an allocation there crashes). So under TSan the shim's start
// wraps the program's routine inside ThreadParam, whose first two members are that routine and
// its argument, and runs after TSan's set-up; the calls TSan makes on the thread before then
// (its allocator reads the clock) are not simulated (real_calls.h simulated()). TSan's own
// threads (its background thread, started by sanitizer_common's internal_start_thread with a
// null argument) are not announced, or the world would wait for their first call forever.
#include <pthread.h>

#include <atomic>
#include <string>
#include <unordered_map>

#include "cpp/client/channel.h"
#include "cpp/preload/happens_before.h"
#include "cpp/preload/real_calls.h"
#include "cpp/preload/spin_lock.h"
#include "cpp/preload/waits.h"

namespace {

using kvsim::cpp::client::Channel;

struct Start {
  void* (*fn)(void*);
  void* arg;
  std::int64_t slot;
  std::string stamp;  ///< the creating thread's clock
};

// The key under which a thread's last clock waits for its joiner.
std::uint64_t end_key(std::int64_t slot) {
  return (std::uint64_t{1} << 62) | static_cast<std::uint64_t>(slot);
}

void* start_announced(void* p) {
  const Start start = *static_cast<Start*>(p);
  delete static_cast<Start*>(p);
  kvsim::cpp::preload::mark_program_thread();
  kvsim::cpp::preload::hb::absorb(start.stamp);
  Channel::get().adopt_thread(start.slot);
  void* result = start.fn(start.arg);
  if (start.slot >= 0) kvsim::cpp::preload::hb::release(end_key(start.slot));
  return result;
}

// The world's slot of each thread this program started, for pthread_join.
class Slots {
 public:
  void put(pthread_t t, std::int64_t slot) {
    kvsim::cpp::preload::SpinLock::Guard g(lock_);
    (*slots_)[t] = slot;
  }
  std::int64_t take(pthread_t t) {
    kvsim::cpp::preload::SpinLock::Guard g(lock_);
    auto it = slots_->find(t);
    if (it == slots_->end()) return -1;
    const std::int64_t slot = it->second;
    slots_->erase(it);
    return slot;
  }

 private:
  kvsim::cpp::preload::SpinLock lock_;
  std::unordered_map<pthread_t, std::int64_t>* slots_ =
      new std::unordered_map<pthread_t, std::int64_t>();  // never destroyed
};

Slots& slots() {
  static auto* s = new Slots();
  return *s;
}

/// The head of compiler-rt's tsan ThreadParam: the program's routine and argument.
struct TsanThreadParam {
  void* (*callback)(void*);
  void* param;
};

}  // namespace

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*),
                              void* arg) {
  if (!kvsim::cpp::preload::simulated()) return KVSIM_REAL(pthread_create)(thread, attr, fn, arg);
  const bool tsan = kvsim::cpp::preload::under_tsan();
  if (tsan && arg == nullptr) return KVSIM_REAL(pthread_create)(thread, attr, fn, arg);
  const std::int64_t slot = Channel::get().announce_thread();
  int rc = 0;
  Start* start = nullptr;
  if (tsan) {  // wraps the program's routine, which TSan's start routine calls after its set-up
    auto* param = static_cast<TsanThreadParam*>(arg);
    start =
        new Start{param->callback, param->param, slot, kvsim::cpp::preload::hb::release_stamp()};
    param->callback = start_announced;
    param->param = start;
    rc = KVSIM_REAL(pthread_create)(thread, attr, fn, arg);
    if (rc != 0) {
      param->callback = start->fn;
      param->param = start->arg;
    }
  } else {
    start = new Start{fn, arg, slot, kvsim::cpp::preload::hb::release_stamp()};
    rc = KVSIM_REAL(pthread_create)(thread, attr, start_announced, start);
  }
  if (rc != 0) {
    delete start;
    Channel::get().cancel_thread(slot);
  } else if (slot >= 0) {
    slots().put(*thread, slot);
  }
  return rc;
}

extern "C" int pthread_join(pthread_t thread, void** result) {
  if (kvsim::cpp::preload::simulated()) {
    const std::int64_t slot = slots().take(thread);
    if (slot >= 0 && kvsim::cpp::preload::join_slot(slot)) {
      kvsim::cpp::preload::hb::acquire(end_key(slot));
    }
  }
  return KVSIM_REAL(pthread_join)(thread, result);
}

// GNU spelling: glibc declares it __attribute__((__noreturn__)), and clang rejects [[noreturn]]
// on a declaration after one without it.
extern "C" __attribute__((noreturn)) void pthread_exit(void* result) {
  if (kvsim::cpp::preload::simulated()) Channel::get().main_thread_exits_alone();
  KVSIM_REAL(pthread_exit)(result);
  __builtin_unreachable();
}

extern "C" int pthread_detach(pthread_t thread) {
  const int rc = KVSIM_REAL(pthread_detach)(thread);
  if (rc == 0) (void)slots().take(thread);  // its pthread_t may be reused by a later thread
  return rc;
}
