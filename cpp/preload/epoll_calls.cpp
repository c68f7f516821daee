// epoll of a launched program (what libzmq's I/O threads and asyncio's event loop wait with):
// an epoll descriptor is a real one, which holds the program's other descriptors, while this
// file keeps the simulated ones it watches (cpp/preload/socket_calls.h). epoll_wait is one poll
// over both: the simulated descriptors waited for in simulated time, the real ones looked at once
// (through the real epoll descriptor's own readiness). Each set has a doorbell, a simulated
// eventfd that epoll_ctl rings while a thread waits, so that a descriptor added by another
// thread wakes the wait as the kernel's does (gloo's loop thread waits on a set its main thread
// fills later). Entries report in the order they were added. EPOLLONESHOT disables an entry once it
// reports; an EPOLLET entry reports a condition once, and again only after the program read or
// wrote that descriptor (buffers are unbounded, so a condition does not come and go by itself).
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <map>
#include <vector>

#include "cpp/preload/real_calls.h"
#include "cpp/preload/socket_calls.h"
#include "cpp/preload/spin_lock.h"

namespace {

using kvsim::cpp::preload::emulated;
using kvsim::cpp::preload::simulated;

struct Entry {
  int fd;
  epoll_event event;
  bool disabled = false;    ///< EPOLLONESHOT fired
  std::uint32_t quiet = 0;  ///< EPOLLET: conditions reported and not re-armed yet
};

/// One epoll descriptor's simulated entries, its doorbell, and how many threads wait on it.
struct Set {
  std::vector<Entry> entries;
  int bell = -1;
  int waiters = 0;
};

class Sets {
 public:
  struct Guard : kvsim::cpp::preload::SpinLock::Guard {
    explicit Guard(Sets& s) : kvsim::cpp::preload::SpinLock::Guard(s.lock_) {}
  };
  /// The set of epoll descriptor `epfd`; nullptr if it is none of the program's.
  Set* find(int epfd) {
    auto it = sets_->find(epfd);
    return it == sets_->end() ? nullptr : &it->second;
  }
  void create(int epfd, int bell) { (*sets_)[epfd] = Set{{}, bell, 0}; }
  /// Forgets `fd` as a set and as an entry; returns the doorbell to close if it was a set.
  int forget(int fd) {
    int bell = -1;
    auto set = sets_->find(fd);
    if (set != sets_->end()) {
      bell = set->second.bell;
      sets_->erase(set);
    }
    for (auto& [epfd, s] : *sets_) {
      for (auto it = s.entries.begin(); it != s.entries.end(); ++it) {
        if (it->fd == fd) {
          s.entries.erase(it);
          break;
        }
      }
    }
    return bell;
  }

 private:
  kvsim::cpp::preload::SpinLock lock_;
  std::map<int, Set>* sets_ = new std::map<int, Set>();
};

Sets& sets() {
  static auto* s = new Sets();
  return *s;
}

int fail(int error) {
  errno = error;
  return -1;
}

constexpr std::uint32_t kConditions =
    EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLRDHUP;

// The doorbell to ring after a change to `set`, or -1 if no thread waits on it.
int bell_to_ring(const Set* set) {
  return set != nullptr && set->waiters > 0 ? set->bell : -1;
}

// Wakes the threads waiting on a set. Never called with the sets' lock held: the write is a
// world call, at which another thread of the program may run and take that lock.
void ring(int bell) {
  if (bell >= 0) (void)eventfd_write(bell, 1);
}

// One look at `epfd`: simulated entries waited for up to `timeout_ps`, its real descriptors
// looked at once. -2 when only the doorbell rang (the caller looks again).
int wait_once(int epfd, epoll_event* events, int max, std::int64_t timeout_ps) {
  std::vector<pollfd> fds;
  std::vector<std::uint32_t> wanted;
  int bell = -1;
  {
    Sets::Guard g(sets());
    Set* set = sets().find(epfd);
    if (set == nullptr) return fail(EBADF);
    for (Entry& e : set->entries) {
      if (kvsim::cpp::preload::take_touched(e.fd)) e.quiet = 0;
      const std::uint32_t want =
          e.disabled ? 0 : (e.event.events | EPOLLERR | EPOLLHUP) & kConditions & ~e.quiet;
      if (want == 0) continue;
      fds.push_back({e.fd, static_cast<short>(want), 0});
      wanted.push_back(want);
    }
    bell = set->bell;
    ++set->waiters;
  }
  const std::size_t simulated_count = fds.size();
  fds.push_back({bell, POLLIN, 0});
  fds.push_back({epfd, POLLIN, 0});  // the real descriptors it holds
  const int n = kvsim::cpp::preload::poll_mixed(fds.data(), fds.size(), timeout_ps);
  const int error = errno;
  int out = 0;
  {
    Sets::Guard g(sets());
    Set* set = sets().find(epfd);
    if (set != nullptr) --set->waiters;
    for (std::size_t i = 0; n > 0 && set != nullptr && i < simulated_count && out < max; ++i) {
      const std::uint32_t got = static_cast<std::uint16_t>(fds[i].revents) & wanted[i];
      if (got == 0) continue;
      for (Entry& e : set->entries) {
        if (e.fd != fds[i].fd) continue;
        events[out].events = got;
        events[out].data = e.event.data;
        ++out;
        if (e.event.events & EPOLLONESHOT) e.disabled = true;
        if (e.event.events & EPOLLET) e.quiet |= got;
        break;
      }
    }
  }
  if (n < 0) return fail(error);
  if (out < max && (fds.back().revents & POLLIN)) {
    const int real = KVSIM_REAL(epoll_wait)(epfd, events + out, max - out, 0);
    if (real > 0) out += real;
  }
  if (fds[simulated_count].revents & POLLIN) {
    eventfd_t drained = 0;
    (void)eventfd_read(bell, &drained);  // readable, so it does not wait
    if (out == 0) return -2;
  }
  return out;
}

// epoll_wait over simulated entries (and the real ones, through `epfd`'s own readiness), until
// one reports or `timeout_ps` of simulated time (-1: no limit) passes.
int wait(int epfd, epoll_event* events, int max, std::int64_t timeout_ps) {
  if (events == nullptr) return fail(EFAULT);
  if (max <= 0) return fail(EINVAL);
  const std::uint64_t start = kvsim::cpp::preload::now_ps();
  for (;;) {
    std::int64_t left = timeout_ps;
    if (timeout_ps > 0) {
      const auto spent = static_cast<std::int64_t>(kvsim::cpp::preload::now_ps() - start);
      left = spent >= timeout_ps ? 0 : timeout_ps - spent;
    }
    const int r = wait_once(epfd, events, max, left);
    if (r != -2) return r;
  }
}

// EPOLL_CTL_ADD, MOD or DEL of simulated descriptor `fd` in `set` (the sets' lock held).
int change(Set* set, int epfd, int op, int fd, epoll_event* event) {
  if (set == nullptr) return fail(EBADF);
  if (fd == epfd) return fail(EINVAL);
  std::vector<Entry>* entries = &set->entries;
  auto it = entries->begin();
  while (it != entries->end() && it->fd != fd) ++it;
  switch (op) {
    case EPOLL_CTL_ADD:
      if (event == nullptr) return fail(EFAULT);
      if (it != entries->end()) return fail(EEXIST);
      entries->push_back(Entry{fd, *event});
      return 0;
    case EPOLL_CTL_MOD:
      if (event == nullptr) return fail(EFAULT);
      if (it == entries->end()) return fail(ENOENT);
      *it = Entry{fd, *event};
      return 0;
    case EPOLL_CTL_DEL:
      if (it == entries->end()) return fail(ENOENT);
      entries->erase(it);
      return 0;
    default:
      return fail(EINVAL);
  }
}

// True if `epfd` is an epoll descriptor of a launched program (made by the shim).
bool ours(int epfd) {
  if (!simulated()) return false;
  Sets::Guard g(sets());
  return sets().find(epfd) != nullptr;
}

}  // namespace

