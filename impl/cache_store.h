// Registration and pool allocation of caches (spec §4): register_cache, register_blocks_cache,
// unregister_cache, allocate_cache / allocate_blocks_cache and their release, remove_cache_key.
// Every check runs before anything changes.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "impl/data_dist_core.h"
#include "impl/types.h"

namespace kvsim::impl {

/// register_cache / register_blocks_cache arguments beyond validation's (§4).
struct RegisterRequest {
  const CacheDesc* cache_desc = nullptr;
  std::vector<std::uint64_t> addrs{};
  std::optional<bool> remote_accessible{};
  bool is_blocks_cache = false;
  bool mix = false;                            ///< C++ RegisterKvCache (CacheView::mix).
  std::vector<CacheKey> cache_keys{};          ///< register_cache: one per batch row.
  std::optional<BlocksCacheKey> blocks_key{};  ///< register_blocks_cache.
};

/// Registers caller memory. validate_register_cache's rules (LLMException LLM_PARAM_INVALID:
/// remote_accessible after a link, address count ≤ 240, ≤ 50 GiB device / 20 GiB host); then
/// kvsim's: each tensor must lie in one allocation of this process's device (DEVICE) or in host
/// memory (HOST), else LLM_PARAM_INVALID naming addrs[i] ([I]: HCCL registration would fail);
/// more cache_keys than batch rows is LLM_PARAM_INVALID; a key already in use is LLM_FAILED
/// (C++ LLM_CACHE_KEY_ALREADY_EXIST through code_2_status, §2.3). A DEVICE address not 2 MiB
/// aligned is a kUnalignedRegistration diagnostic (HCCS D2D needs it, §4; kvsim cannot know
/// which link a cache will use), an error in strict mode.
CacheView register_cache(DataDistCore& core, const RegisterRequest& request);

/// Unregisters a registered cache. LLM_KV_CACHE_NOT_EXIST for an unknown id; LLM_FAILED for a
/// remote-accessible cache while links exist (§4: "call after unlink, otherwise an HCCL error",
/// [I]).
void unregister_cache(DataDistCore& core, std::int64_t cache_id);

/// allocate_cache / allocate_blocks_cache: one pool range per tensor. No pool of the placement:
/// LLM_FEATURE_NOT_ENABLED (§6 "option missing"); the pool exhausted: LLM_OUT_OF_MEMORY (§6),
/// nothing kept. Keys as register_cache. remote_accessible follows the registration default.
CacheView allocate_cache(DataDistCore& core, const CacheDesc& cache_desc, bool is_blocks_cache,
                         const std::vector<CacheKey>& cache_keys,
                         const std::optional<BlocksCacheKey>& blocks_key);

/// deallocate_cache: no-op for a missing cache (§4); release deferred while row keys remain
/// (§4), until they are pulled or removed. LLM_PARAM_INVALID for a registered cache.
void deallocate_cache(DataDistCore& core, std::int64_t cache_id);

/// deallocate_blocks_cache: frees at once; no-op for a missing cache.
void deallocate_blocks_cache(DataDistCore& core, std::int64_t cache_id);

/// remove_cache_key: drops a row key of an allocated cache (no-op if absent, §4, or if the cache
/// is registered) and frees a cache pending release once no key is left.
void remove_cache_key(DataDistCore& core, const CacheKey& key);

}  // namespace kvsim::impl
