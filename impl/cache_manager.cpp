#include "impl/cache_manager.h"

#include "impl/cache_store.h"
#include "impl/local_copy.h"
#include "impl/pull_push.h"

namespace kvsim::impl {

DataDistCore& CacheManager::live(const char* api) const {
  check_initialized(core_->initialized(), std::string("CacheManager.") + api);
  return *core_;
}

CacheView CacheManager::register_cache(const CacheDesc& cache_desc,
                                       const std::vector<std::uint64_t>& addrs,
                                       const std::vector<CacheKey>& cache_keys,
                                       std::optional<bool> remote_accessible) {
  RegisterRequest r;
  r.cache_desc = &cache_desc;
  r.addrs = addrs;
  r.remote_accessible = remote_accessible;
  r.cache_keys = cache_keys;
  return impl::register_cache(live("register_cache"), r);
}

CacheView CacheManager::register_blocks_cache(const CacheDesc& cache_desc,
                                              const std::vector<std::uint64_t>& addrs,
                                              std::optional<BlocksCacheKey> blocks_cache_key,
                                              std::optional<bool> remote_accessible) {
  RegisterRequest r;
  r.cache_desc = &cache_desc;
  r.addrs = addrs;
  r.remote_accessible = remote_accessible;
  r.is_blocks_cache = true;
  r.blocks_key = blocks_cache_key;
  return impl::register_cache(live("register_blocks_cache"), r);
}

void CacheManager::unregister_cache(std::int64_t cache_id) {
  impl::unregister_cache(live("unregister_cache"), cache_id);
}

CacheView CacheManager::allocate_cache(const CacheDesc& cache_desc,
                                       const std::vector<CacheKey>& cache_keys) {
  return impl::allocate_cache(live("allocate_cache"), cache_desc, false, cache_keys, std::nullopt);
}

void CacheManager::deallocate_cache(const CacheView& cache) {
  impl::deallocate_cache(live("deallocate_cache"), cache.cache_id);
}

CacheView CacheManager::allocate_blocks_cache(const CacheDesc& cache_desc,
                                              std::optional<BlocksCacheKey> blocks_cache_key) {
  return impl::allocate_cache(live("allocate_blocks_cache"), cache_desc, true, {},
                              blocks_cache_key);
}

void CacheManager::deallocate_blocks_cache(const CacheView& cache) {
  impl::deallocate_blocks_cache(live("deallocate_blocks_cache"), cache.cache_id);
}

void CacheManager::remove_cache_key(const CacheKey& cache_key) {
  impl::remove_cache_key(live("remove_cache_key"), cache_key);
}

void CacheManager::pull_cache(const PullCacheKey& cache_key, const CacheView& cache,
                              std::int64_t batch_index, std::int64_t size,
                              const LayerArgs& layers) {
  PullCacheArgs args;
  args.cache_key = cache_key;
  args.cache = &cache;
  args.batch_index = batch_index;
  args.size = size;
  args.layers = layers;
  impl::pull_cache(live("pull_cache"), args);
}

void CacheManager::pull_blocks(const PullBlocksKey& src_cache_key, const CacheView& dst_cache,
                               const std::vector<std::int64_t>& src_blocks,
                               const std::vector<std::int64_t>& dst_blocks,
                               const LayerArgs& layers) {
  PullBlocksArgs args;
  args.src_cache_key = src_cache_key;
  args.dst_cache = &dst_cache;
  args.src_blocks = src_blocks;
  args.dst_blocks = dst_blocks;
  args.layers = layers;
  impl::pull_blocks(live("pull_blocks"), args);
}

void CacheManager::push_cache(const CacheKeyByIdAndIndex& dst_cache_key, const CacheView& src_cache,
                              std::int64_t src_batch_index,
                              std::optional<LayerRange> src_layer_range,
                              std::optional<LayerRange> dst_layer_range, std::int64_t size,
                              std::int64_t tensor_num_per_layer) {
  PushCacheArgs args;
  args.dst_cache_key = dst_cache_key;
  args.src_cache = &src_cache;
  args.src_batch_index = src_batch_index;
  args.src_layer_range = src_layer_range;
  args.dst_layer_range = dst_layer_range;
  args.size = size;
  args.tensor_num_per_layer = tensor_num_per_layer;
  impl::push_cache(live("push_cache"), args);
}

void CacheManager::push_blocks(const BlocksCacheKey& dst_cache_key, const CacheView& src_cache,
                               const std::vector<std::int64_t>& src_blocks,
                               const std::vector<std::int64_t>& dst_blocks,
                               std::optional<LayerRange> src_layer_range,
                               std::optional<LayerRange> dst_layer_range,
                               std::int64_t tensor_num_per_layer) {
  PushBlocksArgs args;
  args.dst_cache_key = dst_cache_key;
  args.src_cache = &src_cache;
  args.src_blocks = src_blocks;
  args.dst_blocks = dst_blocks;
  args.src_layer_range = src_layer_range;
  args.dst_layer_range = dst_layer_range;
  args.tensor_num_per_layer = tensor_num_per_layer;
  impl::push_blocks(live("push_blocks"), args);
}

CacheTask CacheManager::transfer_cache_async(const CacheView& src_cache,
                                             std::shared_ptr<LayerSynchronizer> layer_synchronizer,
                                             std::vector<AnyTransferConfig>& transfer_configs,
                                             const TransferBlockArgs& blocks) {
  live("transfer_cache_async");
  return start_transfer_cache(core_, src_cache, std::move(layer_synchronizer), transfer_configs,
                              blocks);
}

void CacheManager::copy_cache(const CacheView& dst, const CacheView& src,
                              std::int64_t dst_batch_index, std::int64_t src_batch_index,
                              std::int64_t offset, std::int64_t size) {
  impl::copy_cache(live("copy_cache"), dst, src, dst_batch_index, src_batch_index, offset, size);
}

void CacheManager::copy_blocks(const CacheView& cache,
                               const std::map<std::int64_t, std::vector<std::int64_t>>& info) {
  impl::copy_blocks(live("copy_blocks"), cache, info);
}

void CacheManager::swap_blocks(const CacheView& src, const CacheView& dst,
                               const std::map<std::int64_t, std::int64_t>& src_to_dst) {
  impl::swap_blocks(live("swap_blocks"), src, dst, src_to_dst);
}

}  // namespace kvsim::impl