namespace kvsim::cpp::preload {

void forget_in_epolls(int fd) {
  int bell = -1;
  {
    Sets::Guard g(sets());
    bell = sets().forget(fd);
  }
  if (bell >= 0) close(bell);
}

}  // namespace kvsim::cpp::preload

extern "C" {

int epoll_create1(int flags) {
  const int epfd = KVSIM_REAL(epoll_create1)(flags);
  if (epfd < 0 || !simulated()) return epfd;
  const int bell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (bell < 0) {
    const int error = errno;
    KVSIM_REAL(close)(epfd);
    return fail(error);
  }
  Sets::Guard g(sets());
  sets().create(epfd, bell);
  return epfd;
}

int epoll_create(int size) {
  if (size <= 0) return fail(EINVAL);
  return epoll_create1(0);
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event* event) {
  if (!simulated()) return KVSIM_REAL(epoll_ctl)(epfd, op, fd, event);
  int bell = -1;
  int r = 0;
  if (!emulated(fd)) {
    r = KVSIM_REAL(epoll_ctl)(epfd, op, fd, event);
    Sets::Guard g(sets());
    if (r == 0) bell = bell_to_ring(sets().find(epfd));
  } else {
    Sets::Guard g(sets());
    r = change(sets().find(epfd), epfd, op, fd, event);
    if (r == 0 && op != EPOLL_CTL_DEL) bell = bell_to_ring(sets().find(epfd));
  }
  ring(bell);
  return r;
}

int epoll_wait(int epfd, struct epoll_event* events, int max, int timeout_ms) {
  if (!ours(epfd)) return KVSIM_REAL(epoll_wait)(epfd, events, max, timeout_ms);
  return wait(epfd, events, max,
              timeout_ms < 0 ? -1 : static_cast<std::int64_t>(timeout_ms) * 1'000'000'000LL);
}

int epoll_pwait(int epfd, struct epoll_event* events, int max, int timeout_ms,
                const sigset_t* mask) {
  if (!ours(epfd)) return KVSIM_REAL(epoll_pwait)(epfd, events, max, timeout_ms, mask);
  return epoll_wait(epfd, events, max, timeout_ms);
}

int epoll_pwait2(int epfd, struct epoll_event* events, int max, const struct timespec* timeout,
                 const sigset_t* mask) {
  if (!ours(epfd)) return KVSIM_REAL(epoll_pwait2)(epfd, events, max, timeout, mask);
  if (timeout != nullptr &&
      (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1'000'000'000L)) {
    return fail(EINVAL);
  }
  const std::int64_t ps = timeout == nullptr
                              ? -1
                              : static_cast<std::int64_t>(timeout->tv_sec) * 1'000'000'000'000LL +
                                    static_cast<std::int64_t>(timeout->tv_nsec) * 1000;
  return wait(epfd, events, max, ps);
}

}  // extern "C"
