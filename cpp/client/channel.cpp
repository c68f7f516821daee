#include "cpp/client/channel.h"

#include <pthread.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace kvsim::cpp::client {

namespace {

// Raw system calls: a preloaded shim interposes the libc names, and the channel's own traffic
// must never go through it.
int sys_socket(int domain, int type) {
  return static_cast<int>(syscall(SYS_socket, domain, type, 0));
}
int sys_connect(int fd, const sockaddr_un& addr) {
  return static_cast<int>(
      syscall(SYS_connect, fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)));
}
void sys_close(int fd) {
  syscall(SYS_close, fd);
}

bool write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const long n = syscall(SYS_write, fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

bool read_all(int fd, char* out, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    const long n = syscall(SYS_read, fd, out + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

std::atomic<bool> g_warned{false};

void warn(const std::string& why) {
  if (!g_warned.exchange(true)) {
    std::fprintf(stderr, "kvsim: %s; kvsim calls fail from now on\n", why.c_str());
  }
}

// The calling thread's connection to a launch's world.
struct Connection {
  int fd = -1;
  bool opened = false;  // tried (fd < 0 afterwards means it failed)
  bool broken = false;
  std::int64_t slot = -1;  // announced by the thread that started this one
  std::uint64_t now_ps = 0;
  ~Connection();
};

std::atomic<bool> g_main_left_alone{false};  // the main thread called pthread_exit

// The main thread's connection closes in exit(), before the process ends: it says so first, so
// that the world waits for the end instead of finding the other threads blocked and stopping.
Connection::~Connection() {
  if (fd < 0) return;
  if (!broken && !g_main_left_alone && syscall(SYS_getpid) == syscall(SYS_gettid)) {
    (void)write_all(fd, wire::request_frame(wire::Op::kBye, {}));
  }
  sys_close(fd);
  fd = -1;
}

thread_local Connection t_connection;
thread_local bool t_in_call = false;  // this thread is inside Channel::call
thread_local std::uint64_t t_calls = 0;
thread_local std::string t_recent_error;

bool g_forked_child = false;
std::atomic<bool> g_refused{false};  // the launch's world refused this process

LocalBackend& local_backend() {
  static auto* backend = new LocalBackend();  // never destroyed: used from exit handlers too
  return *backend;
}

std::mutex& local_mutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}

// The world runs one thread of a program at a time: a thread's request hands its turn on, and
// its answer gives it a turn again, over each thread's own socket to another process, which
// ThreadSanitizer cannot see. A program built with TSan is told of that order here, as a release
// before each request and an acquire after each answer on one object (TSan's annotation calls,
// weak: defined only in such a program), so that the shim's state the threads share in turn is
// not reported as a race.
extern "C" void __tsan_acquire(void* addr) __attribute__((weak));
extern "C" void __tsan_release(void* addr) __attribute__((weak));
char g_world_turn;

// One request over the thread's socket: the reply payload; the reply's time in now_ps.
std::optional<std::string> exchange(Connection& c, wire::Op op, const std::string& payload) {
  if (&__tsan_release != nullptr) __tsan_release(&g_world_turn);
  struct Turn {
    ~Turn() {
      if (&__tsan_acquire != nullptr) __tsan_acquire(&g_world_turn);
    }
  } turn;
  if (!write_all(c.fd, wire::request_frame(op, payload))) {
    warn("the world is gone (write)");
    c.broken = true;
    return std::nullopt;
  }
  char head[4];
  if (!read_all(c.fd, head, 4)) {
    warn("the world is gone (read)");
    c.broken = true;
    return std::nullopt;
  }
  std::uint32_t size = 0;
  for (int i = 0; i < 4; ++i) {
    size |= static_cast<std::uint32_t>(static_cast<unsigned char>(head[i])) << (8 * i);
  }
  if (size < 8 || size > wire::kMaxFrame + 8) {
    warn("a malformed answer from the world");
    c.broken = true;
    return std::nullopt;
  }
  std::string body(size, '\0');
  if (!read_all(c.fd, body.data(), size)) {
    warn("the world is gone (read)");
    c.broken = true;
    return std::nullopt;
  }
  c.now_ps = wire::Reader(body).u64();
  return body.substr(8);
}

}  // namespace

Channel::Channel() {
  const char* path = std::getenv("KVSIM_WORLD_SOCKET");
  if (path != nullptr && *path != '\0') {
    launched_ = true;
    socket_path_ = path;
    const char* token = std::getenv("KVSIM_PROCESS_TOKEN");
    token_ = token ? token : "";
  }
  pthread_atfork(nullptr, nullptr, [] { Channel::get().forget_after_fork(); });
}

Channel& Channel::get() {
  static Channel* channel = new Channel();  // never destroyed: used from exit handlers too
  return *channel;
}

void Channel::forget_after_fork() {
  // The child shares the parent's socket: it must never write to it, and it is no process the
  // launch knows.
  if (t_connection.fd >= 0) sys_close(t_connection.fd);
  t_connection.fd = -1;
  t_connection.opened = true;
  t_connection.broken = true;
  launched_ = false;
  g_forked_child = true;
}

void Channel::become_child(const std::string& token) {
  // The parent's socket stays the parent's (forget_after_fork closed this process's copy); this
  // thread says hello as the child's first thread at its next call.
  t_connection.fd = -1;
  t_connection.opened = false;
  t_connection.broken = false;
  t_connection.slot = -1;
  token_ = token;
  launched_ = true;
  g_forked_child = false;
}

const char* Channel::recent_error() {
  return t_recent_error.empty() ? nullptr : t_recent_error.c_str();
}

void Channel::set_recent_error(std::string why) {
  t_recent_error = std::move(why);
}

void Channel::set_local_backend(LocalBackend backend) {
  std::lock_guard<std::mutex> lock(local_mutex());
  local_backend() = std::move(backend);
}

namespace {

bool connect_thread(Connection& c, const std::string& path, const std::string& token) {
  c.opened = true;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    warn("the world's socket path is too long: " + path);
    return false;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = sys_socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC);
  if (fd < 0 || sys_connect(fd, addr) != 0) {
    warn("cannot reach the world at " + path + ": " + std::strerror(errno));
    if (fd >= 0) sys_close(fd);
    return false;
  }
  c.fd = fd;
  const auto reply = exchange(c, wire::Op::kHello,
                              wire::Writer()
                                  .str(token)
                                  .u64(static_cast<std::uint64_t>(syscall(SYS_getpid)))
                                  .i64(c.slot)
                                  .take());
  if (!reply) return false;
  try {
    wire::Reader in(*reply);
    const bool accepted = in.boolean();
    const std::string why = in.str();
    if (accepted) return true;
    warn("the world refused this program: " + why);
    g_refused = true;
  } catch (const wire::WireError&) {
    warn("a malformed answer from the world");
  }
  sys_close(c.fd);
  c.fd = -1;
  c.broken = true;
  return false;
}

}  // namespace

