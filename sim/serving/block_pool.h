// The free KV blocks of one instance: every rank of a tensor-parallel instance uses the same block
// table (as vLLM's block manager does), so one pool serves all of its ranks' caches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace kvsim::sim {

/// How a paged cache hands out block ids (scenario key cache.block_table). Consecutive ids merge
/// into one copy run per tensor (hixl LLMUtils::FindContiguousBlockIndexPair, spec 3.4 B2B), so
/// the order decides how many descriptors a transfer posts.
enum class BlockOrder {
  /// vLLM v1's free queue (vllm/v1/core/block_pool.py, BlockPool and FreeKVCacheBlockQueue):
  /// block 0 is the null block, a fresh engine hands out 1, 2, 3, ... from the head, and a
  /// finished request's blocks go back to the tail in reverse table order
  /// (SingleTypeKVCacheManager.free passes reversed(blocks) to BlockPool.free_blocks), so a
  /// long run fragments as the queue wraps. [I] Newer vLLM puts unhashed blocks at the head.
  kVllm,
  /// The lowest free ids: a compacting allocator, or SGLang's paged allocator, whose freed
  /// pages are sorted and reused first (mem_cache/allocator.py, PagedTokenToKVPoolAllocator).
  kSequential,
  /// A seeded random draw from the free ids: a fragmented cache, every block its own run
  /// (a stress option).
  kScattered,
};

}  // namespace kvsim::sim

namespace kvsim::sim::serving {

/// Hands out block ids of a paged cache of `blocks` blocks and takes them back, in `order`.
/// With kSequential and kScattered a draw depends only on the set of free ids and the seed;
/// with kVllm it depends on the order of earlier releases, as vLLM's does.
class BlockPool {
 public:
  BlockPool(std::int64_t blocks, BlockOrder order);

  std::int64_t capacity() const { return capacity_; }
  std::int64_t free_blocks() const { return free_; }
  /// `n` blocks, or none if fewer are free. `seed` decides a scattered draw.
  std::optional<std::vector<std::int64_t>> allocate(std::uint64_t n, std::uint64_t seed);
  /// Returns a request's blocks, in its table's order. Throws std::logic_error for an id that
  /// is not handed out.
  void release(const std::vector<std::int64_t>& ids);

 private:
  void add(std::int64_t id, std::int64_t delta);
  std::int64_t kth_free(std::int64_t k) const;  ///< the k-th smallest free id, from 0

  std::int64_t capacity_;
  BlockOrder order_;
  std::int64_t free_;
  std::deque<std::int64_t> queue_;  ///< kVllm: the free queue, head first
  std::vector<std::int64_t> tree_;  ///< Fenwick tree of free counts, 1-based
  std::vector<bool> taken_;
  std::int64_t top_bit_ = 1;
};

/// Positions 0..n-1 of a block table ordered by block id: checking blocks in address order lets
/// the content store find each block next to the last one instead of searching for it.
std::vector<std::size_t> by_destination(const std::vector<std::int64_t>& table);

}  // namespace kvsim::sim::serving
