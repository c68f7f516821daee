// TCP sockets of a launched program in the simulated hosts' network (cpp/server/control_net.h),
// and its socketpairs and eventfds: each is a placeholder descriptor here (an unconnected AF_UNIX
// socket, so the number is the program's and fstat says socket) and lives in the world, where
// every call on it runs in simulated time; dup, dup2, dup3 and F_DUPFD give another name of it.
// An AF_INET6 socket is the same socket seen through IPv4-mapped addresses (::ffff:a.b.c.d; ::
// is any, ::1 loopback), as a dual-stack socket on an IPv4-only cluster is: c10d's TCPStore and
// gloo open their sockets from getaddrinfo(AF_UNSPEC), which lists AF_INET6 first. Other
// sockets and descriptors go to the C library, inside the launch's network namespace. Pipes
// stay real (a child the program starts may hold an end), but a thread that waits on one waits
// in simulated time: writing or closing a pipe's write end rings every program's doorbell (a
// simulated eventfd) that every wait including a real descriptor also waits on (the world rings
// them too when a process ends or replaces its image by exec, closing its ends), and a blocking
// read of an empty pipe waits the same way. A UDP socket has addresses only: connect and bind
// record them and getsockname gives the simulated host's address (how serving engines find
// their own IP: vLLM's get_ip connects a UDP socket to 8.8.8.8), while sending or receiving a
// datagram fails with EOPNOTSUPP and a message naming the call. Not simulated: native IPv6
// addresses, datagrams; a poll or select that mixes simulated descriptors with others looks at
// the others once, without waiting.
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cpp/client/channel.h"
#include "cpp/preload/happens_before.h"
#include "cpp/preload/real_calls.h"
#include "cpp/preload/socket_calls.h"
#include "cpp/preload/spin_lock.h"
#include "cpp/preload/spin_rule.h"

namespace {

using kvsim::cpp::client::Channel;
using kvsim::cpp::preload::simulated;
namespace wire = kvsim::cpp::wire;
using wire::SockOp;

constexpr int kMaxFd = 1 << 16;
constexpr std::uint8_t kEmulated = 1;
constexpr std::uint8_t kNonBlocking = 2;
constexpr std::uint8_t kInet6 = 4;       // an AF_INET6 socket: addresses in and out are IPv4-mapped
constexpr std::uint8_t kPipeRead = 8;    // a real pipe's read end (not kEmulated)
constexpr std::uint8_t kPipeWrite = 16;  // a real pipe's write end (not kEmulated)
constexpr std::uint8_t kDatagram = 32;   // a UDP socket: addresses only (not kEmulated)
constexpr std::size_t kMaxPiece = 16u << 20;  // per request, well below wire::kMaxFrame
constexpr std::int64_t kPsPerMs = 1'000'000'000;

std::atomic<std::uint8_t> g_fds[kMaxFd];
std::atomic<bool> g_touched[kMaxFd];

}  // namespace

namespace kvsim::cpp::preload {

bool emulated(int fd) {
  return fd >= 0 && fd < kMaxFd && (g_fds[fd].load(std::memory_order_relaxed) & kEmulated) != 0;
}

void touched(int fd) {
  if (fd >= 0 && fd < kMaxFd) g_touched[fd].store(true, std::memory_order_relaxed);
}

bool take_touched(int fd) {
  return fd >= 0 && fd < kMaxFd && g_touched[fd].exchange(false, std::memory_order_relaxed);
}

}  // namespace kvsim::cpp::preload

namespace {

using kvsim::cpp::preload::emulated;

bool nonblocking(int fd) {
  return (g_fds[fd].load(std::memory_order_relaxed) & kNonBlocking) != 0;
}
bool inet6(int fd) {
  return (g_fds[fd].load(std::memory_order_relaxed) & kInet6) != 0;
}
void mark(int fd, bool nb, bool v6 = false) {
  g_fds[fd].store(
      static_cast<std::uint8_t>(kEmulated | (nb ? kNonBlocking : 0) | (v6 ? kInet6 : 0)));
}
void set_nonblocking(int fd, bool nb) {
  mark(fd, nb, inet6(fd));
}

struct Reply {
  std::int64_t result = -1;
  int error = ENETDOWN;  // the world cannot answer
  std::string rest;
};

Reply call(SockOp op, const std::string& args) {
  Reply r;
  const auto reply = Channel::get().call(
      wire::Op::kSocket, wire::Writer().u32(static_cast<std::uint32_t>(op)).take() + args);
  if (!reply) return r;
  try {
    wire::Reader in(*reply);
    r.result = in.i64();
    r.error = in.i32();
    r.rest = reply->substr(12);
  } catch (const wire::WireError&) {
    r.result = -1;
    r.error = EPROTO;
  }
  return r;
}

int fail(int error) {
  errno = error;
  return -1;
}

std::int64_t finish(const Reply& r) {
  if (r.result < 0) return fail(r.error);
  return r.result;
}

// Descriptor calls that find nothing to do (a poll that returns at once, a read, write or accept
// with nothing to move, end of file again), 1,000 in a row with no simulated time passing, are
// a busy-wait (cpp/preload/spin_rule.h): a loop that polls a reset socket forever (c10d's store
// thread, once its peer died) would hold simulated time still for its process's other threads.
// Moving bytes is progress.
thread_local kvsim::cpp::preload::SpinRule t_spin(1000, 100);

void idle_call() {
  if (const std::uint64_t wait = t_spin.idle(kvsim::cpp::preload::now_ps()); wait > 0) {
    (void)kvsim::cpp::preload::sleep_ps(wait);
    t_spin.waited(kvsim::cpp::preload::now_ps());
  }
}

void busy_call() {
  t_spin.progress();
}

// The IPv4 address and port of `addr`, which must be of the socket's family (Linux answers
// EAFNOSUPPORT otherwise). An IPv6 address that maps no IPv4 one is `unreachable`.
bool read_ipv4(int fd, const sockaddr* addr, socklen_t len, std::uint32_t& ip, std::uint16_t& port,
               int& error, int unreachable) {
  if (addr == nullptr) {
    error = EFAULT;
    return false;
  }
  const bool v6 = inet6(fd);
  if (len < static_cast<socklen_t>(v6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in))) {
    error = EINVAL;
    return false;
  }
  if (addr->sa_family != (v6 ? AF_INET6 : AF_INET)) {
    error = EAFNOSUPPORT;
    return false;
  }
  if (!v6) {
    sockaddr_in in{};
    std::memcpy(&in, addr, sizeof(in));
    ip = ntohl(in.sin_addr.s_addr);
    port = ntohs(in.sin_port);
    return true;
  }
  sockaddr_in6 in6{};
  std::memcpy(&in6, addr, sizeof(in6));
  port = ntohs(in6.sin6_port);
  const in6_addr& a = in6.sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&a)) {
    std::uint32_t net = 0;
    std::memcpy(&net, a.s6_addr + 12, 4);
    ip = ntohl(net);
  } else if (IN6_IS_ADDR_UNSPECIFIED(&a)) {
    ip = INADDR_ANY;
  } else if (IN6_IS_ADDR_LOOPBACK(&a)) {
    ip = INADDR_LOOPBACK;
  } else {
    error = unreachable;  // the simulated hosts have IPv4 addresses only
    return false;
  }
  return true;
}

