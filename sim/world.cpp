#include "sim/world.h"

#include <stdexcept>

#include "impl/directory.h"
#include "model/errors.h"
#include "model/sim_kernel.h"

namespace kvsim::sim {
namespace {
int g_live_worlds = 0;
}

World::World(const std::string& preset, const std::vector<model::Override>& overrides,
             const AddressPlan& addresses) {
  if (g_live_worlds > 0) {
    throw std::logic_error(
        "World: another World is alive; SystemC allows one simulation at a time");
  }
  model::TopologySpec spec = model::load_preset(preset, overrides);  // may throw: nothing built
  spec.host_ips = addresses.host_ips;
  spec.device_ips = addresses.device_ips;
  try {
    spec.validate();
  } catch (const model::ModelError& e) {
    throw model::ModelError(model::ErrorKind::kInvalidArgument,
                            std::string("address plan: ") + e.what());
  }
  model::fresh_kernel();
  fabric_ = std::make_unique<model::Fabric>("fabric", spec);
  platform_ = std::make_unique<SystemcPlatform>(*fabric_);
  directory_ = std::make_unique<impl::Directory>();
  ++g_live_worlds;
}

World::~World() {
  directory_.reset();
  platform_.reset();
  fabric_.reset();  // modules must die while their kernel is current
  model::fresh_kernel();
  --g_live_worlds;
}

void World::forget_inherited() {
  model::fresh_kernel();
  g_live_worlds = 0;
}

}  // namespace kvsim::sim
