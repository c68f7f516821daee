// The deprecated local copies of spec §4: copy_cache, copy_blocks, swap_blocks. They run on this
// process's device without a time limit.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "impl/data_dist_core.h"

namespace kvsim::impl {

/// copy_cache(dst, src, dst_batch_index, src_batch_index, offset, size): per tensor,
/// `size` bytes (-1: the row from `offset`) from src row + offset to dst row + offset. Both caches
/// known (LLM_KV_CACHE_NOT_EXIST), neither a blocks cache, equal num_tensors/shape/data type,
/// rows in range, offset + size within a row (LLM_PARAM_INVALID); ValueError for indices that
/// are not uint32 / offset not uint64. A failed copy raises LLM_FAILED (C++
/// LLM_COPY_CACHE_FAILED through code_2_status).
void copy_cache(DataDistCore& core, const CacheView& dst, const CacheView& src,
                std::int64_t dst_batch_index, std::int64_t src_batch_index, std::int64_t offset,
                std::int64_t size);

/// copy_blocks(cache, {src: [dsts]}): a blocks cache only; each block index in range.
void copy_blocks(DataDistCore& core, const CacheView& cache,
                 const std::map<std::int64_t, std::vector<std::int64_t>>& copy_block_info);

/// swap_blocks(src, dst, {src: dst}): both blocks caches with equal block size and num_tensors,
/// one HOST and one DEVICE (§4). The staging threads and buffer of the real swap are not
/// modelled: the copies go straight between host and device.
void swap_blocks(DataDistCore& core, const CacheView& src, const CacheView& dst,
                 const std::map<std::int64_t, std::int64_t>& src_to_dst);

}  // namespace kvsim::impl
