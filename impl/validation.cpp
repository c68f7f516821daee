#include "impl/validation.h"

#include <algorithm>
#include <string>

namespace kvsim::impl {

namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

// Runs fn and re-raises its error with `prefix` in front of the argument path.
template <class Fn>
void with_prefix(const std::string& prefix, Fn&& fn) {
  try {
    fn();
  } catch (const LLMException& e) {
    throw LLMException(e.status_code(), prefix + e.argument(), e.rule());
  } catch (const TypeError& e) {
    throw TypeError(prefix + e.argument(), e.rule());
  } catch (const ValueError& e) {
    throw ValueError(prefix + e.argument(), e.rule());
  }
}

// transfer_cache_async's block index lists: each a uint64 (ValueError) (§3.1 item 2).
std::vector<std::uint64_t> checked_block_indices(
    const std::string& argument, const std::optional<std::vector<std::int64_t>>& indices) {
  std::vector<std::uint64_t> out;
  if (!indices) return out;
  out.reserve(indices->size());
  for (std::size_t i = 0; i < indices->size(); ++i) {
    check_uint64(argument + "[" + std::to_string(i) + "]", (*indices)[i]);
    out.push_back(static_cast<std::uint64_t>((*indices)[i]));
  }
  return out;
}

// pull_*/push_* block lists: Python checks only "list of int" and leaves the conversion to
// the binding, where a negative index fails the uint64 conversion with TypeError.
std::vector<std::uint64_t> converted_blocks(const std::string& argument,
                                            const std::vector<std::int64_t>& blocks) {
  std::vector<std::uint64_t> out;
  out.reserve(blocks.size());
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i] < 0) {
      throw TypeError(argument + "[" + std::to_string(i) + "]",
                      "must be a uint64 block index, got " + str(blocks[i]));
    }
    out.push_back(static_cast<std::uint64_t>(blocks[i]));
  }
  return out;
}

// Python: check_uint32(tensor_num_per_layer), then > 0 (§4).
std::uint32_t checked_tensor_num_per_layer(std::int64_t tpl, std::uint32_t num_tensors) {
  check_uint32("tensor_num_per_layer", tpl);
  if (tpl <= 0) {
    throw_param_invalid("tensor_num_per_layer",
                        str(tpl) + " is invalid, should be in [1, " + str(num_tensors) + "]");
  }
  return static_cast<std::uint32_t>(tpl);
}

// The C++ side's rule: tpl in [1, num_tensors] and dividing num_tensors (§4).
void check_tpl_divides(std::uint32_t tpl, std::uint32_t num_tensors) {
  if (tpl > num_tensors || num_tensors % tpl != 0) {
    throw_param_invalid("tensor_num_per_layer", str(tpl) + " must be in [1, " + str(num_tensors) +
                                                    "] and divide num_tensors " + str(num_tensors));
  }
}

// Pulls use tensor_num_per_layer only with a layer range: without one every tensor is copied
// to its counterpart (hixl data_cache_engine.cc, DataCacheEngine::CheckTensorIndices checks the
// local cache's divisibility only for non-empty indices).
void check_tpl_divides_if_ranged(const TensorIndices& indices, std::uint32_t tpl,
                                 std::uint32_t num_tensors) {
  if (!indices.src.empty() || !indices.dst.empty()) check_tpl_divides(tpl, num_tensors);
}

void check_range_within(const std::string& argument, const LayerRange& range,
                        std::int64_t num_layers) {
  if (range.start < 0) {
    throw_param_invalid(argument, "start " + str(range.start) + " is negative");
  }
  if (range.start >= range.stop) {
    throw_param_invalid(argument,
                        "start " + str(range.start) + " is not below stop " + str(range.stop));
  }
  if (range.stop > num_layers) {
    throw_param_invalid(argument,
                        "stop " + str(range.stop) + " exceeds num_layers " + str(num_layers));
  }
}

bool is_invalid_id(std::uint64_t id) {
  return id == kInvalidId;
}

}  // namespace

