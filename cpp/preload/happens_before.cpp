#include "cpp/preload/happens_before.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "cpp/preload/spin_lock.h"
#include "cpp/wire/vector_clock.h"

namespace kvsim::cpp::preload::hb {

namespace {

using wire::VectorClock;

// A thread's id in every clock of the launch: KVSIM_PID (4000 + rank, distinct per process) in
// the high half, the thread's number within the process in the low half.
std::atomic<std::uint32_t> g_process{0xffffffffU};
std::atomic<std::uint32_t> g_next_thread{0};

std::uint32_t new_thread_id() {
  std::uint32_t process = g_process.load();
  if (process == 0xffffffffU) {
    const char* pid = std::getenv("KVSIM_PID");
    process = pid != nullptr ? static_cast<std::uint32_t>(std::strtoul(pid, nullptr, 10)) : 0U;
    g_process.store(process);
  }
  return (process << 16) | (g_next_thread.fetch_add(1) & 0xffffU);
}

struct ThreadClock {
  std::uint32_t id = new_thread_id();
  VectorClock clock;
  ThreadClock() { clock.set(id, 1); }
  void tick() { clock.set(id, clock.get(id) + 1); }
};

ThreadClock& mine() {
  // Never destroyed: a thread's last calls may come after thread-local destructors ran.
  static thread_local ThreadClock* c = new ThreadClock();
  return *c;
}

class Keys {
 public:
  void release(std::uint64_t key, const VectorClock& clock) {
    SpinLock::Guard g(lock_);
    (*kept_)[key].join(clock);
  }
  bool get(std::uint64_t key, VectorClock& out) {
    SpinLock::Guard g(lock_);
    const auto it = kept_->find(key);
    if (it == kept_->end()) return false;
    out = it->second;
    return true;
  }

 private:
  SpinLock lock_;
  std::unordered_map<std::uint64_t, VectorClock>* kept_ =
      new std::unordered_map<std::uint64_t, VectorClock>();  // never destroyed
};

Keys& keys() {
  static auto* k = new Keys();
  return *k;
}

}  // namespace

std::uint32_t thread_id() {
  return mine().id;
}

void become_child(std::uint32_t launch_pid) {
  g_process.store(launch_pid);
  g_next_thread.store(0);
  ThreadClock& c = mine();  // what the parent did before the fork stays before the child
  c.id = new_thread_id();
  c.clock.set(c.id, 1);
}

std::string release_stamp() {
  ThreadClock& c = mine();
  std::string stamp = c.clock.encode();
  c.tick();
  return stamp;
}

void absorb(const std::string& stamp) {
  try {
    mine().clock.join(VectorClock::decode(stamp));
  } catch (...) {  // a stamp that does not decode orders nothing
  }
}

void release(std::uint64_t key) {
  ThreadClock& c = mine();
  keys().release(key, c.clock);
  c.tick();
}

void acquire(std::uint64_t key) {
  VectorClock kept;
  if (keys().get(key, kept)) mine().clock.join(kept);
}

}  // namespace kvsim::cpp::preload::hb

// For Python programs (ctypes): the edges of their own synchronisation objects, and the stamp
// a call carries to the rule checker.
extern "C" {

/// Joins the calling thread's clock into the clock kept under `key`.
__attribute__((visibility("default"))) void kvsim_hb_release(std::uint64_t key) {
  kvsim::cpp::preload::hb::release(key);
}

/// Joins the clock kept under `key` into the calling thread's clock.
__attribute__((visibility("default"))) void kvsim_hb_acquire(std::uint64_t key) {
  kvsim::cpp::preload::hb::acquire(key);
}

/// The calling thread's id in every clock.
__attribute__((visibility("default"))) std::uint32_t kvsim_hb_thread() {
  return kvsim::cpp::preload::hb::thread_id();
}

/// Copies the calling thread's clock (the encoding of cpp/wire/vector_clock.h) into `out` if it
/// fits in `capacity` bytes; returns its size either way.
__attribute__((visibility("default"))) std::size_t kvsim_hb_stamp(char* out, std::size_t capacity) {
  const std::string stamp = kvsim::cpp::preload::hb::release_stamp();
  if (stamp.size() <= capacity && out != nullptr) std::memcpy(out, stamp.data(), stamp.size());
  return stamp.size();
}
}
