// Probes what a launched program sees of simulated time and the simulated hosts' network
// (launch_programs_test.py): clocks and sleeps of every kind, a thread, a spinning clock loop,
// TCP sockets and their errors, a UDP datagram (refused), and a real one, sent past the shim,
// in the launch's network namespace.
//   probe LOCAL_IP OTHER_HOST_IP
#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "common.h"

namespace {

using namespace example;

long long now_ns(clockid_t clock = CLOCK_MONOTONIC) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<long long>(t.tv_sec) * 1000000000LL + t.tv_nsec;
}

sockaddr_in address(const std::string& ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

const char* outcome(int rc) {
  return rc == 0 ? "ok" : std::strerror(errno);
}

int tcp() {
  return socket(AF_INET, SOCK_STREAM, 0);
}

void clocks_and_sleeps() {
  long long t = now_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  std::printf("sleep_for 250 ms: %lld ns\n", now_ns() - t);
  t = now_ns();
  usleep(1000);
  std::printf("usleep 1000 us: %lld ns\n", now_ns() - t);
  t = now_ns();
  timespec req{1, 500000000};
  nanosleep(&req, nullptr);
  std::printf("nanosleep 1.5 s: %lld ns\n", now_ns() - t);
  t = now_ns();
  sleep(2);
  std::printf("sleep 2 s: %lld ns\n", now_ns() - t);
  t = now_ns();
  timespec until{};
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_nsec += 125000000;
  if (until.tv_nsec >= 1000000000) {
    until.tv_nsec -= 1000000000;
    ++until.tv_sec;
  }
  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr);
  std::printf("clock_nanosleep to +125 ms: %lld ns\n", now_ns() - t);
  const auto s0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::printf("steady_clock over 10 ms: %lld ns\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         std::chrono::steady_clock::now() - s0)
                                         .count()));
  timeval tv{};
  gettimeofday(&tv, nullptr);
  const long long since_2025_us =
      (static_cast<long long>(tv.tv_sec) - 1735689600LL) * 1000000LL + tv.tv_usec;
  std::printf("gettimeofday - 2025-01-01 = monotonic: %s\n",
              since_2025_us == now_ns() / 1000 ? "yes" : "no");
  std::printf("time() - 2025-01-01: %lld s\n",
              static_cast<long long>(time(nullptr)) - 1735689600LL);
  // A loop that waits on the clock alone still sees time pass.
  const long long start = now_ns();
  long long reads = 0;
  while (now_ns() - start < 1000000) ++reads;
  std::printf("a spinning loop saw 1 ms pass after %lld clock reads\n", reads);
}

void threads() {
  const long long t = now_ns();
  long long woke = 0;
  std::thread sleeper([&woke] {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    woke = now_ns();
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  sleeper.join();
  std::printf("thread woke at +%lld ns, main at +%lld ns\n", woke - t, now_ns() - t);
}

void sockets(const std::string& ip, const std::string& other) {
  int s = tcp();
  sockaddr_in a = address(other, 26010);
  std::printf("bind to another host's address: %s\n",
              outcome(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a))));
  close(s);

  s = tcp();
  a = address(other, 9);
  long long t = now_ns();
  const int refused = connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  std::printf("connect to a closed port: %s after %lld ns\n", outcome(refused), now_ns() - t);
  close(s);

  s = tcp();
  a = address("8.8.8.8", 53);
  std::printf("connect to 8.8.8.8: %s\n",
              outcome(connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a))));
  close(s);

  const int udp = socket(AF_INET, SOCK_DGRAM, 0);
  const ssize_t sent = sendto(udp, "x", 1, 0, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  std::printf("UDP to 8.8.8.8: %s\n", sent == 1 ? "sent (NOT REFUSED)" : std::strerror(errno));
  // The same datagram past the shim (a raw system call) meets the launch's network namespace.
  const long raw = syscall(SYS_sendto, udp, "x", 1, 0, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  std::printf("real UDP to 8.8.8.8: %s\n", raw == 1 ? "sent (NOT ISOLATED)" : std::strerror(errno));
  close(udp);

  const int listener = tcp();
  a = address(ip, 26010);
  std::printf("listen: %s\n", outcome(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)) ||
                                      listen(listener, 4)));
  const int client = tcp();
  fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK);
  const int pending = connect(client, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  std::printf("non-blocking connect: %s\n", outcome(pending));
  pollfd writable{client, POLLOUT, 0};
  t = now_ns();
  const int ready = poll(&writable, 1, 1000);
  int error = -1;
  socklen_t len = sizeof(error);
  getsockopt(client, SOL_SOCKET, SO_ERROR, &error, &len);
  std::printf("poll for the connection: %d ready after %lld ns, SO_ERROR %d\n", ready, now_ns() - t,
              error);
  sockaddr_in peer{};
  socklen_t peer_len = sizeof(peer);
  const int server = accept(listener, reinterpret_cast<sockaddr*>(&peer), &peer_len);
  char text[16] = {};
  inet_ntop(AF_INET, &peer.sin_addr, text, sizeof(text));
  std::printf("accepted %s:%u\n", text, ntohs(peer.sin_port));
  send(client, "abc", 3, 0);
  char buf[8] = {};
  const ssize_t got = recv(server, buf, sizeof(buf), 0);
  std::printf("recv: %zd '%s'\n", got, buf);

  timeval timeout{0, 500000};
  setsockopt(server, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  t = now_ns();
  const ssize_t none = recv(server, buf, sizeof(buf), 0);
  std::printf("recv with SO_RCVTIMEO 500 ms: %s after %lld ns\n",
              none < 0 ? std::strerror(errno) : "data", now_ns() - t);
  pollfd readable{server, POLLIN, 0};
  t = now_ns();
  const int polled = poll(&readable, 1, 300);
  std::printf("poll 300 ms: %d after %lld ns\n", polled, now_ns() - t);
  fd_set set;
  FD_ZERO(&set);
  FD_SET(listener, &set);
  timeval wait{0, 200000};
  t = now_ns();
  const int selected = select(listener + 1, &set, nullptr, nullptr, &wait);
  std::printf("select 200 ms: %d after %lld ns\n", selected, now_ns() - t);
  close(client);
  std::printf("recv after the peer closed: %zd\n", recv(server, buf, sizeof(buf), 0));
  std::printf("send after the peer closed: %s\n",
              send(server, "x", 1, MSG_NOSIGNAL) < 0 ? std::strerror(errno) : "sent");
  close(server);
  close(listener);
}

void port_of_the_library(const std::string& ip) {
  LlmDataDist dist(0, LlmRole::kPrompt);
  Options options;
  options[llm_datadist::OPTION_DEVICE_ID] = "0";
  options[llm_datadist::OPTION_LISTEN_IP_INFO] = Endpoint(ip, 26000).c_str();
  std::printf("Initialize: 0x%X\n", dist.Initialize(options));
  const int s = tcp();
  sockaddr_in a = address("0.0.0.0", 26000);
  std::printf("bind to llm_datadist's listen port: %s\n",
              outcome(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a))));
  close(s);
  dist.Finalize();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::printf("usage: probe LOCAL_IP OTHER_HOST_IP\n");
    return 2;
  }
  clocks_and_sleeps();
  threads();
  sockets(argv[1], argv[2]);
  port_of_the_library(argv[1]);
  return 0;
}
