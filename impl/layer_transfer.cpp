#include "impl/layer_transfer.h"

#include <algorithm>

#include "impl/cluster_links.h"
#include "impl/copy_executor.h"
#include "impl/lock_guard.h"
#include "impl/remote_caches.h"

namespace kvsim::impl {

namespace {

// True if [addr, addr+len) lies inside a HOST cache that the peer got from allocate_cache.
bool in_peer_host_pool_cache(const DataDistCore& peer, std::uint64_t addr, std::uint64_t len) {
  for (const auto& [id, entry] : peer.caches().entries()) {
    if (entry.registered || entry.view.placement() != Placement::HOST) continue;
    const std::uint64_t size = entry.view.desc.size();
    for (std::uint64_t base : entry.view.tensor_addrs) {
      if (addr >= base && addr + len <= base + size) return true;
    }
  }
  return false;
}

// True if [addr, addr+len) is memory of the link's peer: its device's, or a host cache it got
// from allocate_cache.
bool peer_memory(const DataDistCore& core, const Link& link, const DataDistCore* peer,
                 std::uint64_t addr, std::uint64_t len) {
  const std::optional<MemoryLocation> where = core.platform().locate(addr, len);
  if (!where || peer == nullptr) return false;
  return where->placement == Placement::DEVICE ? where->device == link.peer_device()
                                               : in_peer_host_pool_cache(*peer, addr, len);
}

// The first of descs[first, last) whose destination is not the peer's memory, if any. A span
// that is peer memory as a whole holds only good destinations, so a layer's descriptors (one
// span per tensor) take a few checks, not one each; a bad span is halved to find the first.
std::optional<CopyDescriptor> outside_peer(const DataDistCore& core, const Link& link,
                                           const DataDistCore* peer,
                                           const std::vector<CopyDescriptor>& descs,
                                           std::size_t first, std::size_t last) {
  if (last - first > 8) {
    std::uint64_t lo = descs[first].dst_addr, hi = lo;
    bool wraps = false;  // a range past 2^64 is no memory: the single checks name it
    for (std::size_t i = first; i < last; ++i) {
      wraps = wraps || descs[i].length > UINT64_MAX - descs[i].dst_addr;
      lo = std::min(lo, descs[i].dst_addr);
      hi = std::max(hi, descs[i].dst_addr + descs[i].length);
    }
    if (!wraps && peer_memory(core, link, peer, lo, hi - lo)) return std::nullopt;
    const std::size_t mid = first + (last - first) / 2;
    if (auto bad = outside_peer(core, link, peer, descs, first, mid)) return bad;
    return outside_peer(core, link, peer, descs, mid, last);
  }
  for (std::size_t i = first; i < last; ++i) {
    if (!peer_memory(core, link, peer, descs[i].dst_addr, descs[i].length)) return descs[i];
  }
  return std::nullopt;
}

}  // namespace

LLMStatusCode transfer_layer(DataDistCore& core, const LayerCall& call,
                             const CallContext& context) {
  const Time start = core.platform().now();
  if (!core.initialized()) return LLMStatusCode::LLM_FAILED;
  if (call.transfer.tensor_num_per_layer == 0) return LLMStatusCode::LLM_PARAM_INVALID;
  LockGuard process_lock(core.transfer_mutex());
  if (core.caches().find(call.src_cache_id) == nullptr) {
    return LLMStatusCode::LLM_KV_CACHE_NOT_EXIST;
  }
  const std::shared_ptr<Link> link = core.find_link(call.dst_cluster_id);
  if (!link) return LLMStatusCode::LLM_NOT_YET_LINK;
  LockGuard link_lock(link->mutex());
  // An unlink that held the link mutex before us has taken the link down.
  if (!link->up() || link->register_status() != RegisterMemStatus::OK) {
    return LLMStatusCode::LLM_NOT_YET_LINK;
  }
  const CacheEntry* src = core.caches().find(call.src_cache_id);
  if (src == nullptr) return LLMStatusCode::LLM_KV_CACHE_NOT_EXIST;

  LayerTransfer layer = call.transfer;
  const CacheGeometry geometry = make_cache_geometry(src->view);
  std::vector<CopyDescriptor> descs;
  try {
    if (call.remote) {
      const std::optional<RemoteCacheInfo> remote =
          find_remote_cache(remote_cache_table(core, *link), call.remote->key);
      if (!remote) return LLMStatusCode::LLM_KV_CACHE_NOT_EXIST;
      RemoteLayerTarget target;
      target.dst_layer_index = call.remote->dst_layer_index;
      if (const auto* by_id = std::get_if<CacheKeyByIdAndIndex>(&call.remote->key)) {
        target.dst_batch_index = by_id->batch_index();
      }
      target.tensor_num_per_layer = layer.tensor_num_per_layer;
      target.dst_blocks = layer.dst_blocks;
      target.dst_block_memory_size = layer.dst_block_memory_size;
      layer.dst_addrs = resolve_remote_dst_addrs(geometry, remote->geometry, target);
    }
    descs = plan_layer_copy(geometry, layer);
  } catch (const LLMException& e) {
    return e.status_code();
  }

  // A peer that died holding the link: the puts fail at its NIC (its memory is gone, so the
  // destination check below cannot be made).
  std::string lost;
  if (const LLMStatusCode unusable = check_link_usable(*link, lost);
      unusable != LLMStatusCode::LLM_SUCCESS) {
    return unusable;
  }
  if (const LLMStatusCode gone = check_peer_alive(core, *link, lost);
      gone != LLMStatusCode::LLM_SUCCESS) {
    return gone;
  }
  const std::shared_ptr<DataDistCore> peer = peer_of(core, *link);
  if (const std::optional<CopyDescriptor> bad =
          outside_peer(core, *link, peer.get(), descs, 0, descs.size())) {
    const Diagnostic d =
        core.record(DiagnosticKind::kDstOutsidePeer,
                    "layer " + std::to_string(layer.layer_index) + ": destination [" +
                        std::to_string(bad->dst_addr) + ", +" + std::to_string(bad->length) +
                        ") is not memory of cluster " + std::to_string(call.dst_cluster_id) +
                        " (device " + std::to_string(link->peer_device()) + ")",
                    call.dst_cluster_id, context.task_id);
    if (context.task_log != nullptr) context.task_log->add(d);
    return LLMStatusCode::LLM_FAILED;
  }
  const CopyRun run =
      layer_destinations_disjoint(geometry, layer)
          ? run_disjoint_copies(core.platform(), core.device(),
                                {descs.size(), [&](std::size_t i) { return descs[i]; }},
                                start + core.sync_timeout(), core.wait_timeout_code())
          : run_copies(core.platform(), core.device(), descs, start + core.sync_timeout(),
                       core.wait_timeout_code());
  mark_transport_failure(core, *link, run.status, run.error);
  return run.status;
}

}  // namespace kvsim::impl
