// The transfers of the official-sample pairs, written once as data so that the side that moves
// the bytes and the side that checks them agree: the decoder's pulls from the prompt and the
// prompt's pushes to the decoder, each the official sample's calls plus two layer-ranged calls
// that map one layer onto another.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "common.h"
#include "sample_cache.h"

namespace example {

// One PullKvBlocks/PushKvBlocks (blocks) or PullKvCache/PushKvCache (one batch row) call.
struct TransferStep {
  bool blocks;  // false: one batch, src_rows[0] -> dst_rows[0]
  std::vector<uint64_t> src_rows;
  std::vector<uint64_t> dst_rows;
  std::pair<int32_t, int32_t> src_layers;  // inclusive; {-1, -1}: every tensor
  std::pair<int32_t, int32_t> dst_layers;
  uint8_t tensors_per_layer;
};

// decoder_pull_cache_and_blocks: blocks 1-3 and batch 0 of every tensor; then layer 0 (tensors
// 0-1) block 5 into layer 1 (tensors 2-3) block 6, and layer 1 batch 7 into layer 0 batch 4.
inline std::vector<TransferStep> PullSteps() {
  return {
      {true, {1, 2, 3}, {1, 2, 3}, {-1, -1}, {-1, -1}, 2},
      {false, {0}, {0}, {-1, -1}, {-1, -1}, 2},
      {true, {5}, {6}, {0, 0}, {1, 1}, 2},
      {false, {7}, {4}, {1, 1}, {0, 0}, 2},
  };
}

// prompt_push_cache_and_blocks: blocks 5-7 pushed tensor by tensor (one tensor per layer), batch
// 4 as one 4-tensor layer; then layer 1 (tensors 2-3) batch 0 into layer 0 batch 2.
inline std::vector<TransferStep> PushSteps() {
  std::vector<TransferStep> steps;
  for (int32_t t = 0; t < static_cast<int32_t>(kSampleTensors); ++t) {
    steps.push_back({true, {5, 6, 7}, {5, 6, 7}, {t, t}, {t, t}, 1});
  }
  steps.push_back({false, {4}, {4}, {0, 0}, {0, 0}, 4});
  steps.push_back({false, {0}, {2}, {1, 1}, {0, 0}, 2});
  return steps;
}

inline KvCacheExtParam ExtParamOf(const TransferStep& step) {
  KvCacheExtParam ext{};
  ext.src_layer_range = step.src_layers;
  ext.dst_layer_range = step.dst_layers;
  ext.tensor_num_per_layer = step.tensors_per_layer;
  return ext;
}

inline CacheIndex RemoteIndex(uint64_t cluster_id, int64_t cache_id, uint32_t batch_index) {
  CacheIndex index{};
  index.cluster_id = cluster_id;
  index.cache_id = cache_id;
  index.batch_index = batch_index;
  return index;
}

inline void PrintStep(const char* call, const TransferStep& step) {
  std::printf("[INFO] %s rows", call);
  for (size_t i = 0; i < step.src_rows.size(); ++i) {
    std::printf(" %llu->%llu", static_cast<unsigned long long>(step.src_rows[i]),
                static_cast<unsigned long long>(step.dst_rows[i]));
  }
  std::printf(", layers (%d,%d)->(%d,%d), tensor_num_per_layer %u\n", step.src_layers.first,
              step.src_layers.second, step.dst_layers.first, step.dst_layers.second,
              static_cast<unsigned>(step.tensors_per_layer));
}

// Runs `steps` as pulls from (remote_cluster, remote_cache_id) into local cache `local_cache_id`.
inline bool RunPulls(LlmDataDist& dist, const std::vector<TransferStep>& steps,
                     uint64_t remote_cluster, int64_t remote_cache_id, int64_t local_cache_id) {
  Cache local{};
  local.cache_id = local_cache_id;
  for (const TransferStep& step : steps) {
    const KvCacheExtParam ext = ExtParamOf(step);
    if (step.blocks) {
      PrintStep("PullKvBlocks", step);
      EXAMPLE_CHECK(LlmOk(dist.PullKvBlocks(RemoteIndex(remote_cluster, remote_cache_id, 0), local,
                                            step.src_rows, step.dst_rows, ext),
                          "PullKvBlocks"));
    } else {
      PrintStep("PullKvCache", step);
      const auto src_batch = static_cast<uint32_t>(step.src_rows[0]);
      const auto dst_batch = static_cast<uint32_t>(step.dst_rows[0]);
      EXAMPLE_CHECK(LlmOk(dist.PullKvCache(RemoteIndex(remote_cluster, remote_cache_id, src_batch),
                                           local, dst_batch, -1, ext),
                          "PullKvCache"));
    }
  }
  return true;
}

// Runs `steps` as pushes from local cache `local_cache_id` to (remote_cluster, remote_cache_id).
// Like the official sample, the Cache handed over carries only the id.
inline bool RunPushes(LlmDataDist& dist, const std::vector<TransferStep>& steps,
                      int64_t local_cache_id, uint64_t remote_cluster, int64_t remote_cache_id) {
  Cache local{};
  local.cache_id = local_cache_id;
  for (const TransferStep& step : steps) {
    const KvCacheExtParam ext = ExtParamOf(step);
    if (step.blocks) {
      PrintStep("PushKvBlocks", step);
      EXAMPLE_CHECK(LlmOk(dist.PushKvBlocks(local, RemoteIndex(remote_cluster, remote_cache_id, 0),
                                            step.src_rows, step.dst_rows, ext),
                          "PushKvBlocks"));
    } else {
      PrintStep("PushKvCache", step);
      const auto src_batch = static_cast<uint32_t>(step.src_rows[0]);
      const auto dst_batch = static_cast<uint32_t>(step.dst_rows[0]);
      EXAMPLE_CHECK(
          LlmOk(dist.PushKvCache(local, RemoteIndex(remote_cluster, remote_cache_id, dst_batch),
                                 src_batch, -1, ext),
                "PushKvCache"));
    }
  }
  return true;
}

// Records in `expected` what `steps` leave in the destination when the source holds `src_seed`'s
// pattern: layer L is tensors [L * tensors_per_layer, (L + 1) * tensors_per_layer), and the i-th
// source tensor of the range lands in the i-th destination tensor.
inline void ExpectTransfers(const std::vector<TransferStep>& steps, uint32_t src_seed,
                            uint32_t num_tensors, ExpectedContent& expected) {
  const auto tensors_of = [num_tensors](std::pair<int32_t, int32_t> layers, uint8_t per_layer) {
    std::vector<uint32_t> out;
    if (layers.first < 0) {
      for (uint32_t t = 0; t < num_tensors; ++t) out.push_back(t);
      return out;
    }
    for (int32_t t = layers.first * per_layer; t < (layers.second + 1) * per_layer; ++t) {
      out.push_back(static_cast<uint32_t>(t));
    }
    return out;
  };
  for (const TransferStep& step : steps) {
    const std::vector<uint32_t> src = tensors_of(step.src_layers, step.tensors_per_layer);
    const std::vector<uint32_t> dst =
        step.dst_layers.first < 0 ? src : tensors_of(step.dst_layers, step.tensors_per_layer);
    for (size_t i = 0; i < src.size() && i < dst.size(); ++i) {
      for (size_t r = 0; r < step.src_rows.size(); ++r) {
        expected.Transfer(dst[i], static_cast<uint32_t>(step.dst_rows[r]), src_seed, src[i],
                          static_cast<uint32_t>(step.src_rows[r]));
      }
    }
  }
}

}  // namespace example
