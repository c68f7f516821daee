#include "impl/copy_geometry.h"

#include <algorithm>
#include <limits>
#include <string>

namespace kvsim::impl {

namespace {

std::string str(std::uint64_t v) {
  return std::to_string(v);
}

}  // namespace

std::string_view to_string(CopyMode mode) {
  switch (mode) {
    case CopyMode::kC2C:
      return "C2C";
    case CopyMode::kC2B:
      return "C2B";
    case CopyMode::kB2B:
      return "B2B";
  }
  return "?";
}

CopyMode copy_mode(const std::vector<std::uint64_t>& src_blocks,
                   const std::vector<std::uint64_t>& dst_blocks) {
  if (dst_blocks.empty()) return CopyMode::kC2C;
  return src_blocks.empty() ? CopyMode::kC2B : CopyMode::kB2B;
}

CacheGeometry make_cache_geometry(const CacheView& cache) {
  CacheGeometry g;
  g.tensor_size = cache.desc.size();
  g.tensor_addrs = cache.tensor_addrs;
  g.remote_accessible = cache.remote_accessible;
  if (cache.mix) {
    g.batch_size = static_cast<std::uint64_t>(cache.desc.shape().front());
    g.num_blocks = g.batch_size;
    g.stride = g.tensor_size / g.num_blocks;
  } else if (cache.is_blocks_cache) {
    g.batch_size = 1;
    g.num_blocks = static_cast<std::uint64_t>(cache.desc.shape().front());
    g.stride = g.tensor_size / g.num_blocks;
  } else {
    g.batch_size = static_cast<std::uint64_t>(cache.desc.batch_size());
    g.stride = g.tensor_size / g.batch_size;
  }
  return g;
}

std::vector<BlockRun> find_block_runs(const std::vector<std::uint64_t>& src_blocks,
                                      const std::vector<std::uint64_t>& dst_blocks) {
  if (src_blocks.size() != dst_blocks.size()) {
    throw_param_invalid("dst_block_indices", "length " + str(dst_blocks.size()) +
                                                 " differs from src_block_indices length " +
                                                 str(src_blocks.size()));
  }
  std::vector<BlockRun> runs;
  for (std::size_t i = 0; i < src_blocks.size(); ++i) {
    if (!runs.empty()) {
      BlockRun& last = runs.back();
      if (src_blocks[i] == src_blocks[i - 1] + 1 && dst_blocks[i] == dst_blocks[i - 1] + 1) {
        ++last.length;
        continue;
      }
    }
    runs.push_back({src_blocks[i], dst_blocks[i], 1});
  }
  return runs;
}

namespace {

void plan_c2c(const CacheGeometry& src, const LayerTransfer& layer,
              const std::vector<std::uint64_t>& src_addrs, std::vector<CopyDescriptor>& out) {
  if (layer.src_batch_index >= src.batch_size) {
    throw_param_invalid("src_batch_index", str(layer.src_batch_index) + " out of range [0, " +
                                               str(src.batch_size) + ")");
  }
  const std::uint64_t offset = layer.src_batch_index * src.stride;
  for (std::size_t i = 0; i < src_addrs.size(); ++i) {
    out.push_back({src_addrs[i] + offset, layer.dst_addrs[i], src.stride});
  }
}

void plan_c2b(const CacheGeometry& src, const LayerTransfer& layer,
              const std::vector<std::uint64_t>& src_addrs, std::vector<CopyDescriptor>& out) {
  const std::uint64_t bms = layer.dst_block_memory_size;
  if (bms == 0 || bms >= src.tensor_size) {
    throw_param_invalid("dst_block_memory_size", str(bms) + " must be > 0 and < tensor size " +
                                                     str(src.tensor_size) +
                                                     " when transferring from cache to blocks");
  }
  if (layer.src_batch_index >= src.batch_size) {
    throw_param_invalid("src_batch_index", str(layer.src_batch_index) + " out of range [0, " +
                                               str(src.batch_size) + ")");
  }
  const std::uint64_t offset = layer.src_batch_index * src.stride;
  const std::uint64_t remainder = src.tensor_size % bms;
  const std::uint64_t block_num = src.tensor_size / bms + (remainder == 0 ? 0 : 1);
  const std::size_t n = layer.dst_blocks.size();
  if (block_num < n) {
    throw_param_invalid("dst_block_indices",
                        str(n) + " blocks exceed the " + str(block_num) +
                            " pieces of the source tensor split by dst_block_memory_size " +
                            str(bms));
  }
  // The C++ library sizes C2B by the whole tensor and offsets by the batch row, so with
  // batch_size > 1 a row other than 0 reads past the tensor. kvsim rejects that read instead
  // of sending neighbouring memory (§3.4 [I]: C2B assumes batch 1).
  const std::uint64_t last_len = remainder > 0 ? remainder : bms;
  const std::uint64_t read_end = offset + (n - 1) * bms + last_len;
  if (read_end > src.tensor_size) {
    throw_param_invalid("src_batch_index", "row " + str(layer.src_batch_index) + " with " + str(n) +
                                               " blocks of " + str(bms) + " bytes reads to byte " +
                                               str(read_end) + ", past the source tensor size " +
                                               str(src.tensor_size));
  }
  out.reserve(out.size() + src_addrs.size() * n);
  for (std::size_t i = 0; i < src_addrs.size(); ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      const std::uint64_t len = (j == n - 1 && remainder > 0) ? remainder : bms;
      out.push_back(
          {src_addrs[i] + offset + j * bms, layer.dst_addrs[i] + layer.dst_blocks[j] * bms, len});
    }
  }
}

void plan_b2b(const CacheGeometry& src, const LayerTransfer& layer,
              const std::vector<std::uint64_t>& src_addrs, std::vector<CopyDescriptor>& out) {
  if (src.num_blocks == 0) {
    throw_param_invalid("src_cache",
                        "src_block_indices given, but the source is not a blocks cache");
  }
  const std::vector<BlockRun> runs = find_block_runs(layer.src_blocks, layer.dst_blocks);
  // bms 0 (None) means "use the source block size"; a set bms must equal it (§3.4).
  if (layer.dst_block_memory_size > 0 && layer.dst_block_memory_size != src.stride) {
    throw_param_invalid("dst_block_memory_size", str(layer.dst_block_memory_size) +
                                                     " does not match the source block size " +
                                                     str(src.stride));
  }
  out.reserve(out.size() + src_addrs.size() * runs.size());
  for (std::size_t i = 0; i < src_addrs.size(); ++i) {
    for (const BlockRun& run : runs) {
      const std::uint64_t last = run.src_start + run.length - 1;
      if (run.src_start >= src.num_blocks || last >= src.num_blocks) {
        throw_param_invalid("src_block_indices", "block " + str(std::max(run.src_start, last)) +
                                                     " out of range [0, " + str(src.num_blocks) +
                                                     ")");
      }
      out.push_back({src_addrs[i] + run.src_start * src.stride,
                     layer.dst_addrs[i] + run.dst_start * src.stride, src.stride * run.length});
    }
  }
}

}  // namespace

