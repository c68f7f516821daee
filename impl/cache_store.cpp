#include "impl/cache_store.h"

#include <string>

namespace kvsim::impl {

namespace {

constexpr std::uint64_t kHccsAlignment = 2ull << 20;

bool is_placeholder(const CacheKey& key) {
  return key.req_id == kInvalidId && key.prefix_id == kInvalidId;
}

void key_in_use(const std::string& argument) {
  const LLMStatusCode status = code_2_status(to_int(LLMStatusCode::LLM_CACHE_KEY_ALREADY_EXIST));
  throw LLMException(status, argument, "already in use (LLM_CACHE_KEY_ALREADY_EXIST)");
}

// Row keys from cache_keys (§4: one key per row, placeholders keep a row keyless).
std::vector<std::optional<CacheKey>> row_keys(const DataDistCore& core, const CacheDesc& desc,
                                              bool is_blocks_cache,
                                              const std::vector<CacheKey>& keys) {
  const std::uint64_t rows = is_blocks_cache ? 1 : static_cast<std::uint64_t>(desc.batch_size());
  if (keys.size() > rows) {
    throw_param_invalid("cache_keys", std::to_string(keys.size()) + " keys for " +
                                          std::to_string(rows) + " batch rows");
  }
  std::vector<std::optional<CacheKey>> out(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (is_placeholder(keys[i])) continue;
    for (std::size_t j = 0; j < i; ++j) {
      if (out[j] && same_key(*out[j], keys[i])) key_in_use("cache_keys[" + std::to_string(i) + "]");
    }
    if (core.caches().find_key(keys[i])) key_in_use("cache_keys[" + std::to_string(i) + "]");
    out[i] = keys[i];
  }
  return out;
}

void check_blocks_key(const DataDistCore& core, const std::optional<BlocksCacheKey>& key) {
  if (key && core.caches().find_blocks_key(*key)) key_in_use("blocks_cache_key");
}

void free_entry(DataDistCore& core, std::int64_t cache_id) {
  CacheEntry* e = core.caches().find_any(cache_id);
  if (e == nullptr) return;
  if (MemoryPool* pool = core.pool(e->view.placement())) {
    for (std::uint64_t addr : e->pool_addrs) pool->free(addr);
  }
  core.caches().erase(cache_id);
}

}  // namespace

CacheView register_cache(DataDistCore& core, const RegisterRequest& request) {
  RegisterArgs args;
  args.cache_desc = request.cache_desc;
  args.addrs = request.addrs;
  args.remote_accessible = request.remote_accessible;
  args.is_blocks_cache = request.is_blocks_cache;
  const bool remote_accessible = validate_register_cache(
      args, core.registers_as_linked(), core.caches().totals(), RegistrationLimits{});
  const CacheDesc& desc = *request.cache_desc;
  const std::uint64_t size = desc.size();
  for (std::size_t i = 0; i < request.addrs.size(); ++i) {
    const std::optional<MemoryLocation> where = core.platform().locate(request.addrs[i], size);
    const bool ok = where && where->placement == desc.placement() &&
                    (desc.placement() == Placement::HOST || where->device == core.device());
    if (!ok) {
      throw_param_invalid("addrs[" + std::to_string(i) + "]",
                          "[" + std::to_string(request.addrs[i]) + ", +" + std::to_string(size) +
                              ") is not " + std::string(to_string(desc.placement())) +
                              " memory allocated on device " + std::to_string(core.device()));
    }
  }
  std::vector<std::optional<CacheKey>> keys =
      row_keys(core, desc, request.is_blocks_cache, request.cache_keys);
  check_blocks_key(core, request.blocks_key);
  if (desc.placement() == Placement::DEVICE) {
    for (std::size_t i = 0; i < request.addrs.size(); ++i) {
      if (request.addrs[i] % kHccsAlignment != 0) {
        core.flag(DiagnosticKind::kUnalignedRegistration,
                  "addrs[" + std::to_string(i) + "] = " + std::to_string(request.addrs[i]) +
                      " is not 2 MiB aligned, which HCCS D2D transfers require",
                  "addrs[" + std::to_string(i) + "]");
        break;
      }
    }
  }
  CacheEntry entry{
      CacheView{-1, desc, request.addrs, request.is_blocks_cache, remote_accessible, request.mix}};
  entry.row_keys = std::move(keys);
  entry.blocks_key = request.blocks_key;
  entry.registered = true;
  const std::int64_t id = core.caches().add(std::move(entry));
  return core.caches().find(id)->view;
}

void unregister_cache(DataDistCore& core, std::int64_t cache_id) {
  // hixl DataCacheEngine::Unregister: CommMemManager::UnregisterCacheMem and
  // CacheManager::UnregisterCacheEntry both succeed for an unknown id (a warning).
  const CacheEntry* e = core.caches().find(cache_id);
  if (e == nullptr || !e->registered) {
    core.flag(DiagnosticKind::kUnregisterUnknownCache,
              "no registered cache " + std::to_string(cache_id) + "; the library succeeds",
              "cache_id");
    return;
  }
  // Nothing checks links; the docs require unlinking first because the memory of a
  // remote-accessible cache is bound to every link's HCCL comm (HcclDeregisterGlobalMem fails).
  if (e->view.remote_accessible && core.any_link()) {
    core.flag(DiagnosticKind::kUnregisterWhileLinked,
              "remote accessible cache " + std::to_string(cache_id) + " unregistered while " +
                  std::to_string(core.links().size()) +
                  " link(s) remain; the library requires unlink first (HCCL error on hardware)",
              "cache_id");
  }
  core.caches().erase(cache_id);
}

CacheView allocate_cache(DataDistCore& core, const CacheDesc& cache_desc, bool is_blocks_cache,
                         const std::vector<CacheKey>& cache_keys,
                         const std::optional<BlocksCacheKey>& blocks_key) {
  MemoryPool* pool = core.pool(cache_desc.placement());
  if (pool == nullptr) {
    throw LLMException(
        LLMStatusCode::LLM_FEATURE_NOT_ENABLED, "cache_desc.placement",
        std::string(to_string(cache_desc.placement())) + " needs " +
            (cache_desc.placement() == Placement::DEVICE ? kOptionMemPoolConfig
                                                         : kOptionHostMemPoolConfig));
  }
  if (cache_desc.num_tensors() == 0) {
    throw_param_invalid("cache_desc.num_tensors", "must be > 0");
  }
  const std::uint64_t size = cache_desc.size();
  std::vector<std::optional<CacheKey>> keys =
      row_keys(core, cache_desc, is_blocks_cache, cache_keys);
  check_blocks_key(core, blocks_key);
  std::vector<std::uint64_t> addrs;
  for (std::uint32_t i = 0; i < cache_desc.num_tensors(); ++i) {
    const std::optional<std::uint64_t> addr = pool->allocate(size);
    if (!addr) {
      for (std::uint64_t a : addrs) pool->free(a);
      throw LLMException(LLMStatusCode::LLM_OUT_OF_MEMORY, "cache_desc",
                         std::to_string(cache_desc.num_tensors()) + " tensors of " +
                             std::to_string(size) + " bytes do not fit the pool (" +
                             std::to_string(pool->capacity() - pool->used()) + " of " +
                             std::to_string(pool->capacity()) + " bytes free)");
    }
    addrs.push_back(*addr);
  }
  const bool remote_accessible =
      !core.registers_as_linked() && cache_desc.placement() == Placement::DEVICE;
  CacheEntry entry{CacheView{-1, cache_desc, addrs, is_blocks_cache, remote_accessible}};
  entry.row_keys = std::move(keys);
  entry.pool_addrs = std::move(addrs);
  entry.blocks_key = blocks_key;
  const std::int64_t id = core.caches().add(std::move(entry));
  return core.caches().find(id)->view;
}

void deallocate_cache(DataDistCore& core, std::int64_t cache_id) {
  CacheEntry* e = core.caches().find(cache_id);
  if (e == nullptr) return;
  if (e->registered) {
    throw_param_invalid(
        "cache", "cache " + std::to_string(cache_id) + " was registered; use unregister_cache");
  }
  for (const std::optional<CacheKey>& key : e->row_keys) {
    if (key) {
      e->release_pending = true;
      return;
    }
  }
  free_entry(core, cache_id);
}

void deallocate_blocks_cache(DataDistCore& core, std::int64_t cache_id) {
  const CacheEntry* e = core.caches().find(cache_id);
  if (e == nullptr) return;
  if (e->registered) {
    throw_param_invalid(
        "cache", "cache " + std::to_string(cache_id) + " was registered; use unregister_cache");
  }
  free_entry(core, cache_id);
}

void remove_cache_key(DataDistCore& core, const CacheKey& key) {
  const auto found = core.caches().find_key(key);
  if (!found) return;
  CacheEntry* e = core.caches().find_any(found->first);
  // hixl cache_mgr/cache_manager.cc CacheManager::RemoveCacheKey: SUCCESS without removing
  // anything for a registered cache ("does not operate on registered cache").
  if (e->registered) return;
  e->row_keys[found->second].reset();
  if (!e->release_pending) return;
  for (const std::optional<CacheKey>& k : e->row_keys) {
    if (k) return;
  }
  free_entry(core, found->first);
}

}  // namespace kvsim::impl