TransferCachePlan validate_transfer_cache_async(const TransferCacheArgs& args,
                                                const TransferCacheEnv& env) {
  const bool v1 = env.version == ApiVersion::kV1;
  // Item 1. v1 checks the role before the argument type (KvCacheManager._check_role).
  if (v1 && env.role != LLMRole::PROMPT) {
    throw_param_invalid("transfer_cache_async",
                        "is not supported by role " + std::string(to_string(env.role)));
  }
  if (args.src_cache == nullptr) throw_none("src_cache", v1 ? "KvCache" : "Cache");
  const CacheView& src = *args.src_cache;
  if (!v1 && src.placement() == Placement::HOST) {
    throw_param_invalid("src_cache", "src cache not support placement HOST");
  }

  // Item 2. The source checks dst_block_indices before src_block_indices.
  const std::vector<std::uint64_t> dst_blocks =
      checked_block_indices("dst_block_indices", args.dst_block_indices);
  const std::vector<std::uint64_t> src_blocks =
      checked_block_indices("src_block_indices", args.src_block_indices);
  if (args.dst_block_memory_size) {
    check_uint64("dst_block_memory_size", *args.dst_block_memory_size);
  }

  // Item 3.
  if (!src_blocks.empty()) {
    if (dst_blocks.empty()) {
      throw_param_invalid("dst_block_indices", "transfer from blocks to cache is not supported");
    }
    if (src_blocks.size() != dst_blocks.size()) {
      throw_param_invalid("dst_block_indices",
                          "length " + str(static_cast<std::int64_t>(dst_blocks.size())) +
                              " differs from src_block_indices length " +
                              str(static_cast<std::int64_t>(src_blocks.size())));
    }
  } else {
    if (v1 && args.dst_block_indices.has_value()) {
      throw_param_invalid("dst_block_indices", "transfer from cache to blocks is not supported");
    }
    if (!dst_blocks.empty() && !args.dst_block_memory_size) {
      throw_param_invalid("dst_block_memory_size",
                          "must be set when transferring from cache to blocks");
    }
  }

  // Item 4.
  if (!args.has_layer_synchronizer) throw_none("layer_synchronizer", "LayerSynchronizer");
  if (args.transfer_configs == nullptr) throw_none("transfer_configs", "a list or tuple");
  std::vector<AnyTransferConfig>& configs = *args.transfer_configs;
  const bool key_configs = !v1 && env.remote_cache_accessible;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const bool is_key_config = std::holds_alternative<TransferWithCacheKeyConfig>(configs[i]);
    if (is_key_config != key_configs) {
      const std::string prefix =
          key_configs ? "while enable_remote_cache_accessible is True, " : "";
      throw TypeError("transfer_configs[" + std::to_string(i) + "]",
                      prefix + "must be " +
                          (key_configs ? "TransferWithCacheKeyConfig" : "TransferConfig") +
                          ", got " + std::string(type_name(configs[i])));
    }
  }

  // The last rule of item 3, which the source checks after item 4.
  if (dst_blocks.empty() && args.dst_block_memory_size && *args.dst_block_memory_size != 0) {
    throw_param_invalid(
        "dst_block_memory_size",
        str(*args.dst_block_memory_size) + " is neither None nor 0 while dst is not blocks");
  }

  // Item 5.
  const std::uint32_t num_tensors = src.desc.num_tensors();
  if (num_tensors % kTensorsPerLayer != 0) {
    throw_param_invalid("src_cache.cache_desc.num_tensors", str(num_tensors) + " is not even");
  }
  const std::int64_t num_layers = num_tensors / kTensorsPerLayer;

  // Item 6, config by config: default in place, then check.
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const std::string path = "transfer_configs[" + std::to_string(i) + "].";
    AnyTransferConfig& config = configs[i];
    if (!src_layer_range_of(config)) {
      with_prefix(path, [&] {
        std::visit([&](auto& c) { c.set_src_layer_range(LayerRange{0, num_layers}); }, config);
      });
    }
    const std::uint32_t batch_index = src_batch_index_of(config);
    if (!src_blocks.empty()) {
      if (batch_index != 0) {
        throw_param_invalid(
            path + "src_batch_index",
            "must be 0 while src is blocks (src_block_indices given), got " + str(batch_index));
      }
      if (!(batch_index < src.desc.batch_size())) {
        throw_param_invalid(path + "src_batch_index", str(batch_index) + " out of range [0, " +
                                                          str(src.desc.batch_size()) + ")");
      }
    }
    const LayerRange range = *src_layer_range_of(config);
    check_range_within(path + "src_layer_range", range, num_layers);
    if (const auto* plain = std::get_if<TransferConfig>(&config)) {
      const std::int64_t expected = range.size() * kTensorsPerLayer;
      const auto actual = static_cast<std::int64_t>(plain->dst_addrs().size());
      if (actual != expected) {
        throw_param_invalid(path + "dst_addrs", "expected " + str(expected) + " addresses (" +
                                                    str(kTensorsPerLayer) + " per layer of " +
                                                    to_string(range) + "), got " + str(actual));
      }
    }
  }

  TransferCachePlan plan;
  plan.num_layers = num_layers;
  plan.mode = copy_mode(src_blocks, dst_blocks);
  plan.src_blocks = src_blocks;
  plan.dst_blocks = dst_blocks;
  plan.dst_block_memory_size = static_cast<std::uint64_t>(args.dst_block_memory_size.value_or(0));
  plan.wait_timeout_code =
      v1 ? LLMStatusCode::LLM_WAIT_PROCESS_TIMEOUT : LLMStatusCode::LLM_TIMEOUT;
  return plan;
}