// Writes ip:port as the socket's family gives it: sockaddr_in, or IPv4-mapped sockaddr_in6.
void write_ipv4(int fd, sockaddr* addr, socklen_t* len, std::uint32_t ip, std::uint16_t port) {
  if (addr == nullptr || len == nullptr) return;
  if (inet6(fd)) {
    sockaddr_in6 in6{};
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(port);
    if (ip != INADDR_ANY) {
      in6.sin6_addr.s6_addr[10] = 0xff;
      in6.sin6_addr.s6_addr[11] = 0xff;
      const std::uint32_t net = htonl(ip);
      std::memcpy(in6.sin6_addr.s6_addr + 12, &net, 4);
    }
    std::memcpy(addr, &in6, std::min<std::size_t>(*len, sizeof(in6)));
    *len = sizeof(in6);
    return;
  }
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_addr.s_addr = htonl(ip);
  in.sin_port = htons(port);
  std::memcpy(addr, &in, std::min<std::size_t>(*len, sizeof(in)));
  *len = sizeof(in);
}

/// A UDP socket's addresses (host order): what connect and bind recorded.
struct DatagramEnds {
  std::uint32_t local_ip = 0;
  std::uint16_t local_port = 0;
  std::uint32_t peer_ip = 0;
  std::uint16_t peer_port = 0;
  bool connected = false;
};
kvsim::cpp::preload::SpinLock g_datagram_lock;
std::map<int, DatagramEnds>* g_datagrams = nullptr;
std::uint16_t g_next_datagram_port = 32768;  // as the kernel's ephemeral range begins

bool datagram(int fd) {
  return fd >= 0 && fd < kMaxFd && (g_fds[fd].load(std::memory_order_relaxed) & kDatagram) != 0;
}

// The socket's addresses, given a local port (in order, so replays agree) on first use.
DatagramEnds& datagram_ends(int fd) {
  if (g_datagrams == nullptr) g_datagrams = new std::map<int, DatagramEnds>;
  DatagramEnds& ends = (*g_datagrams)[fd];
  if (ends.local_port == 0) ends.local_port = g_next_datagram_port++;
  return ends;
}

// A datagram would leave the world: refused, once said on stderr with the call's name.
int no_datagrams(const char* call) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true)) {
    const std::string text = std::string("kvsim launch: ") + call +
                             " on a UDP socket: datagrams are not simulated (connect, bind and "
                             "getsockname are); the call fails with EOPNOTSUPP\n";
    (void)!KVSIM_REAL(write)(STDERR_FILENO, text.data(), text.size());
  }
  return fail(EOPNOTSUPP);
}

// The pipes a new image inherited (from a parent of the launch: a subprocess's stdout, a
// multiprocessing child's command pipe) wait in the world like the program's own, except the
// launcher's output pipes (KVSIM_LAUNCH_PIPES), which no program reads.
void adopt_inherited_pipes() {
  std::vector<unsigned long> launcher;
  if (const char* v = std::getenv("KVSIM_LAUNCH_PIPES")) {
    for (const char* q = v; *q != '\0';) {
      char* end = nullptr;
      launcher.push_back(std::strtoul(q, &end, 10));
      if (end == q) break;
      q = *end == ',' ? end + 1 : end;
    }
  }
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  const int self = dirfd(dir);
  while (const dirent* e = readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    if (fd == self || fd < 0 || fd >= kMaxFd || e->d_name[0] == '.') continue;
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) continue;
    if (std::find(launcher.begin(), launcher.end(), static_cast<unsigned long>(st.st_ino)) !=
        launcher.end()) {
      continue;
    }
    const int mode = KVSIM_REAL(fcntl)(fd, F_GETFL) & O_ACCMODE;
    if (mode == O_RDONLY) g_fds[fd].store(kPipeRead);
    if (mode == O_WRONLY) g_fds[fd].store(kPipeWrite);
  }
  closedir(dir);
}

// A new image after exec: the simulated descriptors it inherited (their placeholders survived
// exec) become simulated here too; those that closed on exec close in the world.
__attribute__((constructor)) void adopt_inherited_sockets() {
  // Only a child's image inherits from a program of the launch (KVSIM_FORKED,
  // cpp/preload/child_calls.cpp); a launched program makes no call before its own.
  if (std::getenv("KVSIM_FORKED") == nullptr || !kvsim::cpp::preload::simulated()) return;
  adopt_inherited_pipes();
  const Reply r = call(SockOp::kList, wire::Writer().i32(-1).take());
  if (r.result < 0) return;
  try {
    wire::Reader in(r.rest);
    const std::uint64_t n = in.u64();
    for (std::uint64_t i = 0; i < n; ++i) {
      const int fd = in.i32();
      if (fd < 0 || fd >= kMaxFd) continue;
      const int flags = KVSIM_REAL(fcntl)(fd, F_GETFL);
      if (flags == -1) {  // closed on exec
        (void)call(SockOp::kClose, wire::Writer().i32(fd).take());
        continue;
      }
      mark(fd, (flags & O_NONBLOCK) != 0);
    }
  } catch (const wire::WireError&) {
  }
}

