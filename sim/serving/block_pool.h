// The free KV blocks of one instance: every rank of a tensor-parallel instance uses the same block
// table (as vLLM's block manager does), so one pool serves all of its ranks' caches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace kvsim::sim::serving {

/// Hands out block ids of a paged cache of `blocks` blocks and takes them back. A draw depends
/// only on the set of free ids and the seed, never on the order of earlier releases, so an empty
/// pool always draws what the single-request runner draws.
class BlockPool {
 public:
  /// `sequential`: the lowest free ids (a fresh or compacting allocator, where consecutive blocks
  /// merge into one copy run, spec 3.4 B2B); else a seeded random draw from the free ids (a
  /// fragmented cache).
  BlockPool(std::int64_t blocks, bool sequential);

  std::int64_t capacity() const { return capacity_; }
  std::int64_t free_blocks() const { return free_; }
  /// `n` blocks, or none if fewer are free. `seed` decides a scattered draw.
  std::optional<std::vector<std::int64_t>> allocate(std::uint64_t n, std::uint64_t seed);
  /// Returns blocks to the pool. Throws std::logic_error for an id that is not handed out.
  void release(const std::vector<std::int64_t>& ids);

 private:
  void add(std::int64_t id, std::int64_t delta);
  std::int64_t kth_free(std::int64_t k) const;  ///< the k-th smallest free id, from 0

  std::int64_t capacity_;
  bool sequential_;
  std::int64_t free_;
  std::vector<std::int64_t> tree_;  ///< Fenwick tree of free counts, 1-based
  std::vector<bool> taken_;
  std::int64_t top_bit_ = 1;
};

/// Positions 0..n-1 of a block table ordered by block id: checking blocks in address order lets
/// the content store find each block next to the last one instead of searching for it.
std::vector<std::size_t> by_destination(const std::vector<std::int64_t>& table);

}  // namespace kvsim::sim::serving
