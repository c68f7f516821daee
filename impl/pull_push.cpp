#include "impl/pull_push.h"

#include <algorithm>
#include <functional>
#include <string>

#include "impl/cache_store.h"
#include "impl/cluster_links.h"
#include "impl/copy_executor.h"
#include "impl/layer_transfer.h"
#include "impl/lock_guard.h"
#include "impl/remote_caches.h"

namespace kvsim::impl {

namespace {

std::string str(std::uint64_t v) {
  return std::to_string(v);
}

// The pull's source: a remote cache and its row.
struct RemoteSource {
  RemoteCacheInfo info;
  std::uint64_t row = 0;
  std::optional<CacheKey> consumed_key{};
};

// Counts a pull on the link for the v1 overlap diagnostic while it runs.
class ActivePull {
 public:
  explicit ActivePull(Link& link) : link_(link) { ++link_.active_pulls; }
  ~ActivePull() { --link_.active_pulls; }
  ActivePull(const ActivePull&) = delete;
  ActivePull& operator=(const ActivePull&) = delete;

 private:
  Link& link_;
};

std::uint64_t cluster_of(const PullBlocksKey& key) {
  return std::visit(
      [](const auto& k) -> std::uint64_t {
        using K = std::decay_t<decltype(k)>;
        if constexpr (std::is_same_v<K, CacheKeyByIdAndIndex>) {
          return k.cluster_id();
        } else {
          return k.cluster_id;
        }
      },
      key);
}

const CacheEntry& local_entry(const DataDistCore& core, std::int64_t cache_id,
                              const char* argument) {
  const CacheEntry* e = core.caches().find(cache_id);
  if (e == nullptr) {
    throw LLMException(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST, argument,
                       "cache " + std::to_string(cache_id) + " is not registered here");
  }
  return *e;
}

std::shared_ptr<Link> linked(DataDistCore& core, std::uint64_t cluster, const char* argument) {
  std::shared_ptr<Link> link = core.find_link(cluster);
  if (!link) {
    throw LLMException(LLMStatusCode::LLM_NOT_YET_LINK, argument,
                       "cluster " + std::to_string(cluster) + " is not linked");
  }
  return link;
}

// v1 forbids pulls and transfer_cache_async on one link at once, whichever end calls them (the
// prompt transfers, the decoder pulls: §3.5).
void check_overlap(DataDistCore& core, const Link& link, const char* api) {
  if (core.version() != ApiVersion::kV1) return;
  const std::shared_ptr<Link> other = peer_end(core, link);
  if (link.active_v1_transfers > 0 || (other && other->active_v1_transfers > 0)) {
    core.flag(DiagnosticKind::kLinkCallOverlap,
              std::string(api) + " on the link to cluster " + str(link.peer_cluster_id()) +
                  " while transfer_cache_async is in flight on it (v1 forbids it)",
              api, link.peer_cluster_id());
  }
}

[[noreturn]] void not_exist(const char* argument, const std::string& what) {
  throw LLMException(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST, argument, what + " does not exist");
}

// Finds the pull's source (remote-accessible: the cached table; otherwise the live peer).
RemoteSource find_source(DataDistCore& core, Link& link, const PullBlocksKey& key,
                         const char* argument) {
  RemoteSource src;
  if (core.options().enable_remote_cache_accessible) {
    const RemoteCacheTable& table = remote_cache_table(core, link);
    std::optional<RemoteCacheInfo> info;
    if (const auto* by_id = std::get_if<CacheKeyByIdAndIndex>(&key)) {
      info = find_remote_cache(table, *by_id);
      src.row = by_id->batch_index();
    } else if (const auto* blocks = std::get_if<BlocksCacheKey>(&key)) {
      info = find_remote_cache(table, *blocks);
    }
    if (!info) not_exist(argument, "the remote cache");
    src.info = *info;
    return src;
  }
  const std::shared_ptr<DataDistCore> peer = peer_of(core, link);
  if (!peer) {
    // The key is resolved by asking the peer; a peer that died holding the link does not
    // answer, which fails like the copy would, not as a missing cache.
    std::string lost;
    if (const LLMStatusCode gone = check_peer_alive(core, link, lost);
        gone != LLMStatusCode::LLM_SUCCESS) {
      throw LLMException(gone, argument,
                         "failed, error code is " + std::string(to_string(gone)) + ": " + lost);
    }
    not_exist(argument, "the remote cluster");
  }
  const CacheEntry* e = nullptr;
  if (const auto* by_key = std::get_if<CacheKey>(&key)) {
    const auto found = peer->caches().find_key(*by_key);
    if (!found) not_exist(argument, "the remote cache key");
    e = peer->caches().find_any(found->first);
    src.row = found->second;
    src.consumed_key = *by_key;
  } else if (const auto* by_id = std::get_if<CacheKeyByIdAndIndex>(&key)) {
    e = peer->caches().find(by_id->cache_id());
    src.row = by_id->batch_index();
  } else {
    const auto id = peer->caches().find_blocks_key(std::get<BlocksCacheKey>(key));
    if (id) e = peer->caches().find(*id);
  }
  if (e == nullptr) not_exist(argument, "the remote cache");
  src.info = remote_info(*e);
  return src;
}

// (remote tensor, local tensor) pairs from the layer ranges' tensor indices.
std::vector<std::pair<std::uint64_t, std::uint64_t>> tensor_pairs(const TensorIndices& indices,
                                                                  std::uint64_t remote_tensors,
                                                                  std::uint64_t local_tensors) {
  std::vector<std::uint64_t> src = indices.src;
  std::vector<std::uint64_t> dst = indices.dst;
  if (src.empty()) {
    for (std::uint64_t i = 0; i < remote_tensors; ++i) src.push_back(i);
  }
  if (dst.empty()) {
    for (std::uint64_t i = 0; i < local_tensors; ++i) dst.push_back(i);
  }
  if (src.size() != dst.size()) {
    throw_param_invalid("dst_layer_range", str(dst.size()) + " local tensors for " +
                                               str(src.size()) + " remote tensors");
  }
  for (std::uint64_t s : src) {
    if (s >= remote_tensors) {
      throw_param_invalid("src_layer_range", "tensor " + str(s) + " out of range [0, " +
                                                 str(remote_tensors) + ") of the remote cache");
    }
  }
  for (std::uint64_t d : dst) {
    if (d >= local_tensors) {
      throw_param_invalid("dst_layer_range",
                          "tensor " + str(d) + " out of range [0, " + str(local_tensors) + ")");
    }
  }
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  for (std::size_t i = 0; i < src.size(); ++i) out.emplace_back(src[i], dst[i]);
  return out;
}

std::optional<std::uint64_t> device_pool_bytes(DataDistCore& core) {
  const MemoryPool* pool = core.pool(Placement::DEVICE);
  return pool ? std::optional<std::uint64_t>(pool->capacity()) : std::nullopt;
}

// Runs the pull's copies: `copies` with the deadline and the timeout status; then consumes the key.
void run_pull(DataDistCore& core, Link& link, const RemoteSource& src, const char* api,
              const std::function<CopyRun(Time, LLMStatusCode)>& copies) {
  CopyRun run;
  run.status = check_link_usable(link, run.error);
  if (run.status == LLMStatusCode::LLM_SUCCESS)
    run.status = check_peer_alive(core, link, run.error);
  if (run.status == LLMStatusCode::LLM_SUCCESS) {
    run = copies(core.platform().now() + core.sync_timeout(), core.wait_timeout_code());
    mark_transport_failure(core, link, run.status, run.error);
  }
  if (run.status != LLMStatusCode::LLM_SUCCESS) {
    throw LLMException(
        run.status, api,
        "failed, error code is " + std::string(to_string(run.status)) + ": " + run.error);
  }
  if (src.consumed_key) {
    if (const std::shared_ptr<DataDistCore> peer = peer_of(core, link)) {
      remove_cache_key(*peer, *src.consumed_key);
    }
  }
}

}  // namespace

void pull_cache(DataDistCore& core, const PullCacheArgs& args) {
  const PullCachePlan plan =
      validate_pull_cache(args, core.options().enable_remote_cache_accessible);
  pull_cache_planned(core, *args.cache_key, args.cache->cache_id, plan);
}

void pull_cache_planned(DataDistCore& core, const PullCacheKey& cache_key, std::int64_t local_id,
                        const PullCachePlan& plan) {
  const CacheEntry& local = local_entry(core, local_id, "cache");
  const PullBlocksKey key = std::visit([](const auto& k) -> PullBlocksKey { return k; }, cache_key);
  const std::shared_ptr<Link> link = linked(core, cluster_of(key), "cache_key");
  check_overlap(core, *link, "pull_cache");
  ActivePull active(*link);
  LockGuard lock(link->mutex());
  if (!link->up()) {
    throw LLMException(LLMStatusCode::LLM_NOT_YET_LINK, "cache_key", "the link went down");
  }
  const RemoteSource src = find_source(core, *link, key, "cache_key");
  const CacheGeometry& remote = src.info.geometry;
  if (src.info.is_blocks_cache && !src.info.mix) {
    throw_param_invalid("cache_key", "names a blocks cache; use pull_blocks");
  }
  if (src.row >= remote.batch_size) {
    throw_param_invalid(
        "cache_key.batch_index",
        str(src.row) + " out of range [0, " + str(remote.batch_size) + ") of the remote cache");
  }
  const CacheGeometry geometry = make_cache_geometry(local.view);
  if (plan.batch_index >= geometry.batch_size) {
    throw_param_invalid("batch_index", str(plan.batch_index) + " out of range [0, " +
                                           str(geometry.batch_size) + ")");
  }
  const std::uint64_t len = plan.size == -1 ? remote.stride : static_cast<std::uint64_t>(plan.size);
  if (len > remote.stride || len > geometry.stride) {
    throw_param_invalid("size", str(len) + " bytes exceed the remote row " + str(remote.stride) +
                                    " or the local row " + str(geometry.stride));
  }
  validate_pull_placement(local.view, src.info.placement, false, false, device_pool_bytes(core));
  std::vector<CopyDescriptor> descs;
  for (const auto& [s, d] : tensor_pairs(plan.tensor_indices, remote.tensor_addrs.size(),
                                         geometry.tensor_addrs.size())) {
    descs.push_back({remote.tensor_addrs[s] + src.row * remote.stride,
                     geometry.tensor_addrs[d] + plan.batch_index * geometry.stride, len});
  }
  run_pull(core, *link, src, "pull_cache", [&](Time deadline, LLMStatusCode timeout_status) {
    return run_copies(core.platform(), core.device(), descs, deadline, timeout_status);
  });
}

void pull_blocks(DataDistCore& core, const PullBlocksArgs& args) {
  const PullBlocksPlan plan = validate_pull_blocks(args);
  pull_blocks_planned(core, *args.src_cache_key, args.dst_cache->cache_id, plan,
                      std::holds_alternative<BlocksCacheKey>(*args.src_cache_key));
}

void pull_blocks_planned(DataDistCore& core, const PullBlocksKey& src_cache_key,
                         std::int64_t local_id, const PullBlocksPlan& plan, bool b2b) {
  const CacheEntry& local = local_entry(core, local_id, "dst_cache");
  const std::shared_ptr<Link> link = linked(core, cluster_of(src_cache_key), "src_cache_key");
  check_overlap(core, *link, "pull_blocks");
  ActivePull active(*link);
  LockGuard lock(link->mutex());
  if (!link->up()) {
    throw LLMException(LLMStatusCode::LLM_NOT_YET_LINK, "src_cache_key", "the link went down");
  }
  const RemoteSource src = find_source(core, *link, src_cache_key, "src_cache_key");
  const CacheGeometry& remote = src.info.geometry;
  const CacheGeometry geometry = make_cache_geometry(local.view);
  if (b2b != src.info.is_blocks_cache && !src.info.mix) {
    throw_param_invalid("src_cache_key", b2b ? "names a cache that is not a blocks cache"
                                             : "names a blocks cache; use a BlocksCacheKey");
  }
  for (std::size_t j = 0; j < plan.dst_blocks.size(); ++j) {
    if (plan.dst_blocks[j] >= geometry.num_blocks) {
      throw_param_invalid(
          "dst_blocks[" + str(j) + "]",
          str(plan.dst_blocks[j]) + " out of range [0, " + str(geometry.num_blocks) + ")");
    }
  }
  validate_pull_placement(local.view, src.info.placement, src.info.is_blocks_cache, true,
                          device_pool_bytes(core));
  const auto pairs =
      tensor_pairs(plan.tensor_indices, remote.tensor_addrs.size(), geometry.tensor_addrs.size());
  // The descriptors, tensor pair by tensor pair: per = per pair, at(p, j) the j-th of pair p.
  std::size_t per = 0;
  std::function<CopyDescriptor(std::size_t, std::size_t)> at;
  std::vector<BlockRun> runs;
  if (b2b) {
    if (remote.stride != geometry.stride) {
      throw_param_invalid("dst_cache", "block size " + str(geometry.stride) +
                                           " differs from the remote block size " +
                                           str(remote.stride));
    }
    for (std::size_t j = 0; j < plan.src_blocks.size(); ++j) {
      if (plan.src_blocks[j] >= remote.num_blocks) {
        throw_param_invalid("src_blocks[" + str(j) + "]",
                            str(plan.src_blocks[j]) + " out of range [0, " +
                                str(remote.num_blocks) + ") of the remote cache");
      }
    }
    runs = find_block_runs(plan.src_blocks, plan.dst_blocks);
    per = runs.size();
    at = [&](std::size_t p, std::size_t j) -> CopyDescriptor {
      const BlockRun& run = runs[j];
      return {remote.tensor_addrs[pairs[p].first] + run.src_start * remote.stride,
              geometry.tensor_addrs[pairs[p].second] + run.dst_start * geometry.stride,
              run.length * geometry.stride};
    };
  } else {
    if (src.row >= remote.batch_size) {
      throw_param_invalid("src_cache_key", "row " + str(src.row) + " out of range [0, " +
                                               str(remote.batch_size) + ") of the remote cache");
    }
    const std::uint64_t block = geometry.stride;
    const std::uint64_t pieces = (remote.stride + block - 1) / block;
    if (plan.dst_blocks.size() > pieces) {
      throw_param_invalid("dst_blocks", str(plan.dst_blocks.size()) + " blocks exceed the " +
                                            str(pieces) + " blocks of a remote row of " +
                                            str(remote.stride) + " bytes");
    }
    per = plan.dst_blocks.size();
    at = [&, block](std::size_t p, std::size_t j) -> CopyDescriptor {
      const std::uint64_t offset = j * block;
      return {remote.tensor_addrs[pairs[p].first] + src.row * remote.stride + offset,
              geometry.tensor_addrs[pairs[p].second] + plan.dst_blocks[j] * block,
              std::min(block, remote.stride - offset)};
    };
  }
  const DescriptorList list{pairs.size() * per,
                            [&](std::size_t i) { return at(i / per, i % per); }};
  std::vector<std::uint64_t> dst_tensors;
  for (const auto& [s, d] : pairs) dst_tensors.push_back(geometry.tensor_addrs[d]);
  const bool disjoint =
      distinct_blocks_in_disjoint_spans(dst_tensors, geometry.stride, plan.dst_blocks);
  run_pull(core, *link, src, "pull_blocks", [&](Time deadline, LLMStatusCode timeout_status) {
    if (disjoint) {
      return run_disjoint_copies(core.platform(), core.device(), list, deadline, timeout_status);
    }
    std::vector<CopyDescriptor> descs;  // may overlap: split_batches' rules need the whole list
    descs.reserve(list.size);
    for (std::size_t i = 0; i < list.size; ++i) descs.push_back(list.at(i));
    return run_copies(core.platform(), core.device(), descs, deadline, timeout_status);
  });
}

namespace {

void check_push_source(DataDistCore& core, const CacheView& src) {
  local_entry(core, src.cache_id, "src_cache");
  if (src.placement() != Placement::DEVICE) {
    throw_param_invalid("src_cache", "push requires a DEVICE source cache");
  }
}

[[noreturn]] void push_failed(LLMStatusCode ret, const char* api, std::uint64_t src_layer) {
  throw LLMException(
      ret, api,
      "failed at src layer " + str(src_layer) + ", error code is " + std::string(to_string(ret)));
}

// The remote-accessible geometry checks of every layer (§3.4), run before the first layer is
// sent so that a push rejected at a later layer (a dst layer, row or block the remote cache
// lacks) changes nothing ([I], as validate_push_cache does for the source layers). Missing
// links and caches are left to transfer_layer, which reports them at the first layer.
void check_push_layers_up_front(DataDistCore& core, const PushPlan& plan, const CacheView& src,
                                const TransferCacheKey& key, const char* api) {
  const std::shared_ptr<Link> link = core.find_link(cluster_id_of(key));
  const CacheEntry* entry = core.caches().find(src.cache_id);
  if (!link || link->register_status() != RegisterMemStatus::OK || entry == nullptr) return;
  const std::optional<RemoteCacheInfo> remote =
      find_remote_cache(remote_cache_table(core, *link), key);
  if (!remote) return;
  const CacheGeometry geometry = make_cache_geometry(entry->view);
  for (const auto& [src_layer, dst_layer] : plan.layers) {
    LayerTransfer layer;
    layer.layer_index = src_layer;
    layer.tensor_num_per_layer = plan.tensor_num_per_layer;
    layer.src_batch_index = plan.src_batch_index;
    layer.src_blocks = plan.src_blocks;
    layer.dst_blocks = plan.dst_blocks;
    RemoteLayerTarget target;
    target.dst_layer_index = dst_layer;
    if (const auto* by_id = std::get_if<CacheKeyByIdAndIndex>(&key)) {
      target.dst_batch_index = by_id->batch_index();
    }
    target.tensor_num_per_layer = layer.tensor_num_per_layer;
    target.dst_blocks = layer.dst_blocks;
    target.dst_block_memory_size = layer.dst_block_memory_size;
    try {
      layer.dst_addrs = resolve_remote_dst_addrs(geometry, remote->geometry, target);
      plan_layer_copy(geometry, layer);
    } catch (const LLMException& e) {
      push_failed(e.status_code(), api, src_layer);
    }
  }
}

}  // namespace

void push_planned(DataDistCore& core, const PushPlan& plan, const CacheView& src,
                  const TransferCacheKey& key, const char* api) {
  check_push_layers_up_front(core, plan, src, key, api);
  for (const auto& [src_layer, dst_layer] : plan.layers) {
    LayerCall call;
    call.src_cache_id = src.cache_id;
    call.dst_cluster_id = cluster_id_of(key);
    call.transfer.layer_index = src_layer;
    call.transfer.tensor_num_per_layer = plan.tensor_num_per_layer;
    call.transfer.src_batch_index = plan.src_batch_index;
    call.transfer.src_blocks = plan.src_blocks;
    call.transfer.dst_blocks = plan.dst_blocks;
    call.remote = RemoteKeyTarget{key, dst_layer};
    const LLMStatusCode ret = transfer_layer(core, call);
    if (ret != LLMStatusCode::LLM_SUCCESS) push_failed(ret, api, src_layer);
  }
}

namespace {

// hixl v2/cache_manager.py push_*: the default range is range(0, num_tensors //
// tensor_num_per_layer), one C++ call per layer; an empty one makes no call at all.
bool sends_nothing(DataDistCore& core, const PushPlan& plan, const CacheView& src,
                   const char* api) {
  if (!plan.layers.empty()) return false;
  core.flag(DiagnosticKind::kPushSendsNothing,
            std::string(api) + " of cache " + std::to_string(src.cache_id) +
                " sends nothing: " + "num_tensors " + std::to_string(src.desc.num_tensors()) +
                " < tensor_num_per_layer " + std::to_string(plan.tensor_num_per_layer) +
                " leaves the default layer range empty, and the library reports success",
            "tensor_num_per_layer");
  return true;
}

}  // namespace

void push_cache(DataDistCore& core, const PushCacheArgs& args) {
  const PushPlan plan = validate_push_cache(args, core.options().enable_remote_cache_accessible);
  if (sends_nothing(core, plan, *args.src_cache, "push_cache")) return;
  check_push_source(core, *args.src_cache);
  push_planned(core, plan, *args.src_cache, *args.dst_cache_key, "push_cache");
}

void push_blocks(DataDistCore& core, const PushBlocksArgs& args) {
  const PushPlan plan = validate_push_blocks(args, core.options().enable_remote_cache_accessible);
  if (sends_nothing(core, plan, *args.src_cache, "push_blocks")) return;
  check_push_source(core, *args.src_cache);
  push_planned(core, plan, *args.src_cache, *args.dst_cache_key, "push_blocks");
}

}  // namespace kvsim::impl
