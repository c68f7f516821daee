#include "impl/directory.h"

#include "impl/data_dist_core.h"

namespace kvsim::impl {

void Directory::add(const std::shared_ptr<DataDistCore>& core) {
  if (by_cluster_.count(core->cluster_id()) != 0) {
    throw_param_invalid("cluster_id", "cluster " + std::to_string(core->cluster_id()) +
                                          " is already initialized in this world");
  }
  by_cluster_.emplace(core->cluster_id(), core);
}

void Directory::remove(const DataDistCore& core) {
  const auto it = by_cluster_.find(core.cluster_id());
  if (it != by_cluster_.end() && it->second.get() == &core) by_cluster_.erase(it);
}

std::shared_ptr<DataDistCore> Directory::find_cluster(std::uint64_t cluster_id) const {
  const auto it = by_cluster_.find(cluster_id);
  return it == by_cluster_.end() ? nullptr : it->second;
}

std::shared_ptr<DataDistCore> Directory::find_process(int process) const {
  for (const auto& [id, core] : by_cluster_) {
    if (core->process() == process) return core;
  }
  return nullptr;
}

}  // namespace kvsim::impl
