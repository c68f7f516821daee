// The shim's view of the C library it stands in front of: the real functions (the next
// definitions after the preloaded library's, dlsym RTLD_NEXT) and whether this process's calls
// are simulated at all.
#pragma once

#include <atomic>
#include <cstdint>

namespace kvsim::cpp::preload {

/// The next definition of `name` (the C library's), resolved once per call site.
void* next_symbol(const char* name);

template <typename F>
F* real(const char* name) {
  return reinterpret_cast<F*>(next_symbol(name));
}

/// The real `fn`, looked up once per use site.
#define KVSIM_REAL(fn)                                                          \
  ([] {                                                                         \
    static auto* const next = ::kvsim::cpp::preload::real<decltype(::fn)>(#fn); \
    return next;                                                                \
  }())

/// The real `fn` for the signal wrappers, which ThreadSanitizer's start-up calls before it has a
/// thread state: a constant-initialised atomic, not a guarded static, since TSan's
/// __cxa_guard_release interceptor crashes there.
#define KVSIM_REAL_EARLY(fn)                                \
  ([] {                                                     \
    static std::atomic<decltype(::fn)*> next{nullptr};      \
    auto* f = next.load(std::memory_order_acquire);         \
    if (f == nullptr) {                                     \
      f = ::kvsim::cpp::preload::real<decltype(::fn)>(#fn); \
      next.store(f, std::memory_order_release);             \
    }                                                       \
    return f;                                               \
  }())

/// True in a launched program (not in a child it forked, nor in any other program), on one of
/// the program's threads (not ThreadSanitizer's own).
bool simulated();
/// True if this process runs ThreadSanitizer's runtime (a program built with -fsanitize=thread).
bool under_tsan();
/// The calling thread is the program's (the shim's thread start, before the program's routine).
void mark_program_thread();
/// True when clocks read the host's time (kvsim launch --wall-clock); sleeps stay simulated.
bool wall_clock();
/// Simulated time of the calling thread, in picoseconds.
std::uint64_t now_ps();
/// Lets `ps` of simulated time pass for the calling thread; false if the world cannot answer.
bool sleep_ps(std::uint64_t ps);
/// Makes the calling thread's time-stamp counter real (true), before an exec, or trapped again
/// (false), after a failed one (cpp/preload/tsc_calls.cpp).
void tsc_real_for_exec(bool real);

}  // namespace kvsim::cpp::preload
