#include "impl/cache_registry.h"

namespace kvsim::impl {

namespace {

void account(RegistrationTotals& totals, const CacheEntry& e, bool add) {
  if (!e.registered) return;
  const std::uint64_t count = e.view.tensor_addrs.size();
  const std::uint64_t bytes = count * e.view.desc.size();
  std::uint64_t& placed =
      e.view.placement() == Placement::DEVICE ? totals.device_bytes : totals.host_bytes;
  if (add) {
    totals.addresses += count;
    placed += bytes;
  } else {
    totals.addresses -= count;
    placed -= bytes;
  }
}

}  // namespace

bool same_key(const CacheKey& a, const CacheKey& b) {
  return a.cluster_id == b.cluster_id && a.req_id == b.req_id && a.model_id == b.model_id &&
         a.prefix_id == b.prefix_id;
}

std::int64_t CacheRegistry::add(CacheEntry entry) {
  const std::int64_t id = next_id_++;
  entry.view.cache_id = id;
  account(totals_, entry, true);
  entries_.emplace(id, std::move(entry));
  return id;
}

const CacheEntry* CacheRegistry::find(std::int64_t cache_id) const {
  const auto it = entries_.find(cache_id);
  if (it == entries_.end() || it->second.release_pending) return nullptr;
  return &it->second;
}

CacheEntry* CacheRegistry::find(std::int64_t cache_id) {
  const auto it = entries_.find(cache_id);
  if (it == entries_.end() || it->second.release_pending) return nullptr;
  return &it->second;
}

CacheEntry* CacheRegistry::find_any(std::int64_t cache_id) {
  const auto it = entries_.find(cache_id);
  return it == entries_.end() ? nullptr : &it->second;
}

bool CacheRegistry::erase(std::int64_t cache_id) {
  const auto it = entries_.find(cache_id);
  if (it == entries_.end()) return false;
  account(totals_, it->second, false);
  entries_.erase(it);
  return true;
}

std::optional<std::pair<std::int64_t, std::uint64_t>> CacheRegistry::find_key(
    const CacheKey& key) const {
  for (const auto& [id, e] : entries_) {
    for (std::size_t row = 0; row < e.row_keys.size(); ++row) {
      if (e.row_keys[row] && same_key(*e.row_keys[row], key)) {
        return std::make_pair(id, static_cast<std::uint64_t>(row));
      }
    }
  }
  return std::nullopt;
}

std::optional<std::int64_t> CacheRegistry::find_blocks_key(const BlocksCacheKey& key) const {
  for (const auto& [id, e] : entries_) {
    if (!e.release_pending && e.blocks_key && e.blocks_key->cluster_id == key.cluster_id &&
        e.blocks_key->model_id == key.model_id) {
      return id;
    }
  }
  return std::nullopt;
}

std::optional<std::int64_t> CacheRegistry::find_blocks_model(std::uint64_t model_id) const {
  for (const auto& [id, e] : entries_) {
    if (!e.release_pending && e.blocks_key && e.blocks_key->model_id == model_id) return id;
  }
  return std::nullopt;
}

}  // namespace kvsim::impl