int placeholder(bool cloexec) {
  const int fd = KVSIM_REAL(socket)(AF_UNIX, SOCK_STREAM | (cloexec ? SOCK_CLOEXEC : 0), 0);
  if (fd >= kMaxFd) {
    KVSIM_REAL(close)(fd);
    return fail(EMFILE);
  }
  return fd;
}

ssize_t send_bytes(int fd, const char* data, std::size_t n, int flags) {
  kvsim::cpp::preload::touched(fd);
  std::size_t done = 0;
  do {
    const std::size_t piece = std::min(kMaxPiece, n - done);
    const Reply r = call(SockOp::kSend, wire::Writer()
                                            .i32(fd)
                                            .bytes(data + done, piece)
                                            .boolean(nonblocking(fd) || (flags & MSG_DONTWAIT))
                                            .str(kvsim::cpp::preload::hb::release_stamp())
                                            .take());
    if (r.result < 0) {
      if (r.error == EPIPE && (flags & MSG_NOSIGNAL) == 0) raise(SIGPIPE);
      if (done > 0) return static_cast<ssize_t>(done);
      idle_call();
      return fail(r.error);
    }
    done += static_cast<std::size_t>(r.result);
  } while (done < n);
  if (done > 0) busy_call();
  return static_cast<ssize_t>(done);
}

ssize_t recv_bytes(int fd, void* buf, std::size_t n, int flags) {
  if (buf == nullptr && n > 0) return fail(EFAULT);
  kvsim::cpp::preload::touched(fd);
  std::uint32_t f = 0;
  if (flags & MSG_PEEK) f |= wire::kRecvPeek;
  if (flags & MSG_WAITALL) f |= wire::kRecvWaitAll;
  const Reply r = call(SockOp::kRecv, wire::Writer()
                                          .i32(fd)
                                          .u64(std::min(n, kMaxPiece))
                                          .u32(f)
                                          .boolean(nonblocking(fd) || (flags & MSG_DONTWAIT))
                                          .take());
  if (r.result < 0) {
    idle_call();
    return fail(r.error);
  }
  try {
    wire::Reader in(r.rest);
    const std::string bytes = in.str();
    kvsim::cpp::preload::hb::absorb(in.str());  // the senders' clocks of these bytes
    if (bytes.empty()) {
      idle_call();  // end of file, again
    } else {
      busy_call();
    }
    std::memcpy(buf, bytes.data(), std::min(bytes.size(), n));
    return static_cast<ssize_t>(std::min(bytes.size(), n));
  } catch (const wire::WireError&) {
    return fail(EPROTO);
  }
}

std::string gather(const iovec* iov, int count) {
  std::string out;
  for (int i = 0; i < count; ++i)
    out.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
  return out;
}

ssize_t scatter(int fd, const iovec* iov, int count, int flags) {
  std::size_t total = 0;
  for (int i = 0; i < count; ++i) total += iov[i].iov_len;
  std::string buf(total, '\0');
  const ssize_t n = recv_bytes(fd, buf.data(), total, flags);
  if (n <= 0) return n;
  std::size_t left = static_cast<std::size_t>(n);
  std::size_t pos = 0;
  for (int i = 0; i < count && left > 0; ++i) {
    const std::size_t k = std::min(left, iov[i].iov_len);
    std::memcpy(iov[i].iov_base, buf.data() + pos, k);
    pos += k;
    left -= k;
  }
  return n;
}

std::atomic<int> g_bell{-1};  // the program's doorbell for real descriptors, made once

int doorbell() {
  int bell = g_bell.load();
  if (bell >= 0) return bell;
  const int fresh = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fresh < 0) return -1;
  if (!g_bell.compare_exchange_strong(bell, fresh)) {
    close(fresh);  // another thread made it meanwhile
    return bell;
  }
  (void)call(SockOp::kDoorbell, wire::Writer().i32(fresh).take());  // rung by any process
  return fresh;
}

// One poll: the real descriptors in `others` looked at once, the simulated ones in `fds` at
// `sim_index` waited for up to `timeout_ps`, with `bell` (if >= 0) among them. The ready count,
// -1 with errno, or -2 when only the doorbell rang.
int poll_once(pollfd* fds, std::vector<pollfd>& others, const std::vector<nfds_t>& other_index,
              const std::vector<nfds_t>& sim_index, int bell, std::int64_t timeout_ps) {
  int ready = 0;
  if (!others.empty()) {
    const int r = KVSIM_REAL(poll)(others.data(), others.size(), 0);
    if (r < 0) return -1;
    for (std::size_t k = 0; k < others.size(); ++k) fds[other_index[k]].revents = others[k].revents;
    ready += r;
  }
  wire::Writer args;
  args.u64(sim_index.size() + (bell >= 0 ? 1 : 0));
  for (nfds_t i : sim_index) args.i32(fds[i].fd).u16(static_cast<std::uint16_t>(fds[i].events));
  if (bell >= 0) args.i32(bell).u16(POLLIN);
  args.i64(ready > 0 ? 0 : timeout_ps);
  const Reply r = call(SockOp::kPoll, args.take());
  if (r.result < 0) return static_cast<int>(finish(r));
  int sim_ready = static_cast<int>(r.result);
  try {
    wire::Reader in(r.rest);
    const std::uint64_t m = in.u64();
    for (std::uint64_t k = 0; k < m && k < sim_index.size(); ++k) {
      fds[sim_index[k]].revents = static_cast<short>(in.u16());
    }
    if (bell >= 0 && m > sim_index.size() && (in.u16() & POLLIN) != 0) {
      --sim_ready;
      eventfd_t drained = 0;
      (void)eventfd_read(bell, &drained);  // readable, so it does not wait
      if (ready + sim_ready == 0) return -2;
    }
  } catch (const wire::WireError&) {
    return fail(EPROTO);
  }
  return ready + sim_ready;
}

}  // namespace

