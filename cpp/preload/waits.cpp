#include "cpp/preload/waits.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <unordered_map>
#include <vector>

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

// Where shared mappings come from: [start, end) -> the key of their first byte. Read from
// /proc/self/maps when an address is not known yet.
struct SharedMapping {
  std::uintptr_t start = 0;
  std::uintptr_t end = 0;
  std::uint64_t base = 0;  // a hash of device, inode and file offset
};

class SharedMappings {
 public:
  std::uint64_t key(std::uintptr_t addr) {
    {
      kvsim::cpp::preload::SpinLock::Guard g(lock_);
      for (const SharedMapping& m : *maps_) {
        if (addr >= m.start && addr < m.end) return (m.base + (addr - m.start)) | kSharedKey;
      }
    }
    std::vector<SharedMapping> fresh = read_maps();
    kvsim::cpp::preload::SpinLock::Guard g(lock_);
    *maps_ = std::move(fresh);
    for (const SharedMapping& m : *maps_) {
      if (addr >= m.start && addr < m.end) return (m.base + (addr - m.start)) | kSharedKey;
    }
    return 0;
  }

 private:
  static std::vector<SharedMapping> read_maps() {
    std::vector<SharedMapping> out;
    std::FILE* f = std::fopen("/proc/self/maps", "re");
    if (f == nullptr) return out;
    char line[512];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      unsigned long start = 0, end = 0, offset = 0, inode = 0;
      unsigned dev_major = 0, dev_minor = 0;
      char perms[8] = {};
      if (std::sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &start, &end, perms, &offset, &dev_major,
                      &dev_minor, &inode) != 7 ||
          perms[3] != 's' || inode == 0) {
        continue;  // only shared mappings of a file or shared-memory object
      }
      // FNV-1a over (device, inode), plus the file offset: a page's key in every process.
      std::uint64_t h = 14695981039346656037ULL;
      for (unsigned long v :
           {static_cast<unsigned long>(dev_major), static_cast<unsigned long>(dev_minor), inode}) {
        for (int i = 0; i < 8; ++i) {
          h ^= (v >> (8 * i)) & 0xffU;
          h *= 1099511628211ULL;
        }
      }
      out.push_back({start, end, ((h << 24) + offset) & ~kSharedKey});
    }
    std::fclose(f);
    return out;
  }

  kvsim::cpp::preload::SpinLock lock_;
  std::vector<SharedMapping>* maps_ = new std::vector<SharedMapping>();  // never destroyed
};

SharedMappings& shared_mappings() {
  static auto* m = new SharedMappings();
  return *m;
}

constexpr std::uint64_t kPsPerSecond = 1'000'000'000'000ULL;

}  // namespace

std::uint64_t object_key(const void* object, bool process_shared) {
  const auto addr = reinterpret_cast<std::uintptr_t>(object);
  if (process_shared) {
    if (const std::uint64_t k = shared_mappings().key(addr); k != 0) return k;
  }
  return static_cast<std::uint64_t>(addr) & ~kSharedKey;
}

WaitResult wait_on(std::uint64_t k, wire::WaitKind kind, std::optional<std::uint64_t> timeout_ps) {
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

void wake(std::uint64_t k, std::uint32_t n) {
  if ((k & kSharedKey) == 0 && !waiting().any(k)) return;
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