bool distinct_blocks_in_disjoint_spans(const std::vector<std::uint64_t>& bases,
                                       std::uint64_t block_bytes,
                                       const std::vector<std::uint64_t>& blocks) {
  if (blocks.empty() || block_bytes == 0) return false;
  const auto [lo, hi] = std::minmax_element(blocks.begin(), blocks.end());
  const std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
  if (*hi >= top / block_bytes || *hi - *lo >= (std::uint64_t{1} << 32)) return false;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;  // [start, end) per tensor
  for (const std::uint64_t base : bases) {
    const std::uint64_t from = *lo * block_bytes, to = (*hi + 1) * block_bytes;
    if (base > top - to) return false;
    spans.emplace_back(base + from, base + to);
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) return false;
  }
  std::vector<bool> seen(static_cast<std::size_t>(*hi - *lo + 1));
  for (const std::uint64_t b : blocks) {
    if (seen[b - *lo]) return false;
    seen[b - *lo] = true;
  }
  return true;
}

bool layer_destinations_disjoint(const CacheGeometry& src, const LayerTransfer& layer) {
  switch (copy_mode(layer.src_blocks, layer.dst_blocks)) {
    case CopyMode::kC2C:
      return false;
    case CopyMode::kC2B:
      return distinct_blocks_in_disjoint_spans(layer.dst_addrs, layer.dst_block_memory_size,
                                               layer.dst_blocks);
    case CopyMode::kB2B:
      return distinct_blocks_in_disjoint_spans(layer.dst_addrs, src.stride, layer.dst_blocks);
  }
  return false;
}

