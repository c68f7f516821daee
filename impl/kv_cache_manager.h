// KvCacheManager: the v1 cache API of LLMDataDist.kv_cache_manager (spec §1, §3.5), thin over the
// code the v2 CacheManager uses. v1 differences: KvCache with per_device_tensor_addrs; no
// register_* (caches come from the pool); transfer_cache_async needs role PROMPT, rejects
// contiguous → blocks, and its wait timeout is LLM_WAIT_PROCESS_TIMEOUT; overlaps with pulls on a
// link and concurrent transfer_cache_async calls are diagnosed (§3.5).
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

/// A v1 cache (§2.2): as Cache, with the addresses per device (one device here).
class KvCache {
 public:
  explicit KvCache(CacheView view) : view_(std::move(view)) {}
  std::int64_t cache_id() const { return view_.cache_id; }
  const CacheDesc& cache_desc() const { return view_.desc; }
  /// [[addresses of the one device]].
  std::vector<std::vector<std::uint64_t>> per_device_tensor_addrs() const {
    return {view_.tensor_addrs};
  }
  bool is_blocks_cache() const { return view_.is_blocks_cache; }
  /// The cache as the shared code sees it.
  const CacheView& view() const { return view_; }

 private:
  CacheView view_;
};

/// The v1 KvCacheManager. Every method raises RuntimeError after finalize (§2.3).
class KvCacheManager {
 public:
  explicit KvCacheManager(std::shared_ptr<DataDistCore> core) : core_(std::move(core)) {}

  /// allocate_cache(cache_desc, cache_keys=()) on llm.MemPoolConfig (§4).
  KvCache allocate_cache(const CacheDesc& cache_desc, const std::vector<CacheKey>& cache_keys = {});
  /// deallocate_cache(kv_cache): deferred while keys remain (§4).
  void deallocate_cache(const KvCache& kv_cache);
  /// allocate_blocks_cache(cache_desc, blocks_cache_key=None) (§4).
  KvCache allocate_blocks_cache(const CacheDesc& cache_desc,
                                std::optional<BlocksCacheKey> blocks_cache_key = std::nullopt);
  /// deallocate_blocks_cache(kv_cache) (§4).
  void deallocate_blocks_cache(const KvCache& kv_cache);
  /// remove_cache_key(cache_key) (§4).
  void remove_cache_key(const CacheKey& cache_key);
  /// pull_cache(cache_key, kv_cache, batch_index=0, size=-1, **layer kwargs) (§4).
  void pull_cache(const PullCacheKey& cache_key, const KvCache& kv_cache,
                  std::int64_t batch_index = 0, std::int64_t size = -1,
                  const LayerArgs& layers = {});
  /// pull_blocks(src_cache_key, kv_cache, src_blocks=(), dst_blocks=(), **layer kwargs) (§4).
  void pull_blocks(const PullBlocksKey& src_cache_key, const KvCache& kv_cache,
                   const std::vector<std::int64_t>& src_blocks = {},
                   const std::vector<std::int64_t>& dst_blocks = {}, const LayerArgs& layers = {});
  /// transfer_cache_async (§3, v1 rules of §3.1 and §3.5).
  CacheTask transfer_cache_async(const KvCache& src_cache,
                                 std::shared_ptr<LayerSynchronizer> layer_synchronizer,
                                 std::vector<AnyTransferConfig>& transfer_configs,
                                 const TransferBlockArgs& blocks = {});
  /// copy_cache(dst, src, dst_batch_index=0, src_batch_index=0, offset=0, size=-1) (§4).
  void copy_cache(const KvCache& dst, const KvCache& src, std::int64_t dst_batch_index = 0,
                  std::int64_t src_batch_index = 0, std::int64_t offset = 0,
                  std::int64_t size = -1);
  /// swap_blocks(src, dst, {src: dst}) (§4).
  void swap_blocks(const KvCache& src, const KvCache& dst,
                   const std::map<std::int64_t, std::int64_t>& src_to_dst);

 private:
  DataDistCore& live(const char* api) const;

  std::shared_ptr<DataDistCore> core_;
};

}  // namespace kvsim::impl