std::optional<std::string> Channel::call(wire::Op op, const std::string& payload) {
  // A signal handler that runs while this thread waits for an answer (bash reaps its children
  // with waitpid in its SIGCHLD handler) must not write into that exchange: its call fails, and
  // the shim's wrappers then do what the C library does.
  if (t_in_call) return std::nullopt;
  t_in_call = true;
  struct Leave {
    ~Leave() { t_in_call = false; }
  } leave;
  ++t_calls;
  if (g_forked_child) {
    warn("a process forked by a launched program has no simulated world");
    return std::nullopt;
  }
  if (g_refused) return std::nullopt;
  if (!launched_) {
    std::lock_guard<std::mutex> lock(local_mutex());
    if (!local_backend()) {
      warn("no world: link libllm_datadist or libascendcl, or run under kvsim launch");
      return std::nullopt;
    }
    std::uint64_t now = 0;
    auto reply = local_backend()(op, payload, now);
    t_connection.now_ps = now;
    return reply;
  }
  Connection& c = t_connection;
  if (c.broken) return std::nullopt;
  if (!c.opened && !connect_thread(c, socket_path_, token_)) return std::nullopt;
  if (c.fd < 0) return std::nullopt;
  return exchange(c, op, payload);
}

bool Channel::launched() const {
  return launched_ && !g_refused;
}

std::uint64_t Channel::calls_made() const {
  return t_calls;
}

std::uint64_t Channel::now_ps() {
  if (launched_ && !t_connection.opened) (void)call(wire::Op::kNow, {});
  if (!launched_ && !g_forked_child) (void)call(wire::Op::kNow, {});
  return t_connection.now_ps;
}

std::int64_t Channel::announce_thread() {
  if (!launched_) return -1;
  const auto reply = call(wire::Op::kThreadNew, {});
  if (!reply) return -1;
  try {
    return wire::Reader(*reply).i64();
  } catch (const wire::WireError&) {
    return -1;
  }
}

void Channel::main_thread_exits_alone() {
  if (syscall(SYS_getpid) == syscall(SYS_gettid)) g_main_left_alone = true;
}

void Channel::cancel_thread(std::int64_t slot) {
  if (slot >= 0) (void)call(wire::Op::kThreadCancel, wire::Writer().i64(slot).take());
}

void Channel::adopt_thread(std::int64_t slot) {
  if (!launched_ || t_connection.opened) return;
  t_connection.slot = slot;
  (void)connect_thread(t_connection, socket_path_, token_);
}

}  // namespace kvsim::cpp::client