std::vector<CopyDescriptor> plan_layer_copy(const CacheGeometry& src, const LayerTransfer& layer) {
  const std::uint64_t tpl = layer.tensor_num_per_layer;
  if (tpl == 0) throw_param_invalid("tensor_num_per_layer", "must be > 0");
  const std::uint64_t num_tensors = src.tensor_addrs.size();
  const std::uint64_t num_layers = num_tensors / tpl;
  if (layer.layer_index >= num_layers) {
    throw_param_invalid("layer_index",
                        str(layer.layer_index) + " out of range [0, " + str(num_layers) + ")");
  }
  if (num_tensors % tpl != 0) {
    throw_param_invalid("src_cache", "num_tensors " + str(num_tensors) +
                                         " is not a multiple of tensor_num_per_layer " + str(tpl));
  }
  if (layer.dst_addrs.size() != tpl) {
    throw_param_invalid("dst_addrs", "expected " + str(tpl) + " addresses for the layer, got " +
                                         str(layer.dst_addrs.size()));
  }
  const auto first =
      src.tensor_addrs.begin() + static_cast<std::ptrdiff_t>(layer.layer_index * tpl);
  const std::vector<std::uint64_t> src_addrs(first, first + static_cast<std::ptrdiff_t>(tpl));
  std::vector<CopyDescriptor> out;
  switch (copy_mode(layer.src_blocks, layer.dst_blocks)) {
    case CopyMode::kC2C:
      plan_c2c(src, layer, src_addrs, out);
      break;
    case CopyMode::kC2B:
      plan_c2b(src, layer, src_addrs, out);
      break;
    case CopyMode::kB2B:
      plan_b2b(src, layer, src_addrs, out);
      break;
  }
  return out;
}

std::vector<std::uint64_t> resolve_remote_dst_addrs(const CacheGeometry& local,
                                                    const CacheGeometry& remote,
                                                    const RemoteLayerTarget& target) {
  if (!local.remote_accessible) {
    throw_param_invalid("src_cache", "local cache is not remote accessible");
  }
  if (!remote.remote_accessible) {
    throw_param_invalid("cache_key", "remote cache is not remote accessible");
  }
  const std::uint64_t tpl = target.tensor_num_per_layer;
  if (tpl == 0) throw_param_invalid("tensor_num_per_layer", "must be > 0");
  const std::uint64_t remote_layers = remote.tensor_addrs.size() / tpl;
  if (target.dst_layer_index >= remote_layers) {
    throw_param_invalid("dst_layer_range", "layer " + str(target.dst_layer_index) +
                                               " out of range [0, " + str(remote_layers) +
                                               ") of the remote cache");
  }
  if (target.dst_blocks.empty()) {
    if (target.dst_batch_index >= remote.batch_size) {
      throw_param_invalid("cache_key.batch_index",
                          str(target.dst_batch_index) + " out of range [0, " +
                              str(remote.batch_size) + ") of the remote cache");
    }
  } else {
    const std::uint64_t max_block =
        *std::max_element(target.dst_blocks.begin(), target.dst_blocks.end());
    if (max_block >= remote.num_blocks) {
      throw_param_invalid("dst_block_indices", "block " + str(max_block) + " out of range [0, " +
                                                   str(remote.num_blocks) +
                                                   ") of the remote cache");
    }
    if (target.dst_block_memory_size != 0 && target.dst_block_memory_size != remote.stride) {
      throw_param_invalid("dst_block_memory_size",
                          str(target.dst_block_memory_size) +
                              " is not equal to the remote cache's block size " +
                              str(remote.stride));
    }
  }
  std::vector<std::uint64_t> addrs;
  addrs.reserve(tpl);
  for (std::uint64_t i = 0; i < tpl; ++i) {
    addrs.push_back(remote.tensor_addrs[target.dst_layer_index * tpl + i] +
                    target.dst_batch_index * remote.stride);
  }
  return addrs;
}

}  // namespace kvsim::impl
