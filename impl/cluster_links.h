// link_clusters / unlink_clusters (spec §4): per-cluster results, links on both sides, simulated
// set-up time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "impl/data_dist_core.h"
#include "impl/link.h"
#include "impl/types.h"

namespace kvsim::impl {

/// Most clusters per link_clusters / unlink_clusters call (§4, §6).
inline constexpr std::size_t kMaxClustersPerCall = 16;

/// (overall code, one code per cluster), as the Python API returns them.
using LinkResult = std::pair<LLMStatusCode, std::vector<LLMStatusCode>>;

/// Links to each cluster's server, the instance listening at its one remote_ip_info
/// (find_listener). v2 first requires a local_ip_info per cluster unless llm.LocalCommRes is
/// set and non-empty (LLMException(LLM_PARAM_INVALID), hixl v2/llm_datadist.py). Per cluster:
/// PARAM_INVALID unless exactly one remote_ip_info; ALREADY_LINK if this side already has a
/// link to it; LINK_FAILED if nobody listens there (after waiting `timeout_ms`) or the listener
/// is not remote_cluster_id (or this instance, or of the other backend). The comm backend gives
/// both sides a link, replacing one the server still holds for this client; the hixl backend
/// only the client's, so A→B and B→A coexist (link_msg_handler.cc, hixl_transfer_engine.cc). A
/// link takes two round trips (connect, then the exchange of registered memory, [I]); clusters
/// link in parallel, so the call lasts the longest of them. More than 16 clusters:
/// LLM_CLUSTER_NUM_EXCEED_LIMIT and nothing done. The overall code is the last per-cluster
/// failure, else SUCCESS. v1: only a DECODER links (LLM_PARAM_INVALID, []); see LinkOpLock.
LinkResult link_clusters(DataDistCore& core, const std::vector<LLMClusterInfo>& clusters,
                         std::int64_t timeout_ms);

/// Unlinks each cluster (v2, LinkMsgHandler::UnlinkCluster): waits for the link's mutex (a
/// per-layer transfer or a pull in progress finishes first, §3.4); without `force`, first tells
/// the server at the cluster's one remote_ip_info (one round trip; it drops its link to us):
/// PARAM_INVALID without exactly one, UNLINK_FAILED if nobody listens there (our link stays);
/// then drops this side's link. With `force` (and always on the hixl backend) only this side.
/// A cluster that is not linked gives SUCCESS. v1: NOT_YET_LINK without a link; see
/// LinkOpLock.
LinkResult unlink_clusters(DataDistCore& core, const std::vector<LLMClusterInfo>& clusters,
                           std::int64_t timeout_ms, bool force);

/// v1 only: link_clusters and unlink_clusters of one process exclude each other (any clusters).
/// A call waits at most `timeout_ms` MICROseconds for the one in progress, then returns
/// (LLM_PROCESSING_LINK, []) having done nothing. Source: hicann/ge
/// dflow/llm_datadist/v1/common/link_manager.cc, LinkManager::LinkClusters / UnlinkClusters:
/// `std::timed_mutex link_mtx_`, `try_lock_for(std::chrono::microseconds(timeout))` with the
/// timeout in ms (so µs, [R]). v2 (hicann/hixl src/llm_datadist/link_mgr/llm_link_manager.cc,
/// link_msg_handler.cc) has no such lock and never returns LLM_PROCESSING_LINK.
class LinkOpLock {
 public:
  LinkOpLock(DataDistCore& core, std::int64_t timeout_ms);
  ~LinkOpLock();
  LinkOpLock(const LinkOpLock&) = delete;
  LinkOpLock& operator=(const LinkOpLock&) = delete;
  /// False: v1 and the lock stayed busy until the deadline.
  bool acquired() const { return acquired_; }

 private:
  DataDistCore& core_;
  bool acquired_ = true;
  bool owns_ = false;
};

/// A new end of a link from `owner` to `peer`, with its own mutex.
std::shared_ptr<Link> make_link(DataDistCore& owner, const DataDistCore& peer);

/// Takes down and forgets the peer's end of its link to `core`, if any.
void drop_peer_side(DataDistCore& core, std::uint64_t peer_cluster);

/// Removes every link of a finalizing process on both sides, each under its mutex.
void drop_all_links(DataDistCore& core);
/// The process of `core` died holding its links: its own ends go, and each peer's end is marked
/// lost with `why` (Link::peer_lost), as nothing tells the peers.
void abandon_all_links(DataDistCore& core, const std::string& why);
/// A transfer over `link` whose peer is lost: one round trip passes (the remote NIC's refusal
/// comes back), then the copy failure status (kCopyFailedStatus) with the reason in `error`.
/// LLM_SUCCESS, at once, while the peer lives.
LLMStatusCode check_peer_alive(DataDistCore& core, const Link& link, std::string& error);
/// A transfer that ended with `status` over `link`: a timeout or a failed copy leaves the link
/// unusable until it is unlinked and linked again (Link::transport_failure); other statuses
/// change nothing.
void mark_transport_failure(DataDistCore& core, Link& link, LLMStatusCode status,
                            const std::string& error);
/// LLM_FAILED, with the reason and the way out in `error`, on a link a transport failure left
/// unusable; LLM_SUCCESS otherwise. Checked before a transfer posts anything.
LLMStatusCode check_link_usable(const Link& link, std::string& error);

}  // namespace kvsim::impl
