#include "cpp/preload/real_calls.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cpp/client/channel.h"

extern "C" void __tsan_init() __attribute__((weak));  // defined only in a program built with TSan

namespace kvsim::cpp::preload {

using client::Channel;

void* next_symbol(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn == nullptr) std::abort();  // the C library lacks a function the shim wraps
  return fn;
}

// Under ThreadSanitizer: whether the calling thread is the program's (1) or TSan's own (-1):
// TSan's background thread, and a new thread while TSan sets it up (its allocator reads the
// clock), make calls that are not the program's. 0: not known yet.
thread_local signed char t_program_thread = 0;

bool under_tsan() {
  return &__tsan_init != nullptr;
}

void mark_program_thread() {
  t_program_thread = 1;
}

bool simulated() {
  if (t_program_thread <= 0 && under_tsan()) {
    // The main thread is the program's from the start; any other thread only once the shim's
    // thread start (cpp/preload/thread_calls.cpp) has run on it.
    if (t_program_thread == 0) {  // raw: getpid is the shim's own (process_calls.cpp)
      t_program_thread = syscall(SYS_getpid) == syscall(SYS_gettid) ? 1 : -1;
    }
    if (t_program_thread < 0) return false;
  }
  // Making the channel allocates, and an allocator may read the clock (ThreadSanitizer's does):
  // a call that comes back here while this thread makes the channel gets the real clock.
  static std::atomic<bool> ready{false};
  thread_local bool making = false;
  if (!ready.load(std::memory_order_acquire)) {
    if (making) return false;
    making = true;
    Channel::get();
    making = false;
    ready.store(true, std::memory_order_release);
  }
  return Channel::get().launched();
}

bool wall_clock() {
  static const bool on = [] {
    const char* v = std::getenv("KVSIM_WALL_CLOCK");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

std::uint64_t now_ps() {
  return Channel::get().now_ps();
}

bool sleep_ps(std::uint64_t ps) {
  return Channel::get().call(wire::Op::kSleep, wire::Writer().u64(ps).take()).has_value();
}

}  // namespace kvsim::cpp::preload

namespace {

// A launched program's stdout goes to a pipe, which would make it fully buffered: line
// buffering, as on a terminal, lets its lines appear at the simulated time it printed them.
__attribute__((constructor)) void line_buffered_stdout() {
  if (kvsim::cpp::preload::simulated()) std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);
}

}  // namespace
