// Descriptors that threads of a launched program wait on (launch_programs_test.py): an eventfd
// watched by epoll (libzmq's mailbox), a socketpair (asyncio's self-pipe), a TCP listener and
// connection in an edge-triggered epoll set, and dup'ed descriptors. Each line says what the
// waiting thread got and when (simulated time since the section began).
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

namespace {

using std::chrono::milliseconds;

long long now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

long long ms_since(long long t0) {
  return (now_ns() - t0) / 1000000;
}

void eventfd_and_epoll() {
  const int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 42;
  epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev);
  const long long t0 = now_ns();
  std::thread signaller([efd] {
    std::this_thread::sleep_for(milliseconds(20));
    eventfd_write(efd, 1);
    std::this_thread::sleep_for(milliseconds(10));
    eventfd_write(efd, 2);
  });
  std::string got;
  for (int i = 0; i < 2; ++i) {
    epoll_event out[4];
    const int n = epoll_wait(ep, out, 4, 1000);
    eventfd_t v = 0;
    eventfd_read(efd, &v);
    got += " " + std::to_string(n) + "x" + std::to_string(out[0].data.u64) + ":" +
           std::to_string(v) + "@" + std::to_string(ms_since(t0));
  }
  signaller.join();
  const long long t1 = now_ns();
  epoll_event out[4];
  const int n = epoll_wait(ep, out, 4, 50);
  std::printf("eventfd in epoll:%s ms; then %d after %lld ns\n", got.c_str(), n, now_ns() - t1);
  eventfd_t v = 0;
  std::printf("empty nonblocking eventfd read: %s\n",
              eventfd_read(efd, &v) == 0 ? "a value" : std::strerror(errno));
  close(ep);
  close(efd);

  const int sem = eventfd(3, EFD_SEMAPHORE | EFD_NONBLOCK);
  std::string reads;
  for (int i = 0; i < 4; ++i) {
    std::uint64_t value = 0;
    const ssize_t r = read(sem, &value, sizeof(value));
    reads += r == 8 ? " " + std::to_string(value) : std::string(" ") + std::strerror(errno);
  }
  std::printf("semaphore eventfd reads:%s\n", reads.c_str());
  close(sem);
}

void socketpair_between_threads() {
  int sv[2];
  socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
  const long long t0 = now_ns();
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(5));
    (void)write(sv[1], "ping", 4);
    std::this_thread::sleep_for(milliseconds(5));
    close(sv[1]);
  });
  pollfd p{sv[0], POLLIN, 0};
  const int n = poll(&p, 1, 1000);
  char buf[16] = {};
  const ssize_t r = read(sv[0], buf, sizeof(buf));
  const long long at = ms_since(t0);
  const ssize_t eof = read(sv[0], buf + 8, sizeof(buf) - 8);
  std::printf("socketpair: poll %d, read %zd '%.4s' at %lld ms, then %zd at %lld ms\n", n, r, buf,
              at, eof, ms_since(t0));
  writer.join();
  close(sv[0]);
}

void tcp_in_edge_triggered_epoll() {
  const int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(27100);
  bind(l, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  listen(l, 4);
  const int ep = epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = l;
  epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
  std::thread client([addr] {
    const int c = socket(AF_INET, SOCK_STREAM, 0);
    connect(c, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    (void)send(c, "hello", 5, 0);
    char b[8];
    (void)recv(c, b, sizeof(b), 0);  // until the server closes
    close(c);
  });
  epoll_event out[4];
  int n = epoll_wait(ep, out, 4, 1000);
  const int conn = accept4(l, nullptr, nullptr, SOCK_NONBLOCK);
  std::printf("listener in epoll: %d event(s), accepted: %s\n", n, conn >= 0 ? "yes" : "no");
  ev.events = EPOLLIN | EPOLLOUT | EPOLLET;
  ev.data.fd = conn;
  epoll_ctl(ep, EPOLL_CTL_ADD, conn, &ev);
  std::string got;
  int waits = 0;
  while (got.size() < 5 && waits < 10) {
    n = epoll_wait(ep, out, 4, 1000);
    ++waits;
    char b[8];
    ssize_t r;
    while ((r = recv(conn, b, sizeof(b), 0)) > 0) got.append(b, static_cast<std::size_t>(r));
  }
  // Drained, nothing new: an edge-triggered entry stays quiet until its timeout.
  int quiet = 0;
  long long t1 = 0;
  for (int i = 0; i < 3; ++i) {
    t1 = now_ns();
    quiet = epoll_wait(ep, out, 4, 100);
    if (quiet == 0) break;
  }
  std::printf("edge-triggered connection: read '%s'; quiet wait: %d after %lld ns\n", got.c_str(),
              quiet, now_ns() - t1);
  epoll_ctl(ep, EPOLL_CTL_DEL, conn, nullptr);
  std::printf("second EPOLL_CTL_DEL: %s\n",
              epoll_ctl(ep, EPOLL_CTL_DEL, conn, nullptr) == 0 ? "ok" : std::strerror(errno));
  close(conn);
  client.join();
  close(ep);
  close(l);
}

void dups() {
  int sv[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  const int d = dup(sv[0]);
  (void)write(d, "x", 1);
  char b[4] = {};
  const ssize_t r = read(sv[1], b, sizeof(b));
  close(sv[0]);
  pollfd p{sv[1], POLLIN, 0};
  const int open_still = poll(&p, 1, 10);
  const int moved = dup2(d, 100);
  close(d);
  (void)write(moved, "y", 1);
  const ssize_t r2 = read(sv[1], b + 1, sizeof(b) - 1);
  close(moved);
  const ssize_t eof = read(sv[1], b + 2, sizeof(b) - 2);
  std::printf(
      "dup: read %zd '%c', after closing the original poll %d, dup2 to %d read %zd '%c', "
      "after the last name closed read %zd\n",
      r, b[0], open_still, moved, r2, b[1], eof);
  close(sv[1]);
}

}  // namespace

int main() {
  eventfd_and_epoll();
  socketpair_between_threads();
  tcp_in_edge_triggered_epoll();
  dups();
  return 0;
}
