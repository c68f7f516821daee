// Waiting and waking between threads of a launched program: a thread that cannot go on (a held
// mutex, an empty semaphore, a condition not yet signalled, a thread not yet ended) waits in the
// world, keyed by the address of what it waits on, and the thread that changes it wakes it
// (Op::kWait, kWake, kJoin). The world runs one thread of a program at a time and registers a
// wait before any other thread of the program runs, so a try-then-wait never misses a wake.
#pragma once

#include <time.h>

#include <cstdint>
#include <optional>

#include "cpp/wire/wire.h"

namespace kvsim::cpp::preload {

enum class WaitResult { kWoken, kTimedOut, kNoWorld };

/// The key a wait on `object` is known by: its address, or, for an object in memory shared
/// between processes (a semaphore of sem_open or sem_init(pshared=1): multiprocessing's locks
/// and queues), the same key in every process that maps it (file or shared-memory object and
/// offset, from /proc/self/maps), with kSharedKey set: the world keeps its waiters launch-wide.
std::uint64_t object_key(const void* object, bool process_shared);
inline constexpr std::uint64_t kSharedKey = std::uint64_t{1} << 63;

/// Waits for a wake of `key` or for `timeout_ps` of simulated time (nullopt: no limit).
WaitResult wait_on(std::uint64_t key, wire::WaitKind kind, std::optional<std::uint64_t> timeout_ps);
inline WaitResult wait_on(const void* object, wire::WaitKind kind,
                          std::optional<std::uint64_t> timeout_ps) {
  return wait_on(object_key(object, false), kind, timeout_ps);
}
/// Wakes up to `n` waiters of `key`, oldest first; asks the world only if this program has any
/// (always, for a shared key: its waiters may be in other processes).
void wake(std::uint64_t key, std::uint32_t n);
inline void wake(const void* object, std::uint32_t n) {
  wake(object_key(object, false), n);
}
/// Waits until thread `slot` of this program has ended (false if the world cannot answer).
bool join_slot(std::int64_t slot);

/// A deadline on one of the program's clocks, as the timed pthread and semaphore calls take it.
struct Deadline {
  clockid_t clock;
  const timespec* at;
};
/// Picoseconds from now until the deadline (0 if it passed); nullopt for an invalid time or a
/// clock that cannot time a wait (EINVAL).
std::optional<std::uint64_t> time_left(const Deadline& d);

}  // namespace kvsim::cpp::preload