LayerTransfer make_layer_transfer(const TransferCachePlan& plan, const TransferConfig& config,
                                  std::int64_t src_layer) {
  if (!config.src_layer_range() || !config.src_layer_range()->contains(src_layer)) {
    throw_param_invalid("src_layer", str(src_layer) + " is not in the config's src_layer_range");
  }
  const auto first =
      static_cast<std::size_t>((src_layer - config.src_layer_range()->start) * kTensorsPerLayer);
  if (first + kTensorsPerLayer > config.dst_addrs().size()) {
    throw_param_invalid("dst_addrs", "has no address pair for layer " + str(src_layer));
  }
  LayerTransfer layer;
  layer.layer_index = static_cast<std::uint64_t>(src_layer);
  layer.tensor_num_per_layer = kTensorsPerLayer;
  layer.dst_addrs.assign(
      config.dst_addrs().begin() + static_cast<std::ptrdiff_t>(first),
      config.dst_addrs().begin() + static_cast<std::ptrdiff_t>(first + kTensorsPerLayer));
  layer.src_batch_index = config.src_batch_index();
  layer.src_blocks = plan.src_blocks;
  layer.dst_blocks = plan.dst_blocks;
  layer.dst_block_memory_size = plan.dst_block_memory_size;
  return layer;
}

void check_cache_key_for_pull(const std::string& argument, const CacheKey& key) {
  const bool req_valid = !is_invalid_id(key.req_id);
  const bool prefix_valid = !is_invalid_id(key.prefix_id);
  if (!req_valid && !prefix_valid) {
    throw_param_invalid(argument,
                        "one of req_id and prefix_id should contain a valid value [0, 2**64-1)");
  }
  if (req_valid && prefix_valid) {
    throw_param_invalid(
        argument, "only one of req_id and prefix_id should contain a valid value, req_id " +
                      std::to_string(key.req_id) + ", prefix_id " + std::to_string(key.prefix_id));
  }
}

TensorIndices layer_range_to_tensor_indices(const std::optional<LayerRange>& src_layer_range,
                                            const std::optional<LayerRange>& dst_layer_range,
                                            std::int64_t tensor_num_per_layer) {
  if (src_layer_range && src_layer_range->step != 1) {
    throw_param_invalid("src_layer_range", "step must be 1, got " + str(src_layer_range->step));
  }
  if (dst_layer_range && dst_layer_range->step != 1) {
    throw_param_invalid("dst_layer_range", "step must be 1, got " + str(dst_layer_range->step));
  }
  const auto indices = [&](const char* name, const std::optional<LayerRange>& range) {
    std::vector<std::uint64_t> out;
    if (!range || range->size() == 0) return out;
    if (range->start < 0) {
      throw_param_invalid(name, "start " + str(range->start) + " is < 0");
    }
    check_uint32(name, range->start);
    check_uint32(name, range->stop - 1);
    const auto tpl = static_cast<std::uint64_t>(tensor_num_per_layer);
    const auto first = static_cast<std::uint64_t>(range->start) * tpl;
    const auto count = static_cast<std::uint64_t>(range->size()) * tpl;
    out.reserve(count);
    for (std::uint64_t i = 0; i < count; ++i) out.push_back(first + i);
    return out;
  };
  TensorIndices result;
  result.src = indices("src_layer_range", src_layer_range);
  result.dst = indices("dst_layer_range", dst_layer_range);
  return result;
}

