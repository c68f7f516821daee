#include "sim/world_inventory.h"

#include <sstream>

#include "impl/data_dist_core.h"
#include "impl/directory.h"
#include "impl/link.h"

namespace kvsim::sim {

bool EngineInventory::operator==(const EngineInventory& o) const {
  return caches == o.caches && registered_addresses == o.registered_addresses &&
         registered_bytes == o.registered_bytes && links == o.links &&
         comm_domains == o.comm_domains && tasks_in_flight == o.tasks_in_flight &&
         pool_bytes_used == o.pool_bytes_used;
}

bool WorldInventory::operator==(const WorldInventory& o) const {
  return memory_bytes == o.memory_bytes && engines == o.engines && live_jobs == o.live_jobs &&
         blocked_jobs == o.blocked_jobs && job_failures == o.job_failures &&
         open_batches == o.open_batches;
}

WorldInventory take_inventory(World& world) {
  WorldInventory inv;
  const model::Topology& topology = world.fabric().topology();
  for (std::size_t m = 0; m < topology.memory_count(); ++m) {
    inv.memory_bytes.push_back(
        topology.memory(model::MemoryId{static_cast<std::uint32_t>(m)}).allocated_bytes());
  }
  for (const auto& [cluster, core] : world.directory().members()) {
    EngineInventory e;
    for (const auto& [id, entry] : core->caches().entries()) {
      if (!entry.release_pending) e.caches.push_back(id);
    }
    const impl::RegistrationTotals& totals = core->caches().totals();
    e.registered_addresses = totals.addresses;
    e.registered_bytes = totals.device_bytes + totals.host_bytes;
    for (const auto& [peer, link] : core->links()) {
      std::string s = std::to_string(peer);
      if (!link->up()) s += " down";
      if (!link->peer_lost().empty()) s += " lost";
      e.links.push_back(s);
    }
    e.comm_domains = core->comm_domains().size();
    e.tasks_in_flight = core->tasks_in_flight;
    for (const impl::Placement p : {impl::Placement::DEVICE, impl::Placement::HOST}) {
      if (const impl::MemoryPool* pool = core->pool(p)) e.pool_bytes_used += pool->used();
    }
    inv.engines.emplace(cluster, std::move(e));
  }
  inv.live_jobs = world.platform().live_jobs();
  inv.blocked_jobs = world.platform().blocked_jobs().size();
  inv.job_failures = world.platform().job_failures().size();
  inv.open_batches = world.fabric().open_batches();
  return inv;
}

namespace {

template <class T>
std::string join(const std::vector<T>& v) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < v.size(); ++i) out << (i ? " " : "") << v[i];
  out << "]";
  return out.str();
}

template <class T>
void field(std::ostringstream& out, const std::string& name, const T& a, const T& b) {
  if (!(a == b)) out << name << ": " << a << " -> " << b << "\n";
}

template <class T>
void vector_field(std::ostringstream& out, const std::string& name, const std::vector<T>& a,
                  const std::vector<T>& b) {
  if (a != b) out << name << ": " << join(a) << " -> " << join(b) << "\n";
}

}  // namespace

std::string describe_difference(const WorldInventory& before, const WorldInventory& after) {
  std::ostringstream out;
  vector_field(out, "memory bytes", before.memory_bytes, after.memory_bytes);
  for (const auto& [cluster, e] : before.engines) {
    if (!after.engines.count(cluster)) out << "engine " << cluster << ": gone\n";
  }
  for (const auto& [cluster, b] : after.engines) {
    const std::string name = "engine " + std::to_string(cluster);
    const auto it = before.engines.find(cluster);
    if (it == before.engines.end()) {
      out << name << ": new\n";
      continue;
    }
    const EngineInventory& a = it->second;
    vector_field(out, name + " caches", a.caches, b.caches);
    field(out, name + " registered addresses", a.registered_addresses, b.registered_addresses);
    field(out, name + " registered bytes", a.registered_bytes, b.registered_bytes);
    vector_field(out, name + " links", a.links, b.links);
    field(out, name + " comm domains", a.comm_domains, b.comm_domains);
    field(out, name + " tasks in flight", a.tasks_in_flight, b.tasks_in_flight);
    field(out, name + " pool bytes", a.pool_bytes_used, b.pool_bytes_used);
  }
  field(out, "live jobs", before.live_jobs, after.live_jobs);
  field(out, "blocked jobs", before.blocked_jobs, after.blocked_jobs);
  field(out, "job failures", before.job_failures, after.job_failures);
  field(out, "open batches", before.open_batches, after.open_batches);
  return out.str();
}

}  // namespace kvsim::sim