namespace kvsim::cpp::preload {

int poll_mixed(pollfd* fds, nfds_t n, std::int64_t timeout_ps) {
  std::vector<pollfd> others;
  std::vector<nfds_t> other_index;
  std::vector<nfds_t> sim_index;
  for (nfds_t i = 0; i < n; ++i) {
    fds[i].revents = 0;
    if (emulated(fds[i].fd)) {
      sim_index.push_back(i);
    } else if (fds[i].fd >= 0) {
      others.push_back(fds[i]);
      other_index.push_back(i);
    }
  }
  // A real descriptor that another thread of the program makes ready rings the doorbell.
  const int bell = others.empty() ? -1 : doorbell();
  const std::uint64_t start = now_ps();
  for (;;) {
    std::int64_t left = timeout_ps;
    if (timeout_ps > 0) {
      const auto spent = static_cast<std::int64_t>(now_ps() - start);
      left = spent >= timeout_ps ? 0 : timeout_ps - spent;
    }
    const int r = poll_once(fds, others, other_index, sim_index, bell, left);
    if (r != -2) {
      idle_call();  // a poll that waited has moved the clock, which resets the count
      return r;
    }
    for (nfds_t i : sim_index) fds[i].revents = 0;
  }
}

/// Wakes the threads of the launch that wait on real descriptors (a pipe end was written or
/// closed: its other end may be in another process of the launch).
void ring_doorbell() {
  (void)Channel::get().call(wire::Op::kRingPipes, {});
}

/// In a fork's child: the parent's doorbell stays the parent's; the child makes its own.
void forget_doorbell() {
  g_bell.store(-1);
}

}  // namespace kvsim::cpp::preload

