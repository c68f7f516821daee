// A program that speaks to its world out of turn (launch_programs_test.py): it opens extra
// connections to the world's socket itself and sends a wrong token, a malformed frame, a frame cut
// short, and a second request before the first is answered. Each must end only that connection;
// the program's own calls through the libraries, and the other programs, go on.
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "acl/acl.h"

namespace {

std::string u32(std::uint32_t v) {
  std::string out;
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return out;
}

std::string u64(std::uint64_t v) {
  return u32(static_cast<std::uint32_t>(v)) + u32(static_cast<std::uint32_t>(v >> 32));
}

std::string frame(std::uint32_t op, const std::string& payload) {
  return u32(static_cast<std::uint32_t>(payload.size() + 4)) + u32(op) + payload;
}

// The hello of wire.h: token, real pid (getpid() gives the launch's), slot -1.
std::string hello(const std::string& token) {
  return frame(1, u64(token.size()) + token + u64(static_cast<std::uint64_t>(syscall(SYS_getpid))) +
                      u64(~0ULL));
}

int open_world() {
  const char* path = std::getenv("KVSIM_WORLD_SOCKET");
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path ? path : "", sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  return fd;
}

// Reads until the world closes the connection; how many bytes came first.
long until_closed(int fd) {
  long total = 0;
  char buf[256];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) total += n;
  close(fd);
  return total;
}

void attempt(const char* what, const std::string& first, const std::string& then) {
  const int fd = open_world();
  if (fd < 0) {
    std::printf("%s: cannot connect\n", what);
    return;
  }
  (void)write(fd, first.data(), first.size());
  if (!then.empty()) {
    char reply[64];
    (void)read(fd, reply, sizeof(reply));  // the hello's answer
    (void)write(fd, then.data(), then.size());
    if (then.size() < 8) shutdown(fd, SHUT_WR);  // a frame cut short, then silence
  }
  std::printf("%s: the world closed the connection (%ld byte(s) before)\n", what, until_closed(fd));
}

}  // namespace

int main() {
  const std::string token =
      std::getenv("KVSIM_PROCESS_TOKEN") ? std::getenv("KVSIM_PROCESS_TOKEN") : "";
  attempt("wrong token", hello("not-the-token"), "");
  attempt("malformed frame", hello(token), u32(2) + "xy");
  attempt("frame cut short", hello(token), u32(4000));
  const std::string sleep_1s = frame(4, u64(1000000000000ULL));
  attempt("second request before an answer", hello(token), sleep_1s + sleep_1s);
  uint32_t devices = 0;
  const aclError code = aclrtGetDeviceCount(&devices);
  sleep(1);
  std::printf("the program's own calls: aclrtGetDeviceCount %d, %u devices, then slept\n", code,
              devices);
  return 0;
}
