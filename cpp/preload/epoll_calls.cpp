// epoll of a launched program (what libzmq's I/O threads and asyncio's event loop wait with):
// an epoll descriptor is a real one, which holds the program's other descriptors, while this
// file keeps the simulated ones it watches (cpp/preload/socket_calls.h). epoll_wait is one poll
// over both: the simulated descriptors waited for in simulated time, the real ones looked at once
// (through the real epoll descriptor's own readiness). Entries report in the order they were
// added. EPOLLONESHOT disables an entry once it reports; an EPOLLET entry reports a condition
// once, and again only after the program read or wrote that descriptor (buffers are unbounded,
// so a condition does not come and go by itself).
#include <poll.h>
#include <sys/epoll.h>

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

class Sets {
 public:
  struct Guard : kvsim::cpp::preload::SpinLock::Guard {
    explicit Guard(Sets& s) : kvsim::cpp::preload::SpinLock::Guard(s.lock_) {}
  };
  /// The simulated entries of epoll descriptor `epfd`; nullptr if it is none of the program's.
  std::vector<Entry>* find(int epfd) {
    auto it = sets_->find(epfd);
    return it == sets_->end() ? nullptr : &it->second;
  }
  void create(int epfd) { (*sets_)[epfd].clear(); }
  void forget(int fd) {
    sets_->erase(fd);
    for (auto& [epfd, entries] : *sets_) {
      for (auto it = entries.begin(); it != entries.end(); ++it) {
        if (it->fd == fd) {
          entries.erase(it);
          break;
        }
      }
    }
  }

 private:
  kvsim::cpp::preload::SpinLock lock_;
  std::map<int, std::vector<Entry>>* sets_ = new std::map<int, std::vector<Entry>>();
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

// epoll_wait over simulated entries (and the real ones, through `epfd`'s own readiness).
int wait(int epfd, epoll_event* events, int max, std::int64_t timeout_ps) {
  if (events == nullptr) return fail(EFAULT);
  if (max <= 0) return fail(EINVAL);
  std::vector<pollfd> fds;
  std::vector<std::uint32_t> wanted;
  {
    Sets::Guard g(sets());
    std::vector<Entry>* entries = sets().find(epfd);
    if (entries == nullptr) return fail(EBADF);
    for (Entry& e : *entries) {
      if (kvsim::cpp::preload::take_touched(e.fd)) e.quiet = 0;
      const std::uint32_t want =
          e.disabled ? 0 : (e.event.events | EPOLLERR | EPOLLHUP) & kConditions & ~e.quiet;
      if (want == 0) continue;
      fds.push_back({e.fd, static_cast<short>(want), 0});
      wanted.push_back(want);
    }
  }
  const std::size_t simulated_count = fds.size();
  if (simulated_count == 0) {  // only real descriptors: the real wait (in real time)
    timespec ts{timeout_ps / 1'000'000'000'000LL, (timeout_ps % 1'000'000'000'000LL) / 1000};
    return KVSIM_REAL(epoll_pwait2)(epfd, events, max, timeout_ps < 0 ? nullptr : &ts, nullptr);
  }
  fds.push_back({epfd, POLLIN, 0});  // the real descriptors it holds
  const int n = kvsim::cpp::preload::poll_mixed(fds.data(), fds.size(), timeout_ps);
  if (n < 0) return -1;
  int out = 0;
  {
    Sets::Guard g(sets());
    std::vector<Entry>* entries = sets().find(epfd);
    for (std::size_t i = 0; entries != nullptr && i < simulated_count && out < max; ++i) {
      const std::uint32_t got = static_cast<std::uint16_t>(fds[i].revents) & wanted[i];
      if (got == 0) continue;
      for (Entry& e : *entries) {
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
  if (out < max && (fds.back().revents & POLLIN)) {
    const int real = KVSIM_REAL(epoll_wait)(epfd, events + out, max - out, 0);
    if (real > 0) out += real;
  }
  return out;
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
  Sets::Guard g(sets());
  sets().forget(fd);
}

}  // namespace kvsim::cpp::preload

extern "C" {

int epoll_create1(int flags) {
  const int epfd = KVSIM_REAL(epoll_create1)(flags);
  if (epfd >= 0 && simulated()) {
    Sets::Guard g(sets());
    sets().create(epfd);
  }
  return epfd;
}

int epoll_create(int size) {
  if (size <= 0) return fail(EINVAL);
  return epoll_create1(0);
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event* event) {
  if (!simulated() || !emulated(fd)) return KVSIM_REAL(epoll_ctl)(epfd, op, fd, event);
  Sets::Guard g(sets());
  std::vector<Entry>* entries = sets().find(epfd);
  if (entries == nullptr) return fail(EBADF);
  if (fd == epfd) return fail(EINVAL);
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
