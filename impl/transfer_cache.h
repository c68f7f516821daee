// transfer_cache_async's synchronous part (spec §3.1) shared by the v1 and v2 managers: validation,
// the call-time diagnostics, and the start of the job.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "impl/cache_task.h"
#include "impl/data_dist_core.h"
#include "impl/layer_synchronizer.h"
#include "impl/types.h"

namespace kvsim::impl {

/// Block arguments of transfer_cache_async (§3).
struct TransferBlockArgs {
  std::optional<std::vector<std::int64_t>> src_block_indices{};
  std::optional<std::vector<std::int64_t>> dst_block_indices{};
  std::optional<std::int64_t> dst_block_memory_size{};
};

/// Validates (§3.1, raising as the library does), records the call-time diagnostics, then starts
/// the job and returns its task. Faithful mode sets a None src_layer_range in the caller's
/// config in place (kSrcLayerRangeMutated). Diagnostics at the call, each an error in strict
/// mode (raised before anything changes, the caller's configs included): kSrcLayerRangeMutated,
/// kResultAliased (two configs with one dst_cluster_id), kKeyConfigLayerIndex (a
/// TransferWithCacheKeyConfig whose src_layer_range does not start at 0), kConcurrentTransfer
/// (another task of this process in flight; §3.5 forbids it in v1, v2 interleaves the layers),
/// kLinkCallOverlap (v1: a pull in progress on a target link). The src cache is not looked up
/// here: an unknown one fails each config at its first layer with LLM_KV_CACHE_NOT_EXIST (§3.4).
CacheTask start_transfer_cache(const std::shared_ptr<DataDistCore>& core,
                               const CacheView& src_cache,
                               std::shared_ptr<LayerSynchronizer> layer_synchronizer,
                               std::vector<AnyTransferConfig>& transfer_configs,
                               const TransferBlockArgs& blocks);

}  // namespace kvsim::impl
