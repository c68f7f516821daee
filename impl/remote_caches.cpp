#include "impl/remote_caches.h"

#include "impl/directory.h"

namespace kvsim::impl {

RemoteCacheInfo remote_info(const CacheEntry& entry) {
  RemoteCacheInfo info;
  info.geometry = make_cache_geometry(entry.view);
  info.placement = entry.view.placement();
  info.is_blocks_cache = entry.view.is_blocks_cache;
  info.mix = entry.view.mix;
  info.blocks_key = entry.blocks_key;
  return info;
}

std::shared_ptr<DataDistCore> peer_of(const DataDistCore& core, const Link& link) {
  return core.directory().find_cluster(link.peer_cluster_id());
}

std::shared_ptr<Link> peer_end(const DataDistCore& core, const Link& link) {
  const std::shared_ptr<DataDistCore> peer = peer_of(core, link);
  return peer ? peer->find_link(core.cluster_id()) : nullptr;
}

const RemoteCacheTable& remote_cache_table(const DataDistCore& core, Link& link) {
  if (!link.remote_table()) {
    RemoteCacheTable table;
    if (const std::shared_ptr<DataDistCore> peer = peer_of(core, link)) {
      for (const auto& [id, entry] : peer->caches().entries()) {
        if (!entry.release_pending) table.emplace(id, remote_info(entry));
      }
    }
    link.remote_table() = std::move(table);
  }
  return *link.remote_table();
}

std::optional<RemoteCacheInfo> find_remote_cache(const RemoteCacheTable& table,
                                                 const TransferCacheKey& key) {
  if (const auto* by_id = std::get_if<CacheKeyByIdAndIndex>(&key)) {
    const auto it = table.find(by_id->cache_id());
    if (it == table.end()) return std::nullopt;
    return it->second;
  }
  const auto& blocks = std::get<BlocksCacheKey>(key);
  for (const auto& [id, info] : table) {
    if (info.is_blocks_cache && info.blocks_key && info.blocks_key->model_id == blocks.model_id) {
      return info;
    }
  }
  return std::nullopt;
}

}  // namespace kvsim::impl