namespace {

using kvsim::cpp::preload::poll_mixed;
using kvsim::cpp::preload::ring_doorbell;

bool flagged(int fd, std::uint8_t flag) {
  return fd >= 0 && fd < kMaxFd && (g_fds[fd].load(std::memory_order_relaxed) & flag) != 0;
}

// A blocking read of an empty pipe read end: wait in simulated time until it is readable.
void await_pipe(int fd) {
  if (!flagged(fd, kPipeRead) || (KVSIM_REAL(fcntl)(fd, F_GETFL) & O_NONBLOCK) != 0) return;
  pollfd p{fd, POLLIN, 0};
  (void)poll_mixed(&p, 1, -1);
}

// Whether a pipe holds enough that a writer may be waiting for room: a quarter of its capacity
// (a pipe of one-page buffers filled by writes just over half a page is full at half of it).
bool pipe_may_be_full(int fd) {
  if (!flagged(fd, kPipeRead)) return false;
  int queued = 0;
  const int capacity = KVSIM_REAL(fcntl)(fd, F_GETPIPE_SZ);
  return ioctl(fd, FIONREAD, &queued) == 0 && capacity > 0 && queued >= capacity / 4;
}

// A read of a pipe that a writer may be waiting on rings the doorbell (room was made).
template <typename Read>
ssize_t read_pipe(int fd, Read read) {
  const bool full = pipe_may_be_full(fd);
  const ssize_t r = read();
  if (full && r > 0) {
    const int error = errno;
    ring_doorbell();
    errno = error;
  }
  return r;
}

// A write to a pipe's write end. A blocking one waits in simulated time while the pipe is full
// (its reader may be another thread of the program, which runs only when this one waits): the
// bytes go with O_NONBLOCK set for the call (safe: one thread of the launch runs at a time),
// and where the pipe has no room the thread waits for POLLOUT in the world. Each write rings
// the doorbell (its reader may wait in another process).
ssize_t write_pipe(int fd, const iovec* iov, int count) {
  const int flags = KVSIM_REAL(fcntl)(fd, F_GETFL);
  if (flags < 0 || (flags & O_NONBLOCK) != 0 || !simulated()) {
    const ssize_t r = KVSIM_REAL(writev)(fd, iov, count);
    const int error = errno;
    ring_doorbell();
    errno = error;
    return r;
  }
  std::vector<iovec> left(iov, iov + std::max(count, 0));
  std::size_t total = 0;
  for (const iovec& v : left) total += v.iov_len;
  std::size_t done = 0;
  std::size_t first = 0;  // the first iovec with bytes left
  for (;;) {
    (void)KVSIM_REAL(fcntl)(fd, F_SETFL, flags | O_NONBLOCK);
    const ssize_t r =
        KVSIM_REAL(writev)(fd, left.data() + first, static_cast<int>(left.size() - first));
    const int error = errno;
    (void)KVSIM_REAL(fcntl)(fd, F_SETFL, flags);
    if (r > 0) ring_doorbell();
    if (r < 0 && error != EAGAIN) {
      errno = error;
      return done > 0 ? static_cast<ssize_t>(done) : -1;
    }
    if (r > 0) {
      done += static_cast<std::size_t>(r);
      for (std::size_t k = static_cast<std::size_t>(r); k > 0 && first < left.size();) {
        const std::size_t take = std::min(k, left[first].iov_len);
        left[first].iov_base = static_cast<char*>(left[first].iov_base) + take;
        left[first].iov_len -= take;
        k -= take;
        if (left[first].iov_len == 0) ++first;
      }
    }
    if (done >= total) return static_cast<ssize_t>(done);
    if (r < 0 || r == 0) {
      pollfd p{fd, POLLOUT, 0};
      (void)poll_mixed(&p, 1, -1);  // room, or the read end closed (EPIPE next)
    }
  }
}

std::int64_t to_ps(const timespec* ts) {
  if (ts == nullptr) return -1;
  return static_cast<std::int64_t>(ts->tv_sec) * 1'000'000'000'000LL +
         static_cast<std::int64_t>(ts->tv_nsec) * 1000;
}

// A wait on it is simulated: a simulated descriptor, or a real pipe (woken by the doorbell).
bool waits_in_world(int fd) {
  return emulated(fd) || flagged(fd, kPipeRead) || flagged(fd, kPipeWrite);
}

bool any_emulated(const pollfd* fds, nfds_t n) {
  for (nfds_t i = 0; i < n; ++i) {
    if (waits_in_world(fds[i].fd)) return true;
  }
  return false;
}

// select as poll; -2 when no set names a simulated socket (the caller uses the C library's).
int select_as_poll(int nfds, fd_set* r, fd_set* w, fd_set* e, std::int64_t timeout_ps) {
  std::vector<pollfd> fds;
  bool sim = false;
  for (int fd = 0; fd < nfds && fd < FD_SETSIZE; ++fd) {
    short events = 0;
    if (r != nullptr && FD_ISSET(fd, r)) events |= POLLIN;
    if (w != nullptr && FD_ISSET(fd, w)) events |= POLLOUT;
    if (e != nullptr && FD_ISSET(fd, e)) events |= POLLPRI;
    if (events == 0) continue;
    fds.push_back({fd, events, 0});
    sim = sim || waits_in_world(fd);
  }
  if (!sim) return -2;
  const int n = poll_mixed(fds.data(), fds.size(), timeout_ps);
  if (n < 0) return -1;
  for (const pollfd& p : fds) {
    if (p.revents & POLLNVAL) return fail(EBADF);
  }
  if (r != nullptr) FD_ZERO(r);
  if (w != nullptr) FD_ZERO(w);
  if (e != nullptr) FD_ZERO(e);
  int bits = 0;
  for (const pollfd& p : fds) {
    if (r != nullptr && (p.events & POLLIN) && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
      FD_SET(p.fd, r);
      ++bits;
    }
    if (w != nullptr && (p.events & POLLOUT) && (p.revents & (POLLOUT | POLLERR))) {
      FD_SET(p.fd, w);
      ++bits;
    }
    if (e != nullptr && (p.events & POLLPRI) && (p.revents & POLLPRI)) {
      FD_SET(p.fd, e);
      ++bits;
    }
  }
  return bits;
}

// connect (to_peer) or bind of a UDP socket: the address is recorded, nothing is sent. A
// connect to AF_UNSPEC dissolves the association, as for a real UDP socket.
int datagram_address(int fd, const sockaddr* addr, socklen_t len, bool to_peer) {
  if (to_peer && addr != nullptr && len >= sizeof(sa_family_t) && addr->sa_family == AF_UNSPEC) {
    kvsim::cpp::preload::SpinLock::Guard g(g_datagram_lock);
    datagram_ends(fd).connected = false;
    return 0;
  }
  std::uint32_t ip = 0;
  std::uint16_t port = 0;
  int error = 0;
  if (!read_ipv4(fd, addr, len, ip, port, error, to_peer ? ENETUNREACH : EADDRNOTAVAIL)) {
    return fail(error);
  }
  const std::uint32_t own = kvsim::cpp::preload::own_ipv4();
  kvsim::cpp::preload::SpinLock::Guard g(g_datagram_lock);
  DatagramEnds& ends = datagram_ends(fd);
  if (to_peer) {
    ends.peer_ip = ip;
    ends.peer_port = port;
    ends.connected = true;
    // The route's source: loopback to loopback, the host's own address to anywhere else.
    if (ends.local_ip == INADDR_ANY) ends.local_ip = (ip >> 24) == 127 ? ip : own;
    return 0;
  }
  if (ip != INADDR_ANY && ip != own && (ip >> 24) != 127) return fail(EADDRNOTAVAIL);
  ends.local_ip = ip;
  if (port != 0) ends.local_port = port;
  return 0;
}

// getsockname (peer false) or getpeername of a UDP socket, from what was recorded.
int datagram_name(int fd, sockaddr* addr, socklen_t* len, bool peer) {
  DatagramEnds ends;
  {
    kvsim::cpp::preload::SpinLock::Guard g(g_datagram_lock);
    ends = datagram_ends(fd);
  }
  if (peer && !ends.connected) return fail(ENOTCONN);
  write_ipv4(fd, addr, len, peer ? ends.peer_ip : ends.local_ip,
             peer ? ends.peer_port : ends.local_port);
  return 0;
}

}  // namespace

