// A simulated world: a fresh SystemC kernel, the hardware of a preset, the platform door on it,
// and the directory of llm_datadist engines that live in it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/fabric.h"
#include "model/preset.h"
#include "sim/systemc_platform.h"

namespace kvsim::impl {
class Directory;
}

namespace kvsim::sim {

/// Addresses taken from a user's cluster (a launch): each node's host address and each device's
/// NIC address in world order. Empty lists keep the preset's bases.
struct AddressPlan {
  std::vector<std::string> host_ips;
  std::vector<std::string> device_ips;
};

/// Owns one simulation. SystemC has one kernel per process, so at most one World lives at a time
/// (a second throws std::logic_error); destroying it frees its modules and detaches the kernel.
class World {
 public:
  /// Builds the preset (name or YAML path) with overrides on a fresh kernel.
  explicit World(const std::string& preset, const std::vector<model::Override>& overrides = {},
                 const AddressPlan& addresses = {});
  World(const World&) = delete;
  World& operator=(const World&) = delete;
  ~World();

  /// In a process forked while a World was alive: forgets that World (its memory stays, never
  /// used again; destroying it would touch the parent's Python objects and jobs) so that this
  /// process can build its own.
  static void forget_inherited();

  model::Fabric& fabric() { return *fabric_; }
  SystemcPlatform& platform() { return *platform_; }
  impl::Directory& directory() { return *directory_; }
  const model::TopologySpec& spec() const { return fabric_->topology().spec(); }

 private:
  std::unique_ptr<model::Fabric> fabric_;
  std::unique_ptr<SystemcPlatform> platform_;
  std::unique_ptr<impl::Directory> directory_;
};

}  // namespace kvsim::sim
