// Random bytes of a launched program: getrandom and getentropy give a seeded stream, so that
// what a program draws (Python's hash seed and `random` module, UUIDs, ports) replays with the
// launch (as Shadow does). The seed is KVSIM_RANDOM_SEED, which the launcher derives from the
// launch's seed and the program's rank. /dev/urandom opened as a file stays real.
#include <sys/random.h>
#include <sys/types.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cpp/preload/real_calls.h"
#include "cpp/preload/spin_lock.h"

namespace kvsim::cpp::preload {
namespace {

SpinLock g_lock;
bool g_seeded = false;
std::uint64_t g_state = 0;

// SplitMix64 (Steele, Lea, Flood 2014): a full-period 64-bit stream from any seed.
std::uint64_t next_u64() {
  std::uint64_t z = (g_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void fill(void* out, std::size_t n) {
  SpinLock::Guard guard(g_lock);
  if (!g_seeded) {
    const char* seed = std::getenv("KVSIM_RANDOM_SEED");
    g_state = seed != nullptr ? std::strtoull(seed, nullptr, 10) : 0;
    g_seeded = true;
  }
  auto* bytes = static_cast<unsigned char*>(out);
  while (n > 0) {
    const std::uint64_t word = next_u64();
    const std::size_t k = n < sizeof(word) ? n : sizeof(word);
    std::memcpy(bytes, &word, k);
    bytes += k;
    n -= k;
  }
}

}  // namespace
}  // namespace kvsim::cpp::preload

extern "C" {

ssize_t getrandom(void* buf, size_t n, unsigned int flags) {
  using namespace kvsim::cpp::preload;
  if (!simulated()) return KVSIM_REAL(getrandom)(buf, n, flags);
  if (n > 33554431) n = 33554431;  // the kernel's limit for one call
  fill(buf, n);
  return static_cast<ssize_t>(n);
}

int getentropy(void* buf, size_t n) {
  using namespace kvsim::cpp::preload;
  if (!simulated()) return KVSIM_REAL(getentropy)(buf, n);
  if (n > 256) {
    errno = EIO;
    return -1;
  }
  fill(buf, n);
  return 0;
}
}
