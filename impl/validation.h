// Synchronous argument validation of transfer_cache_async (spec §3.1), pull/push (§4) and cache
// registration (§4), as pure functions over plain descriptions of the caches involved.
//
// Each function raises what the real library raises, in the order it checks: TypeError for a
// missing or wrong-typed argument, ValueError for an integer out of its domain, LLMException
// with the spec's status otherwise. A null pointer or an empty optional stands for Python None.
// Where Python itself would fail later with AttributeError (None passed where it does not
// check), kvsim raises TypeError at once ([I], §2.3).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "impl/copy_geometry.h"
#include "impl/types.h"

namespace kvsim::impl {

/// Which API generation's rules apply (§1): v1 KvCacheManager or v2 CacheManager.
enum class ApiVersion { kV1, kV2 };

/// Tensors per layer that transfer_cache_async hard-codes (K, V) (§3.1 item 5).
inline constexpr std::int64_t kTensorsPerLayer = 2;

/// transfer_cache_async's arguments (§3).
struct TransferCacheArgs {
  const CacheView* src_cache = nullptr;
  bool has_layer_synchronizer = false;
  /// The caller's list; validation sets a None src_layer_range in place (§3.1 item 6).
  std::vector<AnyTransferConfig>* transfer_configs = nullptr;
  std::optional<std::vector<std::int64_t>> src_block_indices{};
  std::optional<std::vector<std::int64_t>> dst_block_indices{};
  std::optional<std::int64_t> dst_block_memory_size{};
};

/// The engine state a transfer_cache_async call runs against.
struct TransferCacheEnv {
  ApiVersion version = ApiVersion::kV2;
  LLMRole role = LLMRole::PROMPT;        ///< v1 requires PROMPT (§1).
  bool remote_cache_accessible = false;  ///< llm.EnableRemoteCacheAccessible (§3.1 item 4).
};

/// What the background job needs after validation (§3.2).
struct TransferCachePlan {
  std::int64_t num_layers = 0;
  CopyMode mode = CopyMode::kC2C;
  std::vector<std::uint64_t> src_blocks{};  ///< `src_block_indices or []`, shared by all calls.
  std::vector<std::uint64_t> dst_blocks{};  ///< `dst_block_indices or []`.
  std::uint64_t dst_block_memory_size = 0;  ///< `dst_block_memory_size or 0`.
  /// What CacheTask returns on a wait timeout: LLM_TIMEOUT (v2), LLM_WAIT_PROCESS_TIMEOUT (v1).
  LLMStatusCode wait_timeout_code = LLMStatusCode::LLM_TIMEOUT;
};

/// Validates transfer_cache_async (§3.1 items 1–6 in the source's order) and defaults each
/// config's None src_layer_range to range(0, num_layers) in place, config by config, so a
/// failure at config i leaves configs after i untouched.
TransferCachePlan validate_transfer_cache_async(const TransferCacheArgs& args,
                                                const TransferCacheEnv& env);

/// The per-layer call of a TransferConfig for source layer `src_layer` (§3.2): its (K, V) slice
/// of dst_addrs and the shared block arguments.
LayerTransfer make_layer_transfer(const TransferCachePlan& plan, const TransferConfig& config,
                                  std::int64_t src_layer);

/// LLMException(LLM_PARAM_INVALID) unless exactly one of req_id and prefix_id is a valid id,
/// i.e. not 2**64-1 (§2.2, CacheManager.check_cache_key).
void check_cache_key_for_pull(const std::string& argument, const CacheKey& key);

/// Keyword arguments shared by pull_* and push_* (§4).
struct LayerArgs {
  std::optional<LayerRange> src_layer_range{};
  std::optional<LayerRange> dst_layer_range{};
  std::int64_t tensor_num_per_layer = kTensorsPerLayer;
};

/// Tensor index lists from layer ranges (Python layer_range_to_tensor_indices); empty = all.
struct TensorIndices {
  std::vector<std::uint64_t> src{};
  std::vector<std::uint64_t> dst{};
};

/// Python layer_range_to_tensor_indices: step 1 (LLMException), start >= 0 (LLMException),
/// first and last layer uint32 (ValueError). An empty range gives no indices, as in Python.
TensorIndices layer_range_to_tensor_indices(const std::optional<LayerRange>& src_layer_range,
                                            const std::optional<LayerRange>& dst_layer_range,
                                            std::int64_t tensor_num_per_layer);

/// Key of pull_cache.
using PullCacheKey = std::variant<CacheKey, CacheKeyByIdAndIndex>;
/// Key of pull_blocks.
using PullBlocksKey = std::variant<CacheKey, CacheKeyByIdAndIndex, BlocksCacheKey>;

/// pull_cache(cache_key, cache, batch_index=0, size=-1, **kwargs) (§4).
struct PullCacheArgs {
  std::optional<PullCacheKey> cache_key{};
  const CacheView* cache = nullptr;
  std::int64_t batch_index = 0;
  std::int64_t size = -1;
  LayerArgs layers{};
};

/// A validated pull_cache.
struct PullCachePlan {
  TensorIndices tensor_indices{};
  std::uint32_t batch_index = 0;
  std::int64_t size = -1;
  std::uint32_t tensor_num_per_layer = 2;
};

/// Validates pull_cache (§4) in Python's order, then the C++ rule that tensor_num_per_layer is at
/// most num_tensors and divides it. Remote-accessible mode admits CacheKeyByIdAndIndex only.
PullCachePlan validate_pull_cache(const PullCacheArgs& args, bool remote_cache_accessible);

/// pull_blocks(src_cache_key, dst_cache, src_blocks=(), dst_blocks=(), **kwargs) (§4).
struct PullBlocksArgs {
  std::optional<PullBlocksKey> src_cache_key{};
  const CacheView* dst_cache = nullptr;
  std::vector<std::int64_t> src_blocks{};
  std::vector<std::int64_t> dst_blocks{};
  LayerArgs layers{};
};

/// A validated pull_blocks.
struct PullBlocksPlan {
  TensorIndices tensor_indices{};
  std::vector<std::uint64_t> src_blocks{};
  std::vector<std::uint64_t> dst_blocks{};
  std::uint32_t tensor_num_per_layer = 2;
};

/// Validates pull_blocks (§4): dst is a blocks cache, dst_blocks non-empty, src_blocks required
/// iff the key is a BlocksCacheKey (then equal lengths, LLMDataDistV2::PullBlocks), a CacheKey
/// names exactly one id, tensor_num_per_layer rules as pull_cache.
PullBlocksPlan validate_pull_blocks(const PullBlocksArgs& args);

/// The minimum device memory pool for a pull that crosses host and device (§4).
inline constexpr std::uint64_t kMinStagingPoolBytes = 100ull << 20;

/// Checks of a pull that need the remote cache's description, known once the remote cache
/// table is read (§4): HOST→DEVICE pull_blocks only blocks↔blocks (LLM_PARAM_INVALID); D2H/H2D
/// needs a device pool of at least 100 MiB (LLM_FEATURE_NOT_ENABLED, [I]).
void validate_pull_placement(const CacheView& local, Placement remote_placement,
                             bool remote_is_blocks, bool pull_blocks,
                             std::optional<std::uint64_t> device_pool_bytes);

/// push_cache(dst_cache_key, src_cache, src_batch_index=0, src_layer_range=None,
/// dst_layer_range=None, size=-1, tensor_num_per_layer=2) (§4).
struct PushCacheArgs {
  std::optional<CacheKeyByIdAndIndex> dst_cache_key{};
  const CacheView* src_cache = nullptr;
  std::int64_t src_batch_index = 0;
  std::optional<LayerRange> src_layer_range{};
  std::optional<LayerRange> dst_layer_range{};
  std::int64_t size = -1;
  std::int64_t tensor_num_per_layer = kTensorsPerLayer;
};

/// push_blocks(dst_cache_key, src_cache, src_blocks=(), dst_blocks=(), src_layer_range=None,
/// dst_layer_range=None, tensor_num_per_layer=2) (§4).
struct PushBlocksArgs {
  std::optional<BlocksCacheKey> dst_cache_key{};
  const CacheView* src_cache = nullptr;
  std::vector<std::int64_t> src_blocks{};
  std::vector<std::int64_t> dst_blocks{};
  std::optional<LayerRange> src_layer_range{};
  std::optional<LayerRange> dst_layer_range{};
  std::int64_t tensor_num_per_layer = kTensorsPerLayer;
};

/// A validated push: one synchronous per-layer call per (src_layer, dst_layer) pair (§4).
struct PushPlan {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> layers{};
  std::uint32_t src_batch_index = 0;
  std::uint32_t tensor_num_per_layer = 2;
  std::vector<std::uint64_t> src_blocks{};
  std::vector<std::uint64_t> dst_blocks{};
};

/// Validates push_cache (§4). Besides Python's checks, kvsim checks before the first layer
/// that tensor_num_per_layer divides num_tensors and every source layer exists, which the C++
/// library finds only at the failing layer, so that a rejected push changes nothing ([I]).
PushPlan validate_push_cache(const PushCacheArgs& args, bool remote_cache_accessible);

/// Validates push_blocks (§4), with the same up-front layer checks as push_cache.
PushPlan validate_push_blocks(const PushBlocksArgs& args, bool remote_cache_accessible);

/// register_cache / register_blocks_cache arguments (§4).
struct RegisterArgs {
  const CacheDesc* cache_desc = nullptr;
  std::vector<std::uint64_t> addrs{};
  std::optional<bool> remote_accessible{};
  bool is_blocks_cache = false;
};

/// What is registered already, summed over both register calls.
struct RegistrationTotals {
  std::uint64_t addresses = 0;
  std::uint64_t device_bytes = 0;
  std::uint64_t host_bytes = 0;
};

/// Registration limits of §4. Sizes are binary (GiB, MiB).
struct RegistrationLimits {
  std::uint64_t max_addresses = 240;
  std::uint64_t max_device_bytes = 50ull << 30;
  std::uint64_t max_host_bytes = 20ull << 30;  ///< HDK < 25.5; newer HDKs allow 1 TiB.
  bool require_hccs_alignment = false;         ///< HCCS D2D: base addresses 2 MiB aligned.
  std::uint64_t hccs_alignment = 2ull << 20;
};

/// Validates a registration and returns the effective remote_accessible (§4). Python's checks
/// first: True after a link, empty addrs, len(addrs) != num_tensors, a zero address; then the
/// limits, all LLM_PARAM_INVALID ([I]: the library leaves these to HCCL): combined address count,
/// device/host bytes (len(addrs) * tensor size added to the totals), and, if enabled, alignment.
/// The default remote_accessible is True for DEVICE, False for HOST, False once a link exists.
bool validate_register_cache(const RegisterArgs& args, bool any_link_exists,
                             const RegistrationTotals& totals, const RegistrationLimits& limits);

/// Validates Cache.create_cpu_cache(desc, addrs) (§2.2): placement HOST, len(addrs) ==
/// num_tensors, both LLMException(LLM_PARAM_INVALID).
void validate_create_cpu_cache(const CacheDesc& cache_desc,
                               const std::vector<std::uint64_t>& addrs);

}  // namespace kvsim::impl
