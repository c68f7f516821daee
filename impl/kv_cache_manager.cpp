#include "impl/kv_cache_manager.h"

#include "impl/cache_store.h"
#include "impl/local_copy.h"
#include "impl/pull_push.h"

namespace kvsim::impl {

DataDistCore& KvCacheManager::live(const char* api) const {
  check_initialized(core_->initialized(), std::string("KvCacheManager.") + api);
  return *core_;
}

KvCache KvCacheManager::allocate_cache(const CacheDesc& cache_desc,
                                       const std::vector<CacheKey>& cache_keys) {
  return KvCache(
      impl::allocate_cache(live("allocate_cache"), cache_desc, false, cache_keys, std::nullopt));
}

void KvCacheManager::deallocate_cache(const KvCache& kv_cache) {
  impl::deallocate_cache(live("deallocate_cache"), kv_cache.cache_id());
}

KvCache KvCacheManager::allocate_blocks_cache(const CacheDesc& cache_desc,
                                              std::optional<BlocksCacheKey> blocks_cache_key) {
  return KvCache(
      impl::allocate_cache(live("allocate_blocks_cache"), cache_desc, true, {}, blocks_cache_key));
}

void KvCacheManager::deallocate_blocks_cache(const KvCache& kv_cache) {
  impl::deallocate_blocks_cache(live("deallocate_blocks_cache"), kv_cache.cache_id());
}

void KvCacheManager::remove_cache_key(const CacheKey& cache_key) {
  impl::remove_cache_key(live("remove_cache_key"), cache_key);
}

void KvCacheManager::pull_cache(const PullCacheKey& cache_key, const KvCache& kv_cache,
                                std::int64_t batch_index, std::int64_t size,
                                const LayerArgs& layers) {
  PullCacheArgs args;
  args.cache_key = cache_key;
  args.cache = &kv_cache.view();
  args.batch_index = batch_index;
  args.size = size;
  args.layers = layers;
  impl::pull_cache(live("pull_cache"), args);
}

void KvCacheManager::pull_blocks(const PullBlocksKey& src_cache_key, const KvCache& kv_cache,
                                 const std::vector<std::int64_t>& src_blocks,
                                 const std::vector<std::int64_t>& dst_blocks,
                                 const LayerArgs& layers) {
  PullBlocksArgs args;
  args.src_cache_key = src_cache_key;
  args.dst_cache = &kv_cache.view();
  args.src_blocks = src_blocks;
  args.dst_blocks = dst_blocks;
  args.layers = layers;
  impl::pull_blocks(live("pull_blocks"), args);
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
