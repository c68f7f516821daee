#include "impl/cluster_links.h"

#include <algorithm>
#include <memory>

#include "impl/directory.h"
#include "impl/lock_guard.h"

namespace kvsim::impl {

namespace {

LLMStatusCode overall(const std::vector<LLMStatusCode>& codes) {
  for (LLMStatusCode c : codes) {
    if (c != LLMStatusCode::LLM_SUCCESS) return c;
  }
  return LLMStatusCode::LLM_SUCCESS;
}

}  // namespace

LinkOpLock::LinkOpLock(DataDistCore& core, std::int64_t timeout_ms) : core_(core) {
  if (core.version() != ApiVersion::kV1) return;
  Platform& platform = core.platform();
  constexpr Time kPsPerUs = kPsPerMs / 1000;
  const Time deadline = platform.now() + static_cast<Time>(timeout_ms) * kPsPerUs;
  while (core.link_op_busy) {
    const std::shared_ptr<Signal> done = core.link_op_done;
    const Time now = platform.now();
    if (now >= deadline || !done->wait_for(deadline - now)) {
      acquired_ = false;
      return;
    }
  }
  core.link_op_busy = true;
  core.link_op_done = platform.make_signal();
  owns_ = true;
}

LinkOpLock::~LinkOpLock() {
  if (!owns_) return;
  core_.link_op_busy = false;
  core_.link_op_done->set();
}

std::shared_ptr<Link> make_link(DataDistCore& owner, const DataDistCore& peer) {
  return std::make_shared<Link>(
      peer.cluster_id(), peer.device(),
      owner.platform().make_mutex("link c" + std::to_string(owner.cluster_id()) + "->c" +
                                  std::to_string(peer.cluster_id())));
}

void drop_peer_side(DataDistCore& core, std::uint64_t peer_cluster) {
  const std::shared_ptr<DataDistCore> peer = core.directory().find_cluster(peer_cluster);
  if (!peer) return;
  const auto it = peer->links().find(core.cluster_id());
  if (it == peer->links().end()) return;
  it->second->set_down();
  peer->links().erase(it);
}

LinkResult link_clusters(DataDistCore& core, const std::vector<LLMClusterInfo>& clusters,
                         std::int64_t timeout_ms) {
  check_uint32("timeout", timeout_ms);
  if (clusters.size() > kMaxClustersPerCall) {
    return {LLMStatusCode::LLM_CLUSTER_NUM_EXCEED_LIMIT, {}};
  }
  const LinkOpLock link_op(core, timeout_ms);
  if (!link_op.acquired()) return {LLMStatusCode::LLM_PROCESSING_LINK, {}};
  Platform& platform = core.platform();
  std::vector<LLMStatusCode> codes(clusters.size(), LLMStatusCode::LLM_SUCCESS);
  std::vector<std::shared_ptr<DataDistCore>> peers(clusters.size());
  Time duration = 0;
  for (std::size_t i = 0; i < clusters.size(); ++i) {
    const LLMClusterInfo& info = clusters[i];
    const std::uint64_t remote = info.remote_cluster_id().value_or(0);
    if (core.find_link(remote)) {
      codes[i] = LLMStatusCode::LLM_ALREADY_LINK;
      continue;
    }
    std::shared_ptr<DataDistCore> peer;
    if (!info.remote_ip_info_list().empty()) {
      peer = core.directory().find_listener(info.remote_ip_info_list().front());
    }
    if (!peer) {
      codes[i] = LLMStatusCode::LLM_LINK_FAILED;
      duration = std::max(duration, from_ms(static_cast<std::uint64_t>(timeout_ms)));
      continue;
    }
    duration = std::max(duration, 2 * platform.round_trip(core.device(), peer->device()));
    if (peer->cluster_id() != remote || peer.get() == &core) {
      codes[i] = LLMStatusCode::LLM_LINK_FAILED;
    } else if (peer->find_link(core.cluster_id())) {
      codes[i] = LLMStatusCode::LLM_ALREADY_LINK;
    } else {
      peers[i] = peer;
    }
  }
  platform.sleep(duration);
  for (std::size_t i = 0; i < clusters.size(); ++i) {
    if (!peers[i]) continue;
    DataDistCore& peer = *peers[i];
    // Linked meanwhile by another job, or the peer finalized while we waited.
    if (core.find_link(peer.cluster_id()) || peer.find_link(core.cluster_id())) {
      codes[i] = LLMStatusCode::LLM_ALREADY_LINK;
      continue;
    }
    if (!peer.initialized()) {
      codes[i] = LLMStatusCode::LLM_LINK_FAILED;
      continue;
    }
    core.links()[peer.cluster_id()] = make_link(core, peer);
    peer.links()[core.cluster_id()] = make_link(peer, core);
  }
  return {overall(codes), codes};
}

LinkResult unlink_clusters(DataDistCore& core, const std::vector<LLMClusterInfo>& clusters,
                           std::int64_t timeout_ms, bool force) {
  if (clusters.size() > kMaxClustersPerCall) {
    return {LLMStatusCode::LLM_CLUSTER_NUM_EXCEED_LIMIT, {}};
  }
  const LinkOpLock link_op(core, timeout_ms);
  if (!link_op.acquired()) return {LLMStatusCode::LLM_PROCESSING_LINK, {}};
  std::vector<LLMStatusCode> codes(clusters.size(), LLMStatusCode::LLM_SUCCESS);
  for (std::size_t i = 0; i < clusters.size(); ++i) {
    const std::uint64_t remote = clusters[i].remote_cluster_id().value_or(0);
    const std::shared_ptr<Link> link = core.find_link(remote);
    if (!link) {
      codes[i] = LLMStatusCode::LLM_NOT_YET_LINK;
      continue;
    }
    LockGuard lock(link->mutex());
    if (!link->up()) {
      codes[i] = LLMStatusCode::LLM_NOT_YET_LINK;
      continue;
    }
    link->set_down();
    core.links().erase(remote);
    if (!force) {
      core.platform().sleep(core.platform().round_trip(core.device(), link->peer_device()));
      drop_peer_side(core, remote);
    }
  }
  return {overall(codes), codes};
}

void drop_all_links(DataDistCore& core) {
  while (!core.links().empty()) {
    const std::shared_ptr<Link> link = core.links().begin()->second;
    LockGuard lock(link->mutex());
    link->set_down();
    core.links().erase(link->peer_cluster_id());
    drop_peer_side(core, link->peer_cluster_id());
  }
}

}  // namespace kvsim::impl
