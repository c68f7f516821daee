#include "sim/serving/block_pool.h"

#include <algorithm>
#include <random>
#include <stdexcept>

namespace kvsim::sim::serving {

BlockPool::BlockPool(std::int64_t blocks, BlockOrder order)
    : capacity_(blocks), order_(order), free_(blocks) {
  if (blocks < 0) throw std::invalid_argument("BlockPool: blocks must be >= 0");
  taken_.assign(static_cast<std::size_t>(blocks), false);
  if (order_ == BlockOrder::kVllm) {
    for (std::int64_t i = 1; i < blocks; ++i) queue_.push_back(i);
    if (blocks > 0) {  // the null block, never handed out
      taken_[0] = true;
      free_ = blocks - 1;
    }
    return;
  }
  tree_.assign(static_cast<std::size_t>(blocks) + 1, 0);
  // Every id free: node i covers (i - lowbit(i), i].
  for (std::int64_t i = 1; i <= blocks; ++i) tree_[static_cast<std::size_t>(i)] = i & -i;
  while (top_bit_ * 2 <= blocks) top_bit_ *= 2;
}

void BlockPool::add(std::int64_t id, std::int64_t delta) {
  for (std::int64_t i = id + 1; i <= capacity_; i += i & -i)
    tree_[static_cast<std::size_t>(i)] += delta;
}

std::int64_t BlockPool::kth_free(std::int64_t k) const {
  std::int64_t pos = 0;
  for (std::int64_t step = top_bit_; step > 0; step /= 2) {
    const std::int64_t next = pos + step;
    if (next <= capacity_ && tree_[static_cast<std::size_t>(next)] <= k) {
      pos = next;
      k -= tree_[static_cast<std::size_t>(next)];
    }
  }
  return pos;  // 1-based position pos + 1, i.e. id pos
}

std::optional<std::vector<std::int64_t>> BlockPool::allocate(std::uint64_t n, std::uint64_t seed) {
  if (n > static_cast<std::uint64_t>(free_)) return std::nullopt;
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(n));
  if (order_ == BlockOrder::kVllm) {
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::int64_t id = queue_.front();
      queue_.pop_front();
      taken_[static_cast<std::size_t>(id)] = true;
      out.push_back(id);
    }
    free_ -= static_cast<std::int64_t>(n);
    return out;
  }
  std::mt19937_64 rng(seed);
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::int64_t k =
        order_ == BlockOrder::kSequential
            ? 0
            : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(free_));
    const std::int64_t id = kth_free(k);
    add(id, -1);
    taken_[static_cast<std::size_t>(id)] = true;
    --free_;
    out.push_back(id);
  }
  return out;
}

void BlockPool::release(const std::vector<std::int64_t>& ids) {
  // All or nothing: a bad or repeated id leaves the pool as it was.
  const auto handed_out = [&](std::int64_t id) {
    return id >= 0 && id < capacity_ && taken_[static_cast<std::size_t>(id)] &&
           !(order_ == BlockOrder::kVllm && id == 0);  // the null block is never handed out
  };
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (!handed_out(ids[i])) {
      for (std::size_t j = 0; j < i; ++j) taken_[static_cast<std::size_t>(ids[j])] = true;
      throw std::logic_error("BlockPool: block " + std::to_string(ids[i]) + " is not handed out");
    }
    taken_[static_cast<std::size_t>(ids[i])] = false;
  }
  free_ += static_cast<std::int64_t>(ids.size());
  if (order_ == BlockOrder::kVllm) {
    // reversed(blocks) appended at the tail: the last block of the table is reused first.
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) queue_.push_back(*it);
    return;
  }
  for (const std::int64_t id : ids) add(id, 1);
}

std::vector<std::size_t> by_destination(const std::vector<std::int64_t>& table) {
  std::vector<std::size_t> order(table.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&table](std::size_t a, std::size_t b) { return table[a] < table[b]; });
  return order;
}

}  // namespace kvsim::sim::serving
