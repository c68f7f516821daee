// Byte geometry of one layer of a layer-wise transfer (spec §3.4): the copy descriptors that
// C2C, C2B and B2B produce, and the checks the C++ library runs per layer.
//
// Errors: every per-layer check throws LLMException carrying the status the C++ library
// returns (LLM_PARAM_INVALID for all of them). A transfer job catches it and records
// status_code() as that config's result, as the real per-layer call returns it (§3.2).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "impl/types.h"

namespace kvsim::impl {

/// One one-sided put: `length` bytes from `src_addr` (local) to `dst_addr` (remote).
struct CopyDescriptor {
  std::uint64_t src_addr = 0;
  std::uint64_t dst_addr = 0;
  std::uint64_t length = 0;
  friend bool operator==(const CopyDescriptor& a, const CopyDescriptor& b) {
    return a.src_addr == b.src_addr && a.dst_addr == b.dst_addr && a.length == b.length;
  }
};

/// The three copy modes of §3.4.
enum class CopyMode {
  kC2C,  ///< contiguous → contiguous: dst_blocks empty.
  kC2B,  ///< contiguous → blocks: only dst_blocks set.
  kB2B,  ///< blocks → blocks: both set.
};

/// "C2C", "C2B", "B2B".
std::string_view to_string(CopyMode mode);

/// The mode the C++ library picks from the two block lists (§3.4, LayerWiseTransferJob::Prepare).
CopyMode copy_mode(const std::vector<std::uint64_t>& src_blocks,
                   const std::vector<std::uint64_t>& dst_blocks);

/// A cache as the C++ CacheEntry describes it (§3.4, cache_manager.cc CreateCacheEntry).
struct CacheGeometry {
  std::uint64_t tensor_size = 0;  ///< Bytes of one tensor.
  std::uint64_t batch_size = 1;   ///< Contiguous: shape[batch_dim_index]. PA: 1.
  std::uint64_t num_blocks = 0;   ///< PA: shape[0]. Contiguous: 0.
  std::uint64_t stride = 0;       ///< Bytes per batch row (contiguous) or per block (PA).
  std::vector<std::uint64_t> tensor_addrs{};
  bool remote_accessible = false;
};

/// The geometry of a cache from its description (§3.4). Contiguous: batch_size =
/// shape[batch_dim_index], stride = tensor_size / batch_size. PA: num_blocks = shape[0],
/// stride = tensor_size / num_blocks. MIX (C++ registrations): both, from shape[0].
CacheGeometry make_cache_geometry(const CacheView& cache);

/// What one per-layer call transfers (the C++ TransferCacheConfig + TransferBlockConfig).
struct LayerTransfer {
  std::uint64_t layer_index = 0;
  std::uint64_t tensor_num_per_layer = 2;
  std::vector<std::uint64_t> dst_addrs{};  ///< One per tensor of the layer: K then V.
  std::uint64_t src_batch_index = 0;
  std::vector<std::uint64_t> src_blocks{};
  std::vector<std::uint64_t> dst_blocks{};
  std::uint64_t dst_block_memory_size = 0;  ///< 0 stands for None.
};

/// A maximal run of block pairs where both indices step by +1.
struct BlockRun {
  std::uint64_t src_start = 0;
  std::uint64_t dst_start = 0;
  std::uint64_t length = 0;
};

/// Splits paired block lists into maximal +1/+1 runs, in list order (LLMUtils::
/// FindContiguousBlockIndexPair). LLMException(LLM_PARAM_INVALID) if the lengths differ.
std::vector<BlockRun> find_block_runs(const std::vector<std::uint64_t>& src_blocks,
                                      const std::vector<std::uint64_t>& dst_blocks);

/// True if writes to `blocks` of `block_bytes` (a write may be shorter, never longer or before its
/// block) in every tensor starting at `bases` touch no byte twice: the blocks are distinct and the
/// tensors' spans, from the lowest block to the end of the highest, do not overlap (a registration
/// may alias tensors). Lets a caller skip the per-batch overlap check.
bool distinct_blocks_in_disjoint_spans(const std::vector<std::uint64_t>& bases,
                                       std::uint64_t block_bytes,
                                       const std::vector<std::uint64_t>& blocks);

/// Whether plan_layer_copy's descriptors for `layer` (of a cache of `src`'s geometry) write
/// distinct bytes, by distinct_blocks_in_disjoint_spans; false for C2C (nothing to gain).
bool layer_destinations_disjoint(const CacheGeometry& src, const LayerTransfer& layer);

/// The descriptors of one layer, tensor by tensor (K then V), in the order the C++ library
/// posts them (§3.4). Checks, in the library's order: tensor_num_per_layer > 0,
/// layer_index < num_tensors / tpl, num_tensors % tpl == 0, one dst address per tensor; then
/// C2C: src_batch_index < batch_size; C2B: 0 < bms < tensor_size, src_batch_index < batch_size,
/// ceil(tensor_size / bms) >= len(dst_blocks); B2B: a PA source, equal list lengths, bms 0 or
/// equal to stride, every run's source blocks < num_blocks.
std::vector<CopyDescriptor> plan_layer_copy(const CacheGeometry& src, const LayerTransfer& layer);

/// Where a remote-accessible transfer writes (§3.4 last bullet).
struct RemoteLayerTarget {
  std::uint64_t dst_layer_index = 0;
  std::uint64_t dst_batch_index = 0;  ///< CacheKeyByIdAndIndex.batch_index; 0 for blocks.
  std::uint64_t tensor_num_per_layer = 2;
  std::vector<std::uint64_t> dst_blocks{};
  std::uint64_t dst_block_memory_size = 0;  ///< 0 stands for None.
};

/// The destination addresses of one layer in a remote cache, after the remote-accessible
/// checks: the local cache must be remote-accessible, then (ValidateRemoteCache) the remote
/// one too, dst_layer_index < remote layers, C2C: dst_batch_index < remote batch_size, else
/// max(dst_blocks) < remote num_blocks and bms in {0, remote stride}. Each address is
/// remote tensor + dst_batch_index * remote stride. LLMException(LLM_PARAM_INVALID).
std::vector<std::uint64_t> resolve_remote_dst_addrs(const CacheGeometry& local,
                                                    const CacheGeometry& remote,
                                                    const RemoteLayerTarget& target);

}  // namespace kvsim::impl
