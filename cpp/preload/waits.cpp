#include "cpp/preload/waits.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <unordered_map>

#include "cpp/client/channel.h"
#include "cpp/preload/spin_lock.h"

namespace kvsim::cpp::preload {

namespace {

using client::Channel;

// How many threads of this program wait on each key: a wake with nobody waiting (every unlock of
// an uncontended mutex) costs no world call. Only one thread of the program runs at a time; the
// lock covers threads of a forked child and a new thread's start, which run beside it.
class Waiting {
 public:
  void add(std::uint64_t key, int delta) {
    kvsim::cpp::preload::SpinLock::Guard g(lock_);
    int& n = (*counts_)[key];
    n += delta;
    if (n <= 0) counts_->erase(key);
  }
  bool any(std::uint64_t key) {
    kvsim::cpp::preload::SpinLock::Guard g(lock_);
    return counts_->count(key) != 0;
  }

 private:
  kvsim::cpp::preload::SpinLock lock_;
  // Never destroyed: threads may still wait while the program exits.
  std::unordered_map<std::uint64_t, int>* counts_ = new std::unordered_map<std::uint64_t, int>();
};

Waiting& waiting() {
  static auto* w = new Waiting();
  return *w;
}

std::uint64_t key_of(const void* p) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p));
}

constexpr std::uint64_t kPsPerSecond = 1'000'000'000'000ULL;

}  // namespace

WaitResult wait_on(const void* key, wire::WaitKind kind, std::optional<std::uint64_t> timeout_ps) {
  const std::uint64_t k = key_of(key);
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  const std::int64_t timeout =
      timeout_ps ? static_cast<std::int64_t>(std::min(*timeout_ps, kMax)) : -1;
  waiting().add(k, 1);
  const auto reply = Channel::get().call(
      wire::Op::kWait,
      wire::Writer().u64(k).u8(static_cast<std::uint8_t>(kind)).i64(timeout).take());
  waiting().add(k, -1);
  if (!reply) return WaitResult::kNoWorld;
  try {
    return wire::Reader(*reply).boolean() ? WaitResult::kWoken : WaitResult::kTimedOut;
  } catch (const wire::WireError&) {
    return WaitResult::kNoWorld;
  }
}

void wake(const void* key, std::uint32_t n) {
  const std::uint64_t k = key_of(key);
  if (!waiting().any(k)) return;
  (void)Channel::get().call(wire::Op::kWake, wire::Writer().u64(k).u32(n).take());
}

bool join_slot(std::int64_t slot) {
  return Channel::get().call(wire::Op::kJoin, wire::Writer().i64(slot).take()).has_value();
}

std::optional<std::uint64_t> time_left(const Deadline& d) {
  if (d.at == nullptr || d.at->tv_sec < 0 || d.at->tv_nsec < 0 || d.at->tv_nsec >= 1'000'000'000L) {
    return std::nullopt;
  }
  if (d.clock != CLOCK_REALTIME && d.clock != CLOCK_MONOTONIC) return std::nullopt;
  timespec now{};
  ::clock_gettime(d.clock, &now);  // the shim's: simulated unless --wall-clock
  std::int64_t sec = static_cast<std::int64_t>(d.at->tv_sec) - now.tv_sec;
  std::int64_t nsec = static_cast<std::int64_t>(d.at->tv_nsec) - now.tv_nsec;
  if (nsec < 0) {
    nsec += 1'000'000'000;
    --sec;
  }
  if (sec < 0) return 0;
  constexpr std::int64_t kMaxSeconds = 18'000'000;  // 2^64 ps is 1.8e7 s
  if (sec >= kMaxSeconds) return std::numeric_limits<std::uint64_t>::max();
  return static_cast<std::uint64_t>(sec) * kPsPerSecond + static_cast<std::uint64_t>(nsec) * 1000;
}

}  // namespace kvsim::cpp::preload