extern "C" {

int socket(int domain, int type, int protocol) {
  const int kind = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (simulated() && (domain == AF_INET || domain == AF_INET6) && kind == SOCK_DGRAM &&
      (protocol == 0 || protocol == IPPROTO_UDP)) {
    const int fd = KVSIM_REAL(socket)(domain, type, protocol);  // never bound nor connected
    if (fd >= 0 && fd < kMaxFd) {
      g_fds[fd].store(static_cast<std::uint8_t>(kDatagram | (domain == AF_INET6 ? kInet6 : 0)));
    }
    return fd;
  }
  if (!simulated() || (domain != AF_INET && domain != AF_INET6) || kind != SOCK_STREAM ||
      (protocol != 0 && protocol != IPPROTO_TCP)) {
    return KVSIM_REAL(socket)(domain, type, protocol);
  }
  const int fd = placeholder((type & SOCK_CLOEXEC) != 0);
  if (fd < 0) return -1;
  const Reply r = call(SockOp::kOpen, wire::Writer().i32(fd).take());
  if (r.result < 0) {
    KVSIM_REAL(close)(fd);
    return fail(r.error);
  }
  mark(fd, (type & SOCK_NONBLOCK) != 0, domain == AF_INET6);
  return fd;
}

int bind(int fd, const struct sockaddr* addr, socklen_t len) {
  if (datagram(fd)) return datagram_address(fd, addr, len, false);
  if (!emulated(fd)) return KVSIM_REAL(bind)(fd, addr, len);
  std::uint32_t ip = 0;
  std::uint16_t port = 0;
  int error = 0;
  if (!read_ipv4(fd, addr, len, ip, port, error, EADDRNOTAVAIL)) return fail(error);
  return static_cast<int>(
      finish(call(SockOp::kBind, wire::Writer().i32(fd).u32(ip).u16(port).take())));
}

int listen(int fd, int backlog) {
  if (!emulated(fd)) return KVSIM_REAL(listen)(fd, backlog);
  return static_cast<int>(
      finish(call(SockOp::kListen, wire::Writer().i32(fd).i32(backlog).take())));
}

int accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags) {
  if (!emulated(fd)) return KVSIM_REAL(accept4)(fd, addr, len, flags);
  const int fresh = placeholder((flags & SOCK_CLOEXEC) != 0);
  if (fresh < 0) return -1;
  const Reply r =
      call(SockOp::kAccept, wire::Writer().i32(fd).i32(fresh).boolean(nonblocking(fd)).take());
  if (r.result < 0) {
    KVSIM_REAL(close)(fresh);
    idle_call();
    return fail(r.error);
  }
  busy_call();
  mark(fresh, (flags & SOCK_NONBLOCK) != 0, inet6(fd));
  try {
    wire::Reader in(r.rest);
    const std::uint32_t ip = in.u32();
    const std::uint16_t port = in.u16();
    write_ipv4(fresh, addr, len, ip, port);
  } catch (const wire::WireError&) {
  }
  return fresh;
}

int accept(int fd, struct sockaddr* addr, socklen_t* len) {
  return accept4(fd, addr, len, 0);
}

int connect(int fd, const struct sockaddr* addr, socklen_t len) {
  if (datagram(fd)) return datagram_address(fd, addr, len, true);
  if (!emulated(fd)) return KVSIM_REAL(connect)(fd, addr, len);
  std::uint32_t ip = 0;
  std::uint16_t port = 0;
  int error = 0;
  if (!read_ipv4(fd, addr, len, ip, port, error, ENETUNREACH)) return fail(error);
  return static_cast<int>(finish(call(
      SockOp::kConnect, wire::Writer().i32(fd).u32(ip).u16(port).boolean(nonblocking(fd)).take())));
}

ssize_t send(int fd, const void* buf, size_t n, int flags) {
  if (datagram(fd)) return no_datagrams("send");
  if (!emulated(fd)) return KVSIM_REAL(send)(fd, buf, n, flags);
  return send_bytes(fd, static_cast<const char*>(buf), n, flags);
}

ssize_t sendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* addr,
               socklen_t len) {
  if (datagram(fd)) return no_datagrams("sendto");
  if (!emulated(fd)) return KVSIM_REAL(sendto)(fd, buf, n, flags, addr, len);
  return send_bytes(fd, static_cast<const char*>(buf), n, flags);  // TCP ignores the address
}

ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) {
  if (datagram(fd)) return no_datagrams("sendmsg");
  if (!emulated(fd)) return KVSIM_REAL(sendmsg)(fd, msg, flags);
  const std::string data = gather(msg->msg_iov, static_cast<int>(msg->msg_iovlen));
  return send_bytes(fd, data.data(), data.size(), flags);
}

ssize_t write(int fd, const void* buf, size_t n) {
  if (datagram(fd)) return no_datagrams("write");
  if (flagged(fd, kPipeWrite)) {
    const iovec one{const_cast<void*>(buf), n};
    return write_pipe(fd, &one, 1);
  }
  if (!emulated(fd)) return KVSIM_REAL(write)(fd, buf, n);
  return send_bytes(fd, static_cast<const char*>(buf), n, 0);
}

ssize_t writev(int fd, const struct iovec* iov, int count) {
  if (datagram(fd)) return no_datagrams("writev");
  if (flagged(fd, kPipeWrite)) return write_pipe(fd, iov, count);
  if (!emulated(fd)) return KVSIM_REAL(writev)(fd, iov, count);
  const std::string data = gather(iov, count);
  return send_bytes(fd, data.data(), data.size(), 0);
}

ssize_t recv(int fd, void* buf, size_t n, int flags) {
  if (datagram(fd)) return no_datagrams("recv");
  if (!emulated(fd)) return KVSIM_REAL(recv)(fd, buf, n, flags);
  return recv_bytes(fd, buf, n, flags);
}

ssize_t recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* addr, socklen_t* len) {
  if (datagram(fd)) return no_datagrams("recvfrom");
  if (!emulated(fd)) return KVSIM_REAL(recvfrom)(fd, buf, n, flags, addr, len);
  return recv_bytes(fd, buf, n, flags);  // a TCP socket leaves the address alone
}

