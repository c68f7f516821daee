// link_clusters / unlink_clusters (spec §4): per-cluster results, links on both sides, simulated
// set-up time.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "impl/data_dist_core.h"
#include "impl/types.h"

namespace kvsim::impl {

/// Most clusters per link_clusters / unlink_clusters call (§4, §6).
inline constexpr std::size_t kMaxClustersPerCall = 16;

/// (overall code, one code per cluster), as the Python API returns them.
using LinkResult = std::pair<LLMStatusCode, std::vector<LLMStatusCode>>;

/// Links to each cluster's server, found by its first remote_ip_info among the world's listeners.
/// Per cluster: ALREADY_LINK if either side already has the link; LINK_FAILED if no server
/// listens there (after waiting `timeout_ms`, the connection retries running out) or the server's
/// cluster id is not remote_cluster_id or is this one. A link takes two round trips (connect,
/// then the exchange of registered memory, [I]); clusters link in parallel, so the call lasts
/// the longest of them. More than 16 clusters: LLM_CLUSTER_NUM_EXCEED_LIMIT and nothing done.
/// The overall code is the first per-cluster failure, else SUCCESS ([I]). v1: see LinkOpLock.
LinkResult link_clusters(DataDistCore& core, const std::vector<LLMClusterInfo>& clusters,
                         std::int64_t timeout_ms);

/// Unlinks each cluster: NOT_YET_LINK if there is no link; otherwise waits for the link's mutex
/// (a per-layer transfer or a pull in progress finishes first, §3.4), takes the link down, and
/// unless `force` tells the peer (one round trip), which drops its side too. v1: see
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

}  // namespace kvsim::impl
