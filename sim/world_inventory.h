// What a world holds at one moment, as the world itself reports it: memory in use, every
// engine's registrations, links, comm domains and tasks, and the jobs and copies still running.
// Fault tests compare inventories to show a failed call or a fault left nothing behind.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/world.h"

namespace kvsim::sim {

/// One initialized engine's state.
struct EngineInventory {
  std::vector<std::int64_t> caches;        ///< live cache ids (registered or allocated)
  std::uint64_t registered_addresses = 0;  ///< §4 registration totals
  std::uint64_t registered_bytes = 0;      ///< device plus host bytes registered
  std::vector<std::string> links;          ///< "<peer>" or "<peer> lost" / "<peer> down"
  std::size_t comm_domains = 0;
  int tasks_in_flight = 0;
  std::uint64_t pool_bytes_used = 0;  ///< device and host pools
  bool operator==(const EngineInventory& o) const;
};

/// The whole world's state.
struct WorldInventory {
  std::vector<std::uint64_t> memory_bytes;           ///< allocated bytes per memory
  std::map<std::uint64_t, EngineInventory> engines;  ///< by cluster id
  std::uint64_t live_jobs = 0;
  std::size_t blocked_jobs = 0;
  std::size_t job_failures = 0;
  std::size_t open_batches = 0;
  bool operator==(const WorldInventory& o) const;
  bool operator!=(const WorldInventory& o) const { return !(*this == o); }
};

/// Reads the inventory of `world` (no simulated time passes).
WorldInventory take_inventory(World& world);

/// A line per field that differs between `before` and `after` ("" when equal).
std::string describe_difference(const WorldInventory& before, const WorldInventory& after);

}  // namespace kvsim::sim
