// CacheManager: the v2 cache API of LLMDataDist.cache_manager (spec §1, §3, §4).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "impl/cache_task.h"
#include "impl/data_dist_core.h"
#include "impl/layer_synchronizer.h"
#include "impl/transfer_cache.h"
#include "impl/types.h"
#include "impl/validation.h"

namespace kvsim::impl {

/// The v2 CacheManager. Every method raises RuntimeError after finalize (§2.3).
class CacheManager {
 public:
  explicit CacheManager(std::shared_ptr<DataDistCore> core) : core_(std::move(core)) {}

  /// register_cache(cache_desc, addrs, cache_keys=(), remote_accessible=None) (§4).
  CacheView register_cache(const CacheDesc& cache_desc, const std::vector<std::uint64_t>& addrs,
                           const std::vector<CacheKey>& cache_keys = {},
                           std::optional<bool> remote_accessible = std::nullopt);
  /// register_blocks_cache(cache_desc, addrs, blocks_cache_key=None, remote_accessible=None).
  CacheView register_blocks_cache(const CacheDesc& cache_desc,
                                  const std::vector<std::uint64_t>& addrs,
                                  std::optional<BlocksCacheKey> blocks_cache_key = std::nullopt,
                                  std::optional<bool> remote_accessible = std::nullopt);
  /// unregister_cache(cache_id) (§4).
  void unregister_cache(std::int64_t cache_id);
  /// Deprecated allocate_cache(cache_desc, cache_keys=()) on llm.MemPoolConfig (§4).
  CacheView allocate_cache(const CacheDesc& cache_desc,
                           const std::vector<CacheKey>& cache_keys = {});
  /// Deprecated deallocate_cache(cache) (§4).
  void deallocate_cache(const CacheView& cache);
  /// Deprecated allocate_blocks_cache(cache_desc, blocks_cache_key=None) (§4).
  CacheView allocate_blocks_cache(const CacheDesc& cache_desc,
                                  std::optional<BlocksCacheKey> blocks_cache_key = std::nullopt);
  /// Deprecated deallocate_blocks_cache(cache) (§4).
  void deallocate_blocks_cache(const CacheView& cache);
  /// Deprecated remove_cache_key(cache_key) (§4).
  void remove_cache_key(const CacheKey& cache_key);

  /// pull_cache(cache_key, cache, batch_index=0, size=-1, **layer kwargs) (§4).
  void pull_cache(const PullCacheKey& cache_key, const CacheView& cache,
                  std::int64_t batch_index = 0, std::int64_t size = -1,
                  const LayerArgs& layers = {});
  /// pull_blocks(src_cache_key, dst_cache, src_blocks=(), dst_blocks=(), **layer kwargs) (§4).
  void pull_blocks(const PullBlocksKey& src_cache_key, const CacheView& dst_cache,
                   const std::vector<std::int64_t>& src_blocks = {},
                   const std::vector<std::int64_t>& dst_blocks = {}, const LayerArgs& layers = {});
  /// push_cache(dst_cache_key, src_cache, src_batch_index=0, src_layer_range=None,
  /// dst_layer_range=None, size=-1, tensor_num_per_layer=2) (§4).
  void push_cache(const CacheKeyByIdAndIndex& dst_cache_key, const CacheView& src_cache,
                  std::int64_t src_batch_index = 0,
                  std::optional<LayerRange> src_layer_range = std::nullopt,
                  std::optional<LayerRange> dst_layer_range = std::nullopt, std::int64_t size = -1,
                  std::int64_t tensor_num_per_layer = kTensorsPerLayer);
  /// push_blocks(dst_cache_key, src_cache, src_blocks=(), dst_blocks=(), src_layer_range=None,
  /// dst_layer_range=None, tensor_num_per_layer=2) (§4).
  void push_blocks(const BlocksCacheKey& dst_cache_key, const CacheView& src_cache,
                   const std::vector<std::int64_t>& src_blocks = {},
                   const std::vector<std::int64_t>& dst_blocks = {},
                   std::optional<LayerRange> src_layer_range = std::nullopt,
                   std::optional<LayerRange> dst_layer_range = std::nullopt,
                   std::int64_t tensor_num_per_layer = kTensorsPerLayer);
  /// transfer_cache_async(src_cache, layer_synchronizer, transfer_configs, src_block_indices,
  /// dst_block_indices, dst_block_memory_size) (§3); see start_transfer_cache.
  CacheTask transfer_cache_async(const CacheView& src_cache,
                                 std::shared_ptr<LayerSynchronizer> layer_synchronizer,
                                 std::vector<AnyTransferConfig>& transfer_configs,
                                 const TransferBlockArgs& blocks = {});
  /// Deprecated copy_cache(dst, src, dst_batch_index=0, src_batch_index=0, offset=0, size=-1)
  /// (§4; the req_id argument is not modelled).
  void copy_cache(const CacheView& dst, const CacheView& src, std::int64_t dst_batch_index = 0,
                  std::int64_t src_batch_index = 0, std::int64_t offset = 0,
                  std::int64_t size = -1);
  /// Deprecated copy_blocks(cache, {src: [dsts]}) (§4).
  void copy_blocks(const CacheView& cache,
                   const std::map<std::int64_t, std::vector<std::int64_t>>& copy_block_info);
  /// Deprecated swap_blocks(src, dst, {src: dst}) (§4).
  void swap_blocks(const CacheView& src, const CacheView& dst,
                   const std::map<std::int64_t, std::int64_t>& src_to_dst);

 private:
  DataDistCore& live(const char* api) const;

  std::shared_ptr<DataDistCore> core_;
};

}  // namespace kvsim::impl
