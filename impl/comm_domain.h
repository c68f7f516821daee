// The HCCL comm-domain API of LLMDataDist (spec §4: link, unlink, query_register_mem_status):
// every member cluster calls link with the same name, cluster_rank_info and rank table; the
// domain forms in the background once all have called, and then every pair of members is linked
// exactly as link_clusters links two clusters (same Link objects, per-link mutex, §3.4).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "impl/data_dist_core.h"
#include "impl/link.h"
#include "impl/platform.h"
#include "impl/types.h"

namespace kvsim::impl {

/// link's cluster_rank_info: (cluster id, rank) in the caller's (dict insertion) order.
using ClusterRankInfo = std::vector<std::pair<std::uint64_t, std::uint32_t>>;

/// comm_name must be shorter than this (§4, hixl llm_datadist.py _MAX_CLUSTER_NAME).
inline constexpr std::size_t kMaxCommNameLength = 128;
/// Most members of one domain (§4: ≤4 nodes).
inline constexpr std::size_t kMaxCommMembers = 4;
/// Most comm domains per process (§4: ≤512 domains).
inline constexpr std::size_t kMaxCommDomains = 512;
/// Most domains of one process being set up at once (§4: ≤16 concurrent setups).
inline constexpr std::size_t kMaxConcurrentCommSetups = 16;

/// LLM_PARAM_INVALID unless comm_name (UTF-8) is non-empty and shorter than 128 characters (§4).
void check_comm_name(const std::string& comm_name);
/// LLM_PARAM_INVALID unless 1 < members ≤ 4, ranks ascend in the given order and no cluster id
/// repeats (the real Python's checks, in its order).
void check_cluster_rank_info(const ClusterRankInfo& info);

/// One member of a domain, resolved against the world through the rank table.
struct CommMember {
  std::uint64_t cluster_id = 0;
  std::uint32_t rank = 0;
  int device = -1;
  bool operator==(const CommMember& o) const {
    return cluster_id == o.cluster_id && rank == o.rank && device == o.device;
  }
};

/// A comm domain as the world sees it; every member's comm id refers to the same object.
struct CommDomain {
  std::string name;
  std::vector<CommMember> members;
  /// The members that have called link, by cluster id.
  std::map<std::uint64_t, std::weak_ptr<DataDistCore>> arrived;
  RegisterMemStatus status = RegisterMemStatus::PREPARING;
  /// Why the domain is FAILED, for tests and debugging (empty otherwise; the API gives only
  /// the status).
  std::string failure;
  /// Set when every member has arrived, or when the domain fails first.
  std::unique_ptr<Signal> all_arrived;
  /// The link ends the domain made, by (owner, peer) cluster: unlink takes down only these, not
  /// a link made since by link_clusters.
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::weak_ptr<Link>> links;
};

/// link(comm_name, cluster_rank_info, rank_table) (§4). Checks, before anything happens:
/// the arguments (check_comm_name, check_cluster_rank_info, parse_rank_table), that every rank of
/// cluster_rank_info is in the rank table with the device_ip of a device of this world, that this
/// cluster is a member and its rank is this process's device, and that no other member is
/// already linked to it, by link_clusters or by a comm id of this process that is not FAILED
/// (LLM_ALREADY_LINK; unlink the old comm id first). Limits: LLM_CLUSTER_NUM_EXCEED_LIMIT beyond
/// 512 domains, LLM_PROCESSING_LINK beyond 16 domains being set up ([I] codes). Returns the new
/// comm id (1, 2, ... per process) at once, without simulated time passing ([I], as the real
/// link, whose memory registration runs in a background task): the domain is PREPARING until
/// all members have called and two round trips (connect, exchange of registered memory) between
/// the farthest pair have passed, then OK with every pair linked. It FAILS if not every member
/// calls within the first caller's llm.LinkTotalTime (HCCL_CONNECT_TIMEOUT, 120 s, §5), if a
/// member calls with another cluster_rank_info or rank assignment, if a member unlinks or
/// finalizes first, or if two members got linked otherwise meanwhile.
std::uint64_t link_comm_domain(DataDistCore& core, const std::string& comm_name,
                               const ClusterRankInfo& cluster_rank_info,
                               const std::string& rank_table);

/// unlink(comm_id) (§4): LLM_NOT_YET_LINK for an unknown comm id ([I], the code the real
/// CommLinkManager gives an unknown id in query). A formed domain's links from this process are
/// taken down on both sides, each under its mutex as unlink_clusters does, with one round trip
/// to tell the farthest peer; a domain still PREPARING fails for the other members.
void unlink_comm_domain(DataDistCore& core, std::uint64_t comm_id);

/// query_register_mem_status(comm_id) (§4, §2.1): PREPARING, OK or FAILED; LLM_NOT_YET_LINK for
/// an unknown comm id.
RegisterMemStatus query_comm_domain(const DataDistCore& core, std::uint64_t comm_id);

/// Forgets every comm domain of a finalizing process; those still PREPARING fail for the other
/// members. Its links are dropped by drop_all_links.
void drop_all_comm_domains(DataDistCore& core);

}  // namespace kvsim::impl
