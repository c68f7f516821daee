// How one process sees the caches of a linked peer: live (the peer answers each request) or through
// the table that remote-accessible mode caches at first access (spec §3.4, §5).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "impl/cache_registry.h"
#include "impl/data_dist_core.h"
#include "impl/link.h"

namespace kvsim::impl {

/// A remote cache description from a peer's entry.
RemoteCacheInfo remote_info(const CacheEntry& entry);

/// The peer of a link, or nullptr if it has finalized.
std::shared_ptr<DataDistCore> peer_of(const DataDistCore& core, const Link& link);

/// The peer's end of the same link (its Link to `core`), or nullptr.
std::shared_ptr<Link> peer_end(const DataDistCore& core, const Link& link);

/// The link's cached remote table, read from the peer's live caches at the first call (§5:
/// "caches remote metadata at the first pull; later remote changes are not seen").
const RemoteCacheTable& remote_cache_table(const DataDistCore& core, Link& link);

/// The remote cache a transfer or push names by key in remote-accessible mode: a
/// CacheKeyByIdAndIndex by cache_id, a BlocksCacheKey by model_id (§3.4). nullopt if absent.
std::optional<RemoteCacheInfo> find_remote_cache(const RemoteCacheTable& table,
                                                 const TransferCacheKey& key);

}  // namespace kvsim::impl