ssize_t recvmsg(int fd, struct msghdr* msg, int flags) {
  if (datagram(fd)) return no_datagrams("recvmsg");
  if (!emulated(fd)) return KVSIM_REAL(recvmsg)(fd, msg, flags);
  msg->msg_namelen = 0;
  msg->msg_controllen = 0;
  msg->msg_flags = 0;
  return scatter(fd, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
}

ssize_t read(int fd, void* buf, size_t n) {
  if (datagram(fd)) return no_datagrams("read");
  await_pipe(fd);
  if (flagged(fd, kPipeRead)) return read_pipe(fd, [&] { return KVSIM_REAL(read)(fd, buf, n); });
  if (!emulated(fd)) return KVSIM_REAL(read)(fd, buf, n);
  return recv_bytes(fd, buf, n, 0);
}

ssize_t readv(int fd, const struct iovec* iov, int count) {
  if (datagram(fd)) return no_datagrams("readv");
  await_pipe(fd);
  if (flagged(fd, kPipeRead)) {
    return read_pipe(fd, [&] { return KVSIM_REAL(readv)(fd, iov, count); });
  }
  if (!emulated(fd)) return KVSIM_REAL(readv)(fd, iov, count);
  return scatter(fd, iov, count, 0);
}

int shutdown(int fd, int how) {
  if (!emulated(fd)) return KVSIM_REAL(shutdown)(fd, how);
  return static_cast<int>(finish(call(SockOp::kShutdown, wire::Writer().i32(fd).i32(how).take())));
}

int close(int fd) {
  if (simulated()) kvsim::cpp::preload::forget_in_epolls(fd);  // an epoll set, or one's entry
  if (emulated(fd)) {
    g_fds[fd].store(0);
    (void)call(SockOp::kClose, wire::Writer().i32(fd).take());
  }
  const bool pipe_writer = flagged(fd, kPipeWrite);
  if (datagram(fd)) {
    kvsim::cpp::preload::SpinLock::Guard g(g_datagram_lock);
    if (g_datagrams != nullptr) g_datagrams->erase(fd);
  }
  if (fd >= 0 && fd < kMaxFd) g_fds[fd].store(0);
  const int r = KVSIM_REAL(close)(fd);
  if (pipe_writer) ring_doorbell();  // the read end sees end of file
  return r;
}

int socketpair(int domain, int type, int protocol, int sv[2]) {
  const int kind = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (!simulated() || domain != AF_UNIX || kind != SOCK_STREAM || protocol != 0) {
    return KVSIM_REAL(socketpair)(domain, type, protocol, sv);
  }
  if (sv == nullptr) return fail(EFAULT);
  const int a = placeholder((type & SOCK_CLOEXEC) != 0);
  if (a < 0) return -1;
  const int b = placeholder((type & SOCK_CLOEXEC) != 0);
  if (b < 0) {
    KVSIM_REAL(close)(a);
    return -1;
  }
  const Reply r = call(SockOp::kPair, wire::Writer().i32(a).i32(b).take());
  if (r.result < 0) {
    KVSIM_REAL(close)(a);
    KVSIM_REAL(close)(b);
    return fail(r.error);
  }
  mark(a, (type & SOCK_NONBLOCK) != 0);
  mark(b, (type & SOCK_NONBLOCK) != 0);
  sv[0] = a;
  sv[1] = b;
  return 0;
}

int pipe2(int fds[2], int flags) {
  const int r = KVSIM_REAL(pipe2)(fds, flags);
  if (r == 0 && simulated() && fds[0] < kMaxFd && fds[1] < kMaxFd) {
    g_fds[fds[0]].store(kPipeRead);
    g_fds[fds[1]].store(kPipeWrite);
  }
  return r;
}

int pipe(int fds[2]) {
  return pipe2(fds, 0);
}

int eventfd(unsigned int initial, int flags) {
  if (!simulated()) return KVSIM_REAL(eventfd)(initial, flags);
  if ((flags & ~(EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE)) != 0) return fail(EINVAL);
  const int fd = placeholder((flags & EFD_CLOEXEC) != 0);
  if (fd < 0) return -1;
  const Reply r =
      call(SockOp::kEventFd,
           wire::Writer().i32(fd).u64(initial).boolean((flags & EFD_SEMAPHORE) != 0).take());
  if (r.result < 0) {
    KVSIM_REAL(close)(fd);
    return fail(r.error);
  }
  mark(fd, (flags & EFD_NONBLOCK) != 0);
  return fd;
}

// glibc's eventfd_read/eventfd_write call its internal read and write, past the shim.
int eventfd_read(int fd, eventfd_t* value) {
  if (!emulated(fd)) return KVSIM_REAL(eventfd_read)(fd, value);
  return recv_bytes(fd, value, sizeof(*value), 0) == sizeof(*value) ? 0 : -1;
}

int eventfd_write(int fd, eventfd_t value) {
  if (!emulated(fd)) return KVSIM_REAL(eventfd_write)(fd, value);
  return send_bytes(fd, reinterpret_cast<const char*>(&value), sizeof(value), 0) == sizeof(value)
             ? 0
             : -1;
}

}  // extern "C"

namespace {

// Gives `fresh` (a descriptor the C library just made a copy of `fd` under) the world's socket.
int name_again(int fd, int fresh) {
  if (fresh < 0) return fresh;
  if (fresh >= kMaxFd) {
    KVSIM_REAL(close)(fresh);
    return fail(EMFILE);
  }
  const Reply r = call(SockOp::kDup, wire::Writer().i32(fd).i32(fresh).take());
  if (r.result < 0) {
    KVSIM_REAL(close)(fresh);
    return fail(r.error);
  }
  mark(fresh, nonblocking(fd), inet6(fd));
  return fresh;
}

// dup2/dup3 onto a simulated descriptor first closes it, as the kernel does.
void drop_target(int old_fd, int new_fd) {
  if (new_fd == old_fd || !emulated(new_fd)) return;
  g_fds[new_fd].store(0);
  kvsim::cpp::preload::forget_in_epolls(new_fd);
  (void)call(SockOp::kClose, wire::Writer().i32(new_fd).take());
}

}  // namespace