PullCachePlan validate_pull_cache(const PullCacheArgs& args, bool remote_cache_accessible) {
  if (!args.cache_key) {
    throw_none("cache_key", remote_cache_accessible ? "CacheKeyByIdAndIndex"
                                                    : "CacheKey or CacheKeyByIdAndIndex");
  }
  if (remote_cache_accessible && std::holds_alternative<CacheKey>(*args.cache_key)) {
    throw TypeError("cache_key",
                    "must be CacheKeyByIdAndIndex while enable_remote_cache_accessible is True, "
                    "got CacheKey");
  }
  if (args.cache == nullptr) throw_none("cache", "Cache");
  const CacheView& cache = *args.cache;
  check_uint32("batch_index", args.batch_index);
  if (cache.is_blocks_cache) throw_param_invalid("cache", "can not be a blocks cache");
  if (!(args.size == -1 || args.size > 0)) {
    throw_param_invalid("size", str(args.size) + " is invalid, should be -1 or > 0");
  }
  const std::uint32_t num_tensors = cache.desc.num_tensors();
  const std::uint32_t tpl =
      checked_tensor_num_per_layer(args.layers.tensor_num_per_layer, num_tensors);
  if (const auto* key = std::get_if<CacheKey>(&*args.cache_key)) {
    check_cache_key_for_pull("cache_key", *key);
  }
  PullCachePlan plan;
  plan.tensor_indices =
      layer_range_to_tensor_indices(args.layers.src_layer_range, args.layers.dst_layer_range, tpl);
  check_tpl_divides_if_ranged(plan.tensor_indices, tpl, num_tensors);
  plan.batch_index = static_cast<std::uint32_t>(args.batch_index);
  plan.size = args.size;
  plan.tensor_num_per_layer = tpl;
  return plan;
}

PullBlocksPlan validate_pull_blocks(const PullBlocksArgs& args) {
  if (!args.src_cache_key) {
    throw_none("src_cache_key", "CacheKey, CacheKeyByIdAndIndex or BlocksCacheKey");
  }
  if (args.dst_cache == nullptr) throw_none("dst_cache", "Cache");
  const CacheView& dst = *args.dst_cache;
  PullBlocksPlan plan;
  plan.src_blocks = converted_blocks("src_blocks", args.src_blocks);
  plan.dst_blocks = converted_blocks("dst_blocks", args.dst_blocks);
  if (!dst.is_blocks_cache) throw_param_invalid("dst_cache", "should be a blocks cache");
  if (plan.dst_blocks.empty()) throw_param_invalid("dst_blocks", "can not be empty");
  const std::uint32_t num_tensors = dst.desc.num_tensors();
  const std::uint32_t tpl =
      checked_tensor_num_per_layer(args.layers.tensor_num_per_layer, num_tensors);
  const bool blocks_key = std::holds_alternative<BlocksCacheKey>(*args.src_cache_key);
  if (blocks_key) {
    if (plan.src_blocks.empty()) throw_param_invalid("src_blocks", "can not be empty");
  } else {
    if (const auto* key = std::get_if<CacheKey>(&*args.src_cache_key)) {
      check_cache_key_for_pull("src_cache_key", *key);
    }
    if (!plan.src_blocks.empty()) {
      throw_param_invalid("src_blocks",
                          "should be empty when src_cache_key is not a BlocksCacheKey");
    }
  }
  plan.tensor_indices =
      layer_range_to_tensor_indices(args.layers.src_layer_range, args.layers.dst_layer_range, tpl);
  if (blocks_key && plan.src_blocks.size() != plan.dst_blocks.size()) {
    throw_param_invalid("dst_blocks", "number of src_blocks (" +
                                          str(static_cast<std::int64_t>(plan.src_blocks.size())) +
                                          ") mismatches that of dst_blocks (" +
                                          str(static_cast<std::int64_t>(plan.dst_blocks.size())) +
                                          ")");
  }
  check_tpl_divides_if_ranged(plan.tensor_indices, tpl, num_tensors);
  plan.tensor_num_per_layer = tpl;
  return plan;
}

