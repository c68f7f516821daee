#include "impl/cluster_links.h"

#include <algorithm>
#include <memory>

#include "impl/copy_executor.h"
#include "impl/directory.h"
#include "impl/listen_address.h"
#include "impl/lock_guard.h"

namespace kvsim::impl {

namespace {

// LLMLinkManager::LinkClusters / UnlinkClusters: the last failure in list order, else SUCCESS.
LLMStatusCode overall(const std::vector<LLMStatusCode>& codes) {
  LLMStatusCode ret = LLMStatusCode::LLM_SUCCESS;
  for (LLMStatusCode c : codes) {
    if (c != LLMStatusCode::LLM_SUCCESS) ret = c;
  }
  return ret;
}

// A device of `node`, to time a message to its host.
int node_device(const Platform& platform, int node) {
  for (int d = 0; d < platform.device_count(); ++d) {
    if (platform.node_of(d) == node) return d;
  }
  return 0;
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
  if (core.version() == ApiVersion::kV1 && core.role() != LLMRole::DECODER) {
    // hicann/ge dflow/llm_datadist/v1/llm_datadist.cc Impl::LinkClusters: v1 links are made by
    // the decoder towards its prompts.
    return {LLMStatusCode::LLM_PARAM_INVALID, {}};
  }
  if (core.front_end() == FrontEnd::kPython && core.version() == ApiVersion::kV2 &&
      (!core.options().local_comm_res || core.options().local_comm_res->empty())) {
    for (const LLMClusterInfo& info : clusters) {
      if (info.local_ip_info_list().empty()) {
        throw_param_invalid("clusters",
                            "local_ip_info_list is empty. Call append_local_ip_info to add "
                            "local_ip_info when local_comm_res option is unspecified or empty.");
      }
    }
  }
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
    if (info.remote_ip_info_list().size() != 1) {
      codes[i] = LLMStatusCode::LLM_PARAM_INVALID;  // "remote_ip_infos size != 1 is unsupported."
      continue;
    }
    // LinkMsgHandler::GenerateLocalCommRes: without llm.LocalCommRes and without a listen address
    // to make it from, the comm resource comes from the one local_ip_info (the C++ API; Python
    // checks up front, above).
    if (core.front_end() == FrontEnd::kCpp && !core.hixl() &&
        (!core.options().local_comm_res || core.options().local_comm_res->empty()) &&
        !core.options().listen_ip_info && info.local_ip_info_list().size() != 1) {
      codes[i] = LLMStatusCode::LLM_PARAM_INVALID;
      continue;
    }
    // The client's own entity for the server: LinkMsgHandler's ExchangeInfoProcess refuses.
    if (core.find_link(remote)) {
      codes[i] = LLMStatusCode::LLM_ALREADY_LINK;
      continue;
    }
    const std::shared_ptr<DataDistCore> peer =
        find_listener(core, info.remote_ip_info_list().front());
    if (!peer) {
      codes[i] = LLMStatusCode::LLM_LINK_FAILED;
      duration = std::max(duration, from_ms(static_cast<std::uint64_t>(timeout_ms)));
      continue;
    }
    // The handshake goes over the hosts' network, but the link itself is a connection between
    // the two devices' NICs (HCCL over RoCE; hixl link_msg_handler.cc LinkCluster): with a link
    // of that path down the connection cannot be made, and the call waits its timeout ([I]).
    if (!platform.path_up(core.device(), peer->device())) {
      codes[i] = LLMStatusCode::LLM_LINK_FAILED;
      duration = std::max(duration, from_ms(static_cast<std::uint64_t>(timeout_ms)));
      continue;
    }
    duration = std::max(duration, 2 * platform.round_trip(core.device(), peer->device()));
    if (peer->cluster_id() != remote || peer.get() == &core || peer->hixl() != core.hixl()) {
      codes[i] = LLMStatusCode::LLM_LINK_FAILED;
    } else {
      peers[i] = peer;
    }
  }
  platform.sleep(duration);
  bool broken = false;
  for (std::size_t i = 0; i < clusters.size(); ++i) {
    if (!peers[i]) continue;
    DataDistCore& peer = *peers[i];
    if (core.find_link(peer.cluster_id())) {  // linked meanwhile by another job
      codes[i] = LLMStatusCode::LLM_ALREADY_LINK;
      continue;
    }
    if (!peer.initialized()) {
      codes[i] = LLMStatusCode::LLM_LINK_FAILED;
      continue;
    }
    if (!platform.path_up(core.device(), peer.device())) {  // the path went down meanwhile
      codes[i] = LLMStatusCode::LLM_LINK_FAILED;
      broken = true;
      continue;
    }
    core.links()[peer.cluster_id()] = make_link(core, peer);
    // The comm backend makes the server's entity too, replacing one the client no longer has
    // (exchange_info.force_link). The hixl backend's links are the client's alone
    // (HixlTransferEngine::LinkCluster), so both directions may exist at once.
    if (!core.hixl()) {
      drop_peer_side(core, peer.cluster_id());
      peer.links()[core.cluster_id()] = make_link(peer, core);
    }
  }
  // A connection that broke is waited for until the timeout, as one that never came.
  const Time timeout = from_ms(static_cast<std::uint64_t>(timeout_ms));
  if (broken && timeout > duration) platform.sleep(timeout - duration);
  return {overall(codes), codes};
}

LinkResult unlink_clusters(DataDistCore& core, const std::vector<LLMClusterInfo>& clusters,
                           std::int64_t timeout_ms, bool force) {
  if (clusters.size() > kMaxClustersPerCall) {
    return {LLMStatusCode::LLM_CLUSTER_NUM_EXCEED_LIMIT, {}};
  }
  const LinkOpLock link_op(core, timeout_ms);
  if (!link_op.acquired()) return {LLMStatusCode::LLM_PROCESSING_LINK, {}};
  Platform& platform = core.platform();
  std::vector<LLMStatusCode> codes(clusters.size(), LLMStatusCode::LLM_SUCCESS);
  for (std::size_t i = 0; i < clusters.size(); ++i) {
    const std::uint64_t remote = clusters[i].remote_cluster_id().value_or(0);
    const std::shared_ptr<Link> link = core.find_link(remote);
    if (core.version() == ApiVersion::kV1) {
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
        platform.sleep(platform.round_trip(core.device(), link->peer_device()));
        drop_peer_side(core, remote);
      }
      continue;
    }
    // v2, LinkMsgHandler::UnlinkCluster: without force, tell the server at remote_ip_info that
    // listens there first (kDisconnect: it destroys its entity for us); a server that cannot be
    // reached leaves our entity as it is. HixlTransferEngine::UnlinkClusters ignores force and
    // disconnects only its own side. Unlinking what is not linked succeeds (DestroyEntity of an
    // unknown entity returns SUCCESS).
    std::unique_ptr<LockGuard> lock;
    if (link) lock = std::make_unique<LockGuard>(link->mutex());
    if (!force && !core.hixl()) {
      if (clusters[i].remote_ip_info_list().size() != 1) {
        codes[i] = LLMStatusCode::LLM_PARAM_INVALID;
        continue;
      }
      const IpInfo& target = clusters[i].remote_ip_info_list().front();
      const std::shared_ptr<DataDistCore> server = find_listener(core, target);
      if (!server) {
        const int node = node_of_address(platform, target.ip, core.node());
        // A host without the listener refuses at once; an address nobody has times out.
        platform.sleep(node >= 0 ? platform.round_trip(core.device(), node_device(platform, node))
                                 : from_ms(static_cast<std::uint64_t>(timeout_ms)));
        codes[i] = LLMStatusCode::LLM_UNLINK_FAILED;
        continue;
      }
      platform.sleep(platform.round_trip(core.device(), server->device()));
      drop_peer_side(core, server->cluster_id());
    }
    if (link && link->up()) {
      link->set_down();
      core.links().erase(remote);
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

void abandon_all_links(DataDistCore& core, const std::string& why) {
  for (const auto& [peer_cluster, link] : core.links()) {
    link->set_down();
    const std::shared_ptr<DataDistCore> peer = core.directory().find_cluster(peer_cluster);
    if (!peer) continue;
    const auto it = peer->links().find(core.cluster_id());
    if (it != peer->links().end()) it->second->set_peer_lost(why);
  }
  core.links().clear();
}

LLMStatusCode check_peer_alive(DataDistCore& core, const Link& link, std::string& error) {
  if (link.peer_lost().empty()) return LLMStatusCode::LLM_SUCCESS;
  Platform& platform = core.platform();
  platform.sleep(platform.round_trip(core.device(), link.peer_device()));
  error = link.peer_lost();
  return kCopyFailedStatus;
}

// The library's status table: a pull_cache, pull_blocks or transfer_cache_async that fails with
// LLM_TIMEOUT leaves its link unrecoverable until it is linked again (hixl
// docs/zh/api/python/LLMStatusCode.md, LLM_TIMEOUT row; docs/zh/api/cpp/LLM-DataDist-error-code.md,
// LLM_WAIT_PROC_TIMEOUT row). The comm-domain channel does the same on any fatal transport error
// (src/llm_datadist/adxl/comm_channel.cc CommChannel::FailChannel marks it unavailable,
// adxl_utils.cc IsLinkFatal), so a failed copy counts too.
void mark_transport_failure(DataDistCore& core, Link& link, LLMStatusCode status,
                            const std::string& error) {
  if (status != LLMStatusCode::LLM_TIMEOUT && status != LLMStatusCode::LLM_WAIT_PROCESS_TIMEOUT &&
      status != kCopyFailedStatus) {
    return;
  }
  if (!link.transport_failure().empty()) return;
  link.set_transport_failure(std::string(to_string(status)) + " at t=" +
                             std::to_string(static_cast<double>(core.platform().now()) / 1e12) +
                             " s" + (error.empty() ? std::string() : " (" + error + ")"));
}

// A later transfer on such a link fails at once: CommChannel::CheckAvailableLocked returns
// FAILED ("Channel is unavailable due to a previous transport failure"), which is LLM_FAILED
// here ([I]: the Python status of that path is not documented).
LLMStatusCode check_link_usable(const Link& link, std::string& error) {
  if (link.transport_failure().empty()) return LLMStatusCode::LLM_SUCCESS;
  error = "the link to cluster " + std::to_string(link.peer_cluster_id()) +
          " is unavailable after an earlier transport failure, " + link.transport_failure() +
          "; unlink_clusters and link_clusters again to use it";
  return LLMStatusCode::LLM_FAILED;
}

}  // namespace kvsim::impl
