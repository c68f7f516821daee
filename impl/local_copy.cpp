#include "impl/local_copy.h"

#include <string>

#include "impl/copy_executor.h"

namespace kvsim::impl {

namespace {

std::string str(std::uint64_t v) {
  return std::to_string(v);
}

const CacheEntry& known(const DataDistCore& core, const CacheView& view, const char* argument) {
  const CacheEntry* e = core.caches().find(view.cache_id);
  if (e == nullptr) {
    throw LLMException(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST, argument,
                       "cache " + std::to_string(view.cache_id) + " does not exist");
  }
  return *e;
}

void run_local(DataDistCore& core, const std::vector<CopyDescriptor>& descs, const char* api) {
  const CopyRun run =
      run_copies(core.platform(), core.device(), descs, kForever, LLMStatusCode::LLM_FAILED);
  if (run.status != LLMStatusCode::LLM_SUCCESS) {
    const LLMStatusCode status = code_2_status(to_int(LLMStatusCode::LLM_COPY_CACHE_FAILED));
    throw LLMException(status, api, "copy failed: " + run.error);
  }
}

void check_block(const std::string& argument, std::int64_t block, std::uint64_t num_blocks) {
  check_uint64(argument, block);
  if (static_cast<std::uint64_t>(block) >= num_blocks) {
    throw_param_invalid(argument,
                        std::to_string(block) + " out of range [0, " + str(num_blocks) + ")");
  }
}

}  // namespace

void copy_cache(DataDistCore& core, const CacheView& dst, const CacheView& src,
                std::int64_t dst_batch_index, std::int64_t src_batch_index, std::int64_t offset,
                std::int64_t size) {
  check_uint32("dst_batch_index", dst_batch_index);
  check_uint32("src_batch_index", src_batch_index);
  check_uint64("offset", offset);
  if (!(size == -1 || size > 0)) {
    throw_param_invalid("size", std::to_string(size) + " is invalid, should be -1 or > 0");
  }
  const CacheEntry& d = known(core, dst, "dst");
  const CacheEntry& s = known(core, src, "src");
  if (d.view.is_blocks_cache) throw_param_invalid("dst", "can not be a blocks cache");
  if (s.view.is_blocks_cache) throw_param_invalid("src", "can not be a blocks cache");
  if (d.view.desc.num_tensors() != s.view.desc.num_tensors() ||
      d.view.desc.shape() != s.view.desc.shape() ||
      d.view.desc.data_type() != s.view.desc.data_type()) {
    throw_param_invalid("dst", "cache_desc does not match src's");
  }
  const CacheGeometry dg = make_cache_geometry(d.view);
  const CacheGeometry sg = make_cache_geometry(s.view);
  const auto dst_row = static_cast<std::uint64_t>(dst_batch_index);
  const auto src_row = static_cast<std::uint64_t>(src_batch_index);
  if (dst_row >= dg.batch_size) {
    throw_param_invalid("dst_batch_index",
                        str(dst_row) + " out of range [0, " + str(dg.batch_size) + ")");
  }
  if (src_row >= sg.batch_size) {
    throw_param_invalid("src_batch_index",
                        str(src_row) + " out of range [0, " + str(sg.batch_size) + ")");
  }
  const auto off = static_cast<std::uint64_t>(offset);
  if (off >= sg.stride) {
    throw_param_invalid("offset", str(off) + " is not below the row size " + str(sg.stride));
  }
  const std::uint64_t len = size == -1 ? sg.stride - off : static_cast<std::uint64_t>(size);
  if (off + len > sg.stride) {
    throw_param_invalid("size", "offset " + str(off) + " + size " + str(len) +
                                    " exceeds the row size " + str(sg.stride));
  }
  std::vector<CopyDescriptor> descs;
  for (std::size_t i = 0; i < sg.tensor_addrs.size(); ++i) {
    descs.push_back({sg.tensor_addrs[i] + src_row * sg.stride + off,
                     dg.tensor_addrs[i] + dst_row * dg.stride + off, len});
  }
  run_local(core, descs, "copy_cache");
}

void copy_blocks(DataDistCore& core, const CacheView& cache,
                 const std::map<std::int64_t, std::vector<std::int64_t>>& copy_block_info) {
  const CacheEntry& e = known(core, cache, "cache");
  if (!e.view.is_blocks_cache) throw_param_invalid("cache", "should be a blocks cache");
  const CacheGeometry g = make_cache_geometry(e.view);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> pairs;
  for (const auto& [src, dsts] : copy_block_info) {
    check_block("copy_block_info[" + std::to_string(src) + "]", src, g.num_blocks);
    for (std::size_t j = 0; j < dsts.size(); ++j) {
      check_block("copy_block_info[" + std::to_string(src) + "][" + std::to_string(j) + "]",
                  dsts[j], g.num_blocks);
      pairs.emplace_back(static_cast<std::uint64_t>(src), static_cast<std::uint64_t>(dsts[j]));
    }
  }
  std::vector<CopyDescriptor> descs;
  for (std::uint64_t base : g.tensor_addrs) {
    for (const auto& [s, d] : pairs) {
      descs.push_back({base + s * g.stride, base + d * g.stride, g.stride});
    }
  }
  run_local(core, descs, "copy_blocks");
}

void swap_blocks(DataDistCore& core, const CacheView& src, const CacheView& dst,
                 const std::map<std::int64_t, std::int64_t>& src_to_dst) {
  // hixl v2/cache_manager.py, CacheManager._verify_caches and swap_blocks: the caches go to the
  // C++ side by their addresses (cache id -1), so a CPU cache from Cache.create_cpu_cache works.
  if (!src.is_blocks_cache) throw_param_invalid("src", "src cache should be blocks cache.");
  if (!dst.is_blocks_cache) throw_param_invalid("dst", "dst cache should be blocks cache.");
  const CacheGeometry sg = make_cache_geometry(src);
  const CacheGeometry dg = make_cache_geometry(dst);
  if (sg.stride != dg.stride) {
    throw_param_invalid("dst", "src block size:" + str(sg.stride) +
                                   " and dst block size:" + str(dg.stride) + " must be equal");
  }
  if (sg.tensor_addrs.size() != dg.tensor_addrs.size()) {
    throw_param_invalid("dst", "src num_tensors:" + str(sg.tensor_addrs.size()) +
                                   " and dst num_tensors:" + str(dg.tensor_addrs.size()) +
                                   " must be equal");
  }
  for (const auto& [from, to] : src_to_dst) {
    check_block("src_to_dst", from, sg.num_blocks);
    check_block("src_to_dst[" + std::to_string(from) + "]", to, dg.num_blocks);
  }
  if (src.placement() == dst.placement()) {
    throw_param_invalid("dst", "swap_blocks supports HOST to DEVICE or DEVICE to HOST only");
  }
  std::vector<CopyDescriptor> descs;
  for (std::size_t i = 0; i < sg.tensor_addrs.size(); ++i) {
    for (const auto& [from, to] : src_to_dst) {
      descs.push_back({sg.tensor_addrs[i] + static_cast<std::uint64_t>(from) * sg.stride,
                       dg.tensor_addrs[i] + static_cast<std::uint64_t>(to) * dg.stride, sg.stride});
    }
  }
  // aclrtMemcpy fails for memory that is not there; nothing is copied then.
  for (const CopyDescriptor& d : descs) {
    for (const auto& [addr, argument] :
         {std::pair{d.src_addr, "src"}, std::pair{d.dst_addr, "dst"}}) {
      if (!core.platform().locate(addr, d.length)) {
        throw LLMException(LLMStatusCode::LLM_FAILED, argument,
                           "[" + str(addr) + ", +" + str(d.length) + ") is not allocated memory");
      }
    }
  }
  run_local(core, descs, "swap_blocks");
}

}  // namespace kvsim::impl
