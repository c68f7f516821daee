#include "cpp/preload/real_calls.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cpp/client/channel.h"

namespace kvsim::cpp::preload {

using client::Channel;

void* next_symbol(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn == nullptr) std::abort();  // the C library lacks a function the shim wraps
  return fn;
}

bool simulated() {
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