void validate_pull_placement(const CacheView& local, Placement remote_placement,
                             bool remote_is_blocks, bool pull_blocks,
                             std::optional<std::uint64_t> device_pool_bytes) {
  if (pull_blocks && remote_placement == Placement::HOST &&
      local.placement() == Placement::DEVICE && !(remote_is_blocks && local.is_blocks_cache)) {
    throw_param_invalid("src_cache_key",
                        "a HOST to DEVICE pull_blocks is supported between blocks caches only");
  }
  if (remote_placement != local.placement() &&
      (!device_pool_bytes || *device_pool_bytes < kMinStagingPoolBytes)) {
    throw LLMException(LLMStatusCode::LLM_FEATURE_NOT_ENABLED, kOptionMemPoolConfig,
                       "a pull between host and device needs a device memory pool of at least "
                       "100 MiB");
  }
}

namespace {

struct PushCommon {
  const CacheView* src_cache;
  std::optional<LayerRange> src_layer_range;
  std::optional<LayerRange> dst_layer_range;
  std::int64_t tensor_num_per_layer;
};

// The range part of push_cache / push_blocks, then kvsim's up-front per-layer checks.
void plan_push_layers(const PushCommon& args, PushPlan& plan) {
  const std::uint32_t num_tensors = args.src_cache->desc.num_tensors();
  const std::uint32_t tpl = checked_tensor_num_per_layer(args.tensor_num_per_layer, num_tensors);
  check_layer_range("src_layer_range", args.src_layer_range, /*allow_none=*/true);
  check_layer_range("dst_layer_range", args.dst_layer_range, /*allow_none=*/true);
  const std::int64_t num_layers = num_tensors / tpl;
  const LayerRange src = args.src_layer_range.value_or(LayerRange{0, num_layers});
  const LayerRange dst = args.dst_layer_range.value_or(LayerRange{0, num_layers});
  if (src.size() != dst.size()) {
    throw_param_invalid(
        "src_layer_range",
        "length " + str(src.size()) + " should equal dst_layer_range length " + str(dst.size()));
  }
  plan.tensor_num_per_layer = tpl;
  for (std::int64_t i = 0; i < src.size(); ++i) {
    plan.layers.emplace_back(static_cast<std::uint64_t>(src.at(i)),
                             static_cast<std::uint64_t>(dst.at(i)));
  }
}

void check_push_up_front(const PushPlan& plan, const CacheView& src_cache,
                         const std::optional<LayerRange>& src_layer_range) {
  if (plan.layers.empty()) return;  // no C++ call is made (push_cache / push_blocks: a no-op)
  const std::uint32_t num_tensors = src_cache.desc.num_tensors();
  check_tpl_divides(plan.tensor_num_per_layer, num_tensors);
  if (src_layer_range) {
    check_range_within("src_layer_range", *src_layer_range,
                       num_tensors / plan.tensor_num_per_layer);
  }
}

}  // namespace

PushPlan validate_push_cache(const PushCacheArgs& args, bool remote_cache_accessible) {
  if (!remote_cache_accessible) {
    throw_param_invalid("push_cache",
                        "is only supported while enable_remote_cache_accessible is True");
  }
  if (!args.dst_cache_key) throw_none("dst_cache_key", "CacheKeyByIdAndIndex");
  if (args.src_cache == nullptr) throw_none("src_cache", "Cache");
  check_uint32("src_batch_index", args.src_batch_index);
  if (args.src_cache->is_blocks_cache) {
    throw_param_invalid("src_cache", "can not be a blocks cache");
  }
  PushPlan plan;
  plan_push_layers(
      {args.src_cache, args.src_layer_range, args.dst_layer_range, args.tensor_num_per_layer},
      plan);
  if (args.size != -1) {
    throw_param_invalid("size", str(args.size) + " is invalid, should be -1");
  }
  check_push_up_front(plan, *args.src_cache, args.src_layer_range);
  plan.src_batch_index = static_cast<std::uint32_t>(args.src_batch_index);
  return plan;
}

