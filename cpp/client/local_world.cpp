// libkvsim_client: the world of a program that was not launched. At load it installs the
// channel's local backend: at the first call, a world of its own in process, from the scenario
// named by $KVSIM_SCENARIO, else the preset $KVSIM_PRESET (default atlas-a2), in which the
// program is the only process (handy for unit tests of transfer code; several LlmDataDists of
// one program may link to each other, other programs need a launch).
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "cpp/client/local_world.h"

#include "cpp/client/channel.h"
#include "cpp/server/session.h"
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

class LocalWorld {
 public:
  std::optional<std::string> call(wire::Op op, const std::string& payload, std::uint64_t& now) {
    if (failed_) return std::nullopt;
    try {
      if (!world_) open();
      std::string reply = session_->handle(op, payload);
      now = world_->platform().now();
      return reply;
    } catch (const std::exception& e) {
      failed_ = true;
      std::fprintf(stderr, "kvsim: %s%s; kvsim calls fail from now on\n",
                   world_ ? "the world failed: " : "cannot make the world: ", e.what());
      return std::nullopt;
    }
  }

 private:
  void open() {
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
    world_ = std::make_unique<sim::World>(preset, overrides);
    session_ = std::make_unique<Session>(world_->platform(), world_->directory());
  }

  bool failed_ = false;
  std::unique_ptr<sim::World> world_;
  std::unique_ptr<Session> session_;
};

// Never destroyed: programs call the libraries from exit handlers and static destructors.
const bool g_installed = [] {
  auto* world = new LocalWorld();
  Channel::set_local_backend([world](wire::Op op, const std::string& payload, std::uint64_t& now) {
    return world->call(op, payload, now);
  });
  return true;
}();

}  // namespace

bool local_world_available() {
  return g_installed;
}

}  // namespace kvsim::cpp::client