extern "C" {

int dup(int fd) {
  if (!emulated(fd)) return KVSIM_REAL(dup)(fd);
  return name_again(fd, KVSIM_REAL(dup)(fd));
}

int dup2(int fd, int new_fd) {
  if (simulated()) drop_target(fd, new_fd);
  const int r = KVSIM_REAL(dup2)(fd, new_fd);
  if (r < 0 || !emulated(fd) || new_fd == fd) return r;
  return name_again(fd, r);
}

int dup3(int fd, int new_fd, int flags) {
  if (simulated() && fd != new_fd) drop_target(fd, new_fd);
  const int r = KVSIM_REAL(dup3)(fd, new_fd, flags);
  if (r < 0 || !emulated(fd)) return r;
  return name_again(fd, r);
}

int setsockopt(int fd, int level, int name, const void* value, socklen_t len) {
  if (!emulated(fd)) return KVSIM_REAL(setsockopt)(fd, level, name, value, len);
  if (value == nullptr && len > 0) return fail(EFAULT);
  if (level == SOL_SOCKET && name == SO_RCVTIMEO) {
    if (len < static_cast<socklen_t>(sizeof(timeval))) return fail(EINVAL);
    timeval tv{};
    std::memcpy(&tv, value, sizeof(tv));
    const std::int64_t ps = static_cast<std::int64_t>(tv.tv_sec) * 1'000'000'000'000LL +
                            static_cast<std::int64_t>(tv.tv_usec) * 1'000'000LL;
    return static_cast<int>(
        finish(call(SockOp::kSetTimeout, wire::Writer().i32(fd).boolean(false).i64(ps).take())));
  }
  return 0;  // other options change nothing in the simulated network
}

int getsockopt(int fd, int level, int name, void* value, socklen_t* len) {
  if (!emulated(fd)) return KVSIM_REAL(getsockopt)(fd, level, name, value, len);
  if (value == nullptr || len == nullptr) return fail(EFAULT);
  int out = 0;
  if (level == SOL_SOCKET && name == SO_ERROR) {
    const Reply r = call(SockOp::kTakeError, wire::Writer().i32(fd).take());
    if (r.result < 0) return fail(r.error);
    try {
      out = wire::Reader(r.rest).i32();
    } catch (const wire::WireError&) {
      return fail(EPROTO);
    }
  } else if (level == SOL_SOCKET && name == SO_TYPE) {
    out = SOCK_STREAM;
  } else if (level == SOL_SOCKET && name == SO_DOMAIN) {
    out = inet6(fd) ? AF_INET6 : AF_INET;
  }
  std::memcpy(value, &out, std::min<std::size_t>(*len, sizeof(out)));
  *len = sizeof(out);
  return 0;
}

static int socket_name(int fd, struct sockaddr* addr, socklen_t* len, bool peer) {
  const Reply r = call(SockOp::kName, wire::Writer().i32(fd).boolean(peer).take());
  if (r.result < 0) return fail(r.error);
  try {
    wire::Reader in(r.rest);
    const std::uint32_t ip = in.u32();
    const std::uint16_t port = in.u16();
    write_ipv4(fd, addr, len, ip, port);
  } catch (const wire::WireError&) {
    return fail(EPROTO);
  }
  return 0;
}

int getsockname(int fd, struct sockaddr* addr, socklen_t* len) {
  if (datagram(fd)) return datagram_name(fd, addr, len, false);
  if (!emulated(fd)) return KVSIM_REAL(getsockname)(fd, addr, len);
  return socket_name(fd, addr, len, false);
}

int getpeername(int fd, struct sockaddr* addr, socklen_t* len) {
  if (datagram(fd)) return datagram_name(fd, addr, len, true);
  if (!emulated(fd)) return KVSIM_REAL(getpeername)(fd, addr, len);
  return socket_name(fd, addr, len, true);
}

int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const long arg = va_arg(ap, long);
  va_end(ap);
  if (emulated(fd) && cmd == F_SETFL) set_nonblocking(fd, (arg & O_NONBLOCK) != 0);
  const int r = KVSIM_REAL(fcntl)(fd, cmd, arg);
  if (emulated(fd) && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)) return name_again(fd, r);
  if (emulated(fd) && cmd == F_GETFL && r >= 0) {
    return nonblocking(fd) ? (r | O_NONBLOCK) : (r & ~O_NONBLOCK);
  }
  return r;
}

int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const long arg = va_arg(ap, long);
  va_end(ap);
  return fcntl(fd, cmd, arg);
}

int ioctl(int fd, unsigned long request, ...) {
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  if (emulated(fd) && request == FIONBIO) {
    if (arg == nullptr) return fail(EFAULT);
    set_nonblocking(fd, *static_cast<int*>(arg) != 0);
    return 0;
  }
  if (emulated(fd) && request == FIONREAD) {
    if (arg == nullptr) return fail(EFAULT);
    std::string peek(1u << 20, '\0');
    const ssize_t n = recv_bytes(fd, peek.data(), peek.size(), MSG_PEEK | MSG_DONTWAIT);
    *static_cast<int*>(arg) = n > 0 ? static_cast<int>(n) : 0;
    return 0;
  }
  return KVSIM_REAL(ioctl)(fd, request, arg);
}

int poll(struct pollfd* fds, nfds_t n, int timeout) {
  if (!simulated() || !any_emulated(fds, n)) return KVSIM_REAL(poll)(fds, n, timeout);
  return poll_mixed(fds, n, timeout < 0 ? -1 : timeout * kPsPerMs);
}

int ppoll(struct pollfd* fds, nfds_t n, const struct timespec* ts, const sigset_t* mask) {
  if (!simulated() || !any_emulated(fds, n)) return KVSIM_REAL(ppoll)(fds, n, ts, mask);
  return poll_mixed(fds, n, to_ps(ts));
}

int select(int nfds, fd_set* r, fd_set* w, fd_set* e, struct timeval* tv) {
  if (!simulated()) return KVSIM_REAL(select)(nfds, r, w, e, tv);
  const std::int64_t ps = tv == nullptr
                              ? -1
                              : static_cast<std::int64_t>(tv->tv_sec) * 1'000'000'000'000LL +
                                    static_cast<std::int64_t>(tv->tv_usec) * 1'000'000LL;
  const int n = select_as_poll(nfds, r, w, e, ps);
  if (n == -2) return KVSIM_REAL(select)(nfds, r, w, e, tv);
  if (n == 0 && tv != nullptr) *tv = timeval{};  // as Linux: the time left
  return n;
}

int pselect(int nfds, fd_set* r, fd_set* w, fd_set* e, const struct timespec* ts,
            const sigset_t* mask) {
  if (!simulated()) return KVSIM_REAL(pselect)(nfds, r, w, e, ts, mask);
  const int n = select_as_poll(nfds, r, w, e, to_ps(ts));
  if (n == -2) return KVSIM_REAL(pselect)(nfds, r, w, e, ts, mask);
  return n;
}

}  // extern "C"