PushPlan validate_push_blocks(const PushBlocksArgs& args, bool remote_cache_accessible) {
  if (!remote_cache_accessible) {
    throw_param_invalid("push_blocks",
                        "is only supported while enable_remote_cache_accessible is True");
  }
  if (!args.dst_cache_key) throw_none("dst_cache_key", "BlocksCacheKey");
  if (args.src_cache == nullptr) throw_none("src_cache", "Cache");
  PushPlan plan;
  plan.src_blocks = converted_blocks("src_blocks", args.src_blocks);
  plan.dst_blocks = converted_blocks("dst_blocks", args.dst_blocks);
  if (!args.src_cache->is_blocks_cache) {
    throw_param_invalid("src_cache", "should be a blocks cache");
  }
  if (plan.dst_blocks.empty()) throw_param_invalid("dst_blocks", "can not be empty");
  plan_push_layers(
      {args.src_cache, args.src_layer_range, args.dst_layer_range, args.tensor_num_per_layer},
      plan);
  check_push_up_front(plan, *args.src_cache, args.src_layer_range);
  return plan;
}

bool validate_register_cache(const RegisterArgs& args, bool any_link_exists,
                             const RegistrationTotals& totals, const RegistrationLimits& limits) {
  if (args.cache_desc == nullptr) throw_none("cache_desc", "CacheDesc");
  const CacheDesc& desc = *args.cache_desc;
  if (any_link_exists && args.remote_accessible.value_or(false)) {
    throw_param_invalid("remote_accessible",
                        "can not register a remote accessible cache after link");
  }
  if (args.addrs.empty()) throw_param_invalid("addrs", "can not be empty");
  if (args.addrs.size() != desc.num_tensors()) {
    throw_param_invalid("addrs", "length " + str(static_cast<std::int64_t>(args.addrs.size())) +
                                     " should be equal to num_tensors " + str(desc.num_tensors()));
  }
  for (std::size_t i = 0; i < args.addrs.size(); ++i) {
    if (args.addrs[i] == 0) {
      throw_param_invalid("addrs[" + std::to_string(i) + "]", "can not be zero");
    }
  }
  const std::uint64_t count = args.addrs.size();
  if (totals.addresses + count > limits.max_addresses) {
    throw_param_invalid("addrs", std::to_string(count) +
                                     " addresses bring the registered total to " +
                                     std::to_string(totals.addresses + count) + ", above " +
                                     std::to_string(limits.max_addresses) +
                                     " (register_cache and register_blocks_cache combined)");
  }
  const bool device = desc.placement() == Placement::DEVICE;
  const std::uint64_t tensor_size = desc.size();
  const std::uint64_t already = device ? totals.device_bytes : totals.host_bytes;
  const std::uint64_t limit = device ? limits.max_device_bytes : limits.max_host_bytes;
  if (tensor_size > (limit - std::min(already, limit)) / count) {
    throw_param_invalid("cache_desc", std::to_string(count) + " tensors of " +
                                          std::to_string(tensor_size) + " bytes exceed the " +
                                          std::string(device ? "device" : "host") +
                                          " registration limit of " + std::to_string(limit) +
                                          " bytes (" + std::to_string(already) + " registered)");
  }
  if (limits.require_hccs_alignment && device) {
    for (std::size_t i = 0; i < args.addrs.size(); ++i) {
      if (args.addrs[i] % limits.hccs_alignment != 0) {
        throw_param_invalid("addrs[" + std::to_string(i) + "]",
                            "address " + std::to_string(args.addrs[i]) + " is not aligned to " +
                                std::to_string(limits.hccs_alignment) + " bytes (HCCS D2D)");
      }
    }
  }
  if (args.remote_accessible) return *args.remote_accessible;
  return !any_link_exists && device;
}

void validate_create_cpu_cache(const CacheDesc& cache_desc,
                               const std::vector<std::uint64_t>& addrs) {
  if (cache_desc.placement() != Placement::HOST) {
    throw_param_invalid("cache_desc.placement", "must be HOST");
  }
  if (addrs.size() != cache_desc.num_tensors()) {
    throw_param_invalid("addrs", "length " + str(static_cast<std::int64_t>(addrs.size())) +
                                     " not equal to num_tensors " + str(cache_desc.num_tensors()));
  }
}

}  // namespace kvsim::impl
