#include "impl/kv_cache_manager.h"

#include "impl/cache_store.h"
#include "impl/local_copy.h"
#include "impl/pull_push.h"

namespace kvsim::impl {

DataDistCore& KvCacheManager::live(const char* api) const {
  check_initialized(core_->initialized(), std::string("KvCacheManager.") + api);
  return *core_;
}

namespace {

// hicann/ge api/python/llm_datadist_v1/kv_cache_manager.py, KvCacheManager._check_role (and
// dflow/llm_datadist/v1/llm_datadist.cc: pulls need kDecoder).
void check_role(const DataDistCore& core, const char* api, LLMRole role) {
  if (core.role() != role) {
    throw_param_invalid(api, std::string("[") + api + "] is not supported by " +
                                 std::string(to_string(core.role())));
  }
}

}  // namespace

KvCache KvCacheManager::allocate_cache(const CacheDesc& cache_desc,
                                       const std::vector<CacheKey>& cache_keys) {
  DataDistCore& core = live("allocate_cache");
  if (core.role() != LLMRole::PROMPT && !cache_keys.empty()) {
    throw_param_invalid("cache_keys", std::string("cache_keys is not supported by ") +
                                          std::string(to_string(core.role())));
  }
  return KvCache(impl::allocate_cache(core, cache_desc, false, cache_keys, std::nullopt));
}

void KvCacheManager::deallocate_cache(const KvCache& kv_cache) {
  impl::deallocate_cache(live("deallocate_cache"), kv_cache.cache_id());
}

KvCache KvCacheManager::allocate_blocks_cache(const CacheDesc& cache_desc,
                                              std::optional<BlocksCacheKey> blocks_cache_key) {
  DataDistCore& core = live("allocate_blocks_cache");
  if (core.role() == LLMRole::DECODER && blocks_cache_key) {
    throw_param_invalid("blocks_cache_key", "blocks_cache_key is not supported by DECODER");
  }
  return KvCache(impl::allocate_cache(core, cache_desc, true, {}, blocks_cache_key));
}

void KvCacheManager::deallocate_blocks_cache(const KvCache& kv_cache) {
  impl::deallocate_blocks_cache(live("deallocate_blocks_cache"), kv_cache.cache_id());
}

void KvCacheManager::remove_cache_key(const CacheKey& cache_key) {
  DataDistCore& core = live("remove_cache_key");
  check_role(core, "remove_cache_key", LLMRole::PROMPT);
  impl::remove_cache_key(core, cache_key);
}

void KvCacheManager::pull_cache(const PullCacheKey& cache_key, const KvCache& kv_cache,
                                std::int64_t batch_index, std::int64_t size,
                                const LayerArgs& layers) {
  DataDistCore& core = live("pull_cache");
  check_role(core, "pull_cache", LLMRole::DECODER);
  PullCacheArgs args;
  args.cache_key = cache_key;
  args.cache = &kv_cache.view();
  args.batch_index = batch_index;
  args.size = size;
  args.layers = layers;
  impl::pull_cache(core, args);
}

void KvCacheManager::pull_blocks(const PullBlocksKey& src_cache_key, const KvCache& kv_cache,
                                 const std::vector<std::int64_t>& src_blocks,
                                 const std::vector<std::int64_t>& dst_blocks,
                                 const LayerArgs& layers) {
  DataDistCore& core = live("pull_blocks");
  check_role(core, "pull_blocks", LLMRole::DECODER);
  PullBlocksArgs args;
  args.src_cache_key = src_cache_key;
  args.dst_cache = &kv_cache.view();
  args.src_blocks = src_blocks;
  args.dst_blocks = dst_blocks;
  args.layers = layers;
  impl::pull_blocks(core, args);
}

CacheTask KvCacheManager::transfer_cache_async(
    const KvCache& src_cache, std::shared_ptr<LayerSynchronizer> layer_synchronizer,
    std::vector<AnyTransferConfig>& transfer_configs, const TransferBlockArgs& blocks) {
  live("transfer_cache_async");
  return start_transfer_cache(core_, src_cache.view(), std::move(layer_synchronizer),
                              transfer_configs, blocks);
}

void KvCacheManager::copy_cache(const KvCache& dst, const KvCache& src,
                                std::int64_t dst_batch_index, std::int64_t src_batch_index,
                                std::int64_t offset, std::int64_t size) {
  impl::copy_cache(live("copy_cache"), dst.view(), src.view(), dst_batch_index, src_batch_index,
                   offset, size);
}

void KvCacheManager::swap_blocks(const KvCache& src, const KvCache& dst,
                                 const std::map<std::int64_t, std::int64_t>& src_to_dst) {
  impl::swap_blocks(live("swap_blocks"), src.view(), dst.view(), src_to_dst);
}

}  // namespace kvsim::impl
