// Clocks and sleeps of a launched program in simulated time: the wall clocks read
// 2025-01-01T00:00:00Z plus the simulated time (as launched Python scripts' time.time()), the
// monotonic ones the simulated time itself; sleeps wait in simulated time. CPU-time clocks stay
// real. A thread that reads a clock 100,000 times in a row without any other kvsim call is taken
// to spin on it and waits 1 us of simulated time, so that busy-wait loops end; while it goes on
// spinning, every further 1,000 reads wait twice as long as the last step, up to 1 ms. (An
// interpreter's start reads the clock thousands of times without spinning: CPython with torch
// reads it about 14,000 times, which a lower first threshold turned into simulated time.) Outside a
// launch every call goes to the C library.
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "cpp/client/channel.h"
#include "cpp/preload/real_calls.h"
#include "cpp/preload/spin_rule.h"

namespace {

using kvsim::cpp::preload::now_ps;
using kvsim::cpp::preload::simulated;
using kvsim::cpp::preload::sleep_ps;
using kvsim::cpp::preload::wall_clock;

constexpr std::int64_t kEpoch = 1735689600;  // 2025-01-01T00:00:00Z, as kvsim.hosting's clocks
constexpr std::uint64_t kPsPerNs = 1000;
constexpr std::uint64_t kPsPerSecond = 1'000'000'000'000ULL;
// Clock reads in a row without any other kvsim call (cpp/preload/spin_rule.h).
thread_local kvsim::cpp::preload::SpinRule t_spin(100'000, 1000);

bool simulated_clock(clockid_t id) {
  switch (id) {
    case CLOCK_REALTIME:
    case CLOCK_REALTIME_COARSE:
    case CLOCK_TAI:
    case CLOCK_MONOTONIC:
    case CLOCK_MONOTONIC_RAW:
    case CLOCK_MONOTONIC_COARSE:
    case CLOCK_BOOTTIME:
      return true;
    default:
      return false;  // CPU-time clocks
  }
}

bool wall(clockid_t id) {
  return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_TAI;
}

// Simulated time, with the spin rule.
std::uint64_t read_clock() {
  auto& channel = kvsim::cpp::client::Channel::get();
  if (const std::uint64_t wait = t_spin.idle(channel.calls_made()); wait > 0) {
    (void)sleep_ps(wait);
    t_spin.waited(channel.calls_made());
  }
  return now_ps();
}

timespec to_timespec(std::uint64_t ps, bool wall_clock_base) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ps / kPsPerSecond) + (wall_clock_base ? kEpoch : 0);
  ts.tv_nsec = static_cast<long>((ps % kPsPerSecond) / kPsPerNs);
  return ts;
}

std::uint64_t to_ps(const timespec& ts) {
  if (ts.tv_sec < 0) return 0;
  return static_cast<std::uint64_t>(ts.tv_sec) * kPsPerSecond +
         static_cast<std::uint64_t>(ts.tv_nsec) * kPsPerNs;
}

bool bad(const timespec* ts) {
  return ts == nullptr || ts->tv_nsec < 0 || ts->tv_nsec >= 1'000'000'000L || ts->tv_sec < 0;
}

}  // namespace

extern "C" {

int clock_gettime(clockid_t id, struct timespec* ts) {
  if (!simulated() || wall_clock() || !simulated_clock(id)) {
    return KVSIM_REAL(clock_gettime)(id, ts);
  }
  *ts = to_timespec(read_clock(), wall(id));
  return 0;
}

int gettimeofday(struct timeval* tv, void* tz) {
  if (!simulated() || wall_clock()) {
    return KVSIM_REAL(gettimeofday)(tv, static_cast<struct timezone*>(tz));
  }
  const timespec ts = to_timespec(read_clock(), true);
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = ts.tv_nsec / 1000;
  if (tz != nullptr) {
    auto* zone = static_cast<struct timezone*>(tz);
    zone->tz_minuteswest = 0;
    zone->tz_dsttime = 0;
  }
  return 0;
}

time_t time(time_t* out) {
  if (!simulated() || wall_clock()) return KVSIM_REAL(time)(out);
  const time_t now = to_timespec(read_clock(), true).tv_sec;
  if (out != nullptr) *out = now;
  return now;
}

int timespec_get(struct timespec* ts, int base) {
  if (!simulated() || wall_clock() || base != TIME_UTC) return KVSIM_REAL(timespec_get)(ts, base);
  *ts = to_timespec(read_clock(), true);
  return base;
}

int nanosleep(const struct timespec* req, struct timespec* rem) {
  if (!simulated()) return KVSIM_REAL(nanosleep)(req, rem);
  if (bad(req)) {
    errno = EINVAL;
    return -1;
  }
  if (!sleep_ps(to_ps(*req))) return KVSIM_REAL(nanosleep)(req, rem);
  if (rem != nullptr) *rem = timespec{};
  return 0;
}

int clock_nanosleep(clockid_t id, int flags, const struct timespec* req, struct timespec* rem) {
  if (!simulated() || !simulated_clock(id)) return KVSIM_REAL(clock_nanosleep)(id, flags, req, rem);
  if (bad(req)) return EINVAL;
  std::uint64_t ps = to_ps(*req);
  if ((flags & TIMER_ABSTIME) != 0) {
    // An absolute time on the program's (simulated) clock.
    const std::uint64_t base = wall(id) ? static_cast<std::uint64_t>(kEpoch) * kPsPerSecond : 0;
    const std::uint64_t now = now_ps() + base;
    ps = ps > now ? ps - now : 0;
  }
  if (!sleep_ps(ps)) return KVSIM_REAL(clock_nanosleep)(id, flags, req, rem);
  if (rem != nullptr && (flags & TIMER_ABSTIME) == 0) *rem = timespec{};
  return 0;
}

int usleep(useconds_t us) {
  if (!simulated()) return KVSIM_REAL(usleep)(us);
  if (!sleep_ps(static_cast<std::uint64_t>(us) * 1'000'000ULL)) return KVSIM_REAL(usleep)(us);
  return 0;
}

unsigned int sleep(unsigned int s) {
  if (!simulated()) return KVSIM_REAL(sleep)(s);
  if (!sleep_ps(static_cast<std::uint64_t>(s) * kPsPerSecond)) return KVSIM_REAL(sleep)(s);
  return 0;
}

}  // extern "C"
