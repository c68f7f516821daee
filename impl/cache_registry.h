// The caches of one LLMDataDist: registered and pool-allocated caches, their keys, and the
// registration totals that the limits of spec §4 count.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "impl/copy_geometry.h"
#include "impl/types.h"
#include "impl/validation.h"

namespace kvsim::impl {

/// One cache as the engine holds it.
struct CacheEntry {
  CacheView view;
  /// Key of each batch row (index = row); nullopt for a row without a key (§4: placeholders).
  std::vector<std::optional<CacheKey>> row_keys{};
  std::optional<BlocksCacheKey> blocks_key{};
  bool registered = false;  ///< register_* (counts toward the limits) vs allocate_*.
  std::vector<std::uint64_t> pool_addrs{};  ///< allocate_*: tensor ranges to return to the pool.
  bool release_pending = false;  ///< deallocate_cache with keys left: freed when they go (§4).
};

/// Equality of every field of a CacheKey.
bool same_key(const CacheKey& a, const CacheKey& b);

/// Caches by id, with key lookups.
class CacheRegistry {
 public:
  /// Adds an entry, assigning the next cache id (ids start at 1 and are never reused).
  std::int64_t add(CacheEntry entry);
  /// A live cache (not pending release), or nullptr.
  const CacheEntry* find(std::int64_t cache_id) const;
  CacheEntry* find(std::int64_t cache_id);
  /// Any entry, including one pending release (remote key lookups still see it).
  CacheEntry* find_any(std::int64_t cache_id);
  /// Removes an entry; false if absent.
  bool erase(std::int64_t cache_id);
  /// (cache id, row) of a CacheKey, if some row carries it.
  std::optional<std::pair<std::int64_t, std::uint64_t>> find_key(const CacheKey& key) const;
  /// The live blocks cache registered or allocated under this BlocksCacheKey.
  std::optional<std::int64_t> find_blocks_key(const BlocksCacheKey& key) const;
  /// The live blocks cache whose key has this model_id (remote-accessible lookups, §3.4).
  std::optional<std::int64_t> find_blocks_model(std::uint64_t model_id) const;
  /// Sums over registered caches (§4 limits).
  const RegistrationTotals& totals() const { return totals_; }
  const std::map<std::int64_t, CacheEntry>& entries() const { return entries_; }

 private:
  std::map<std::int64_t, CacheEntry> entries_;
  RegistrationTotals totals_;
  std::int64_t next_id_ = 1;
};

}  // namespace kvsim::impl
