#include "cpp/client/channel.h"

#include <dlfcn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>

#include "cpp/server/session.h"
#include "impl/directory.h"
#include "sim/scenario.h"
#include "sim/world.h"

namespace kvsim::cpp::client {

namespace {

// The share/kvsim/presets directory of an installed kvsim, found next to this library, so that an
// installed program needs no source tree.
void use_installed_presets() {
  if (std::getenv("KVSIM_PRESET_PATH") != nullptr) return;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&use_installed_presets), &info) == 0 || !info.dli_fname) {
    return;
  }
  const std::filesystem::path presets =
      std::filesystem::path(info.dli_fname).parent_path().parent_path() / "share" / "kvsim" /
      "presets";
  if (std::filesystem::is_directory(presets)) setenv("KVSIM_PRESET_PATH", presets.c_str(), 1);
}

bool write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

bool read_all(int fd, char* out, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, out + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

struct Channel::State {
  std::mutex mutex;
  bool broken = false;
  std::uint64_t now_ps = 0;
  // Launched: the socket to the world.
  int fd = -1;
  // In process: a world of its own and the session that serves this program.
  std::unique_ptr<sim::World> world;
  std::unique_ptr<Session> session;

  void fail(const std::string& why) {
    if (!broken) std::fprintf(stderr, "kvsim: %s; kvsim calls fail from now on\n", why.c_str());
    broken = true;
  }

  void open_local() {
    use_installed_presets();
    std::string preset = "atlas-a2";
    std::vector<model::Override> overrides;
    if (const char* scenario = std::getenv("KVSIM_SCENARIO"); scenario && *scenario) {
      const sim::Scenario s = sim::load_scenario(scenario);
      preset = s.preset;
      overrides = s.hardware_overrides;
    } else if (const char* name = std::getenv("KVSIM_PRESET"); name && *name) {
      preset = name;
    }
    world = std::make_unique<sim::World>(preset, overrides);
    session = std::make_unique<Session>(world->platform(), world->directory());
  }

  void open_socket(const std::string& path, const std::string& token) {
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (fd < 0 || path.size() >= sizeof(addr.sun_path)) {
      fail("cannot open the channel to the world at " + path);
      return;
    }
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      fail("cannot reach the world at " + path + ": " + std::strerror(errno));
      return;
    }
    if (!exchange(wire::Op::kHello,
                  wire::Writer().str(token).u64(static_cast<std::uint64_t>(::getpid())).take())) {
      fail("the world refused this program");
    }
  }

  // One request over the socket; the reply payload in `reply`.
  std::optional<std::string> exchange(wire::Op op, const std::string& payload) {
    if (!write_all(fd, wire::request_frame(op, payload))) {
      fail("the world is gone (write)");
      return std::nullopt;
    }
    char head[4];
    if (!read_all(fd, head, 4)) {
      fail("the world is gone (read)");
      return std::nullopt;
    }
    std::uint32_t size = 0;
    for (int i = 0; i < 4; ++i)
      size |= static_cast<std::uint32_t>(static_cast<unsigned char>(head[i])) << (8 * i);
    if (size < 8 || size > wire::kMaxFrame + 8) {
      fail("a malformed answer from the world");
      return std::nullopt;
    }
    std::string body(size, '\0');
    if (!read_all(fd, body.data(), size)) {
      fail("the world is gone (read)");
      return std::nullopt;
    }
    wire::Reader in(body);
    now_ps = in.u64();
    return body.substr(8);
  }
};

Channel::Channel() : state_(new State) {
  const char* path = std::getenv("KVSIM_WORLD_SOCKET");
  const char* token = std::getenv("KVSIM_PROCESS_TOKEN");
  try {
    if (path != nullptr && *path != '\0') {
      state_->open_socket(path, token ? token : "");
    } else {
      state_->open_local();
    }
  } catch (const std::exception& e) {
    state_->fail(std::string("cannot make the world: ") + e.what());
  }
}

Channel& Channel::get() {
  static Channel* channel = new Channel();  // never destroyed: used from exit handlers too
  return *channel;
}

std::optional<std::string> Channel::call(wire::Op op, const std::string& payload) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->broken) return std::nullopt;
  if (state_->fd >= 0) return state_->exchange(op, payload);
  try {
    std::string reply = state_->session->handle(op, payload);
    state_->now_ps = state_->world->platform().now();
    return reply;
  } catch (const std::exception& e) {
    state_->fail(std::string("the world failed: ") + e.what());
    return std::nullopt;
  }
}

std::uint64_t Channel::now_ps() const {
  return state_->now_ps;
}

bool Channel::launched() const {
  return state_->fd >= 0;
}

}  // namespace kvsim::cpp::client
