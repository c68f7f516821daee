#include "impl/comm_domain.h"

#include <algorithm>
#include <set>

#include "impl/cluster_links.h"
#include "impl/directory.h"
#include "impl/lock_guard.h"
#include "impl/rank_table.h"

namespace kvsim::impl {

namespace {

// The members of cluster_rank_info resolved through the rank table to devices of this world.
std::vector<CommMember> resolve_members(const Platform& platform, const ClusterRankInfo& info,
                                        const std::vector<RankTableDevice>& table) {
  std::vector<CommMember> members;
  std::set<int> devices;
  for (const auto& [cluster, rank] : info) {
    const auto it =
        std::find_if(table.begin(), table.end(),
                     [rank = rank](const RankTableDevice& d) { return d.rank_id == rank; });
    if (it == table.end()) {
      throw_param_invalid("rank_table", "has no device with rank_id " + std::to_string(rank) +
                                            " (cluster " + std::to_string(cluster) + ")");
    }
    const int device = platform.device_by_ip(it->device_ip);
    if (device < 0) {
      throw_param_invalid("rank_table.device_ip", it->device_ip + " (rank " + std::to_string(rank) +
                                                      ") is not a device of this world");
    }
    if (!devices.insert(device).second) {
      throw_param_invalid("rank_table.device_ip", it->device_ip + " (rank " + std::to_string(rank) +
                                                      ") is the device of another rank too");
    }
    members.push_back(CommMember{cluster, rank, device});
  }
  return members;
}

// Two round trips between the farthest pair of members: connect, then exchange the registered
// memory (as link_clusters, [I]).
Time setup_time(const Platform& platform, const std::vector<CommMember>& members) {
  Time rtt = 0;
  for (const CommMember& a : members) {
    for (const CommMember& b : members)
      rtt = std::max(rtt, platform.round_trip(a.device, b.device));
  }
  return 2 * rtt;
}

void fail(Directory& directory, CommDomain& domain, std::string why) {
  if (domain.status != RegisterMemStatus::PREPARING) return;
  domain.status = RegisterMemStatus::FAILED;
  domain.failure = std::move(why);
  auto& forming = directory.forming_comm_domains();
  const auto it = forming.find(domain.name);
  if (it != forming.end() && it->second.get() == &domain) forming.erase(it);
  domain.all_arrived->set();
}

std::shared_ptr<DataDistCore> live_member(const CommDomain& domain, std::uint64_t cluster) {
  const auto it = domain.arrived.find(cluster);
  if (it == domain.arrived.end()) return nullptr;
  std::shared_ptr<DataDistCore> core = it->second.lock();
  return core && core->initialized() ? core : nullptr;
}

// Links every pair of members (the domain's memory has been exchanged), or fails the domain if a
// member is gone, a pair got linked otherwise meanwhile, or the path between a pair is down (the
// devices' NICs cannot connect, as for link_clusters, [I]).
void form(const Platform& platform, Directory& directory, CommDomain& domain) {
  std::vector<std::shared_ptr<DataDistCore>> cores;
  for (const CommMember& m : domain.members) {
    std::shared_ptr<DataDistCore> core = live_member(domain, m.cluster_id);
    if (!core) {
      return fail(directory, domain, "cluster " + std::to_string(m.cluster_id) + " left");
    }
    cores.push_back(std::move(core));
  }
  for (std::size_t i = 0; i < cores.size(); ++i) {
    for (std::size_t j = i + 1; j < cores.size(); ++j) {
      if (!platform.path_up(cores[i]->device(), cores[j]->device())) {
        return fail(directory, domain,
                    "the path between clusters " + std::to_string(cores[i]->cluster_id()) +
                        " and " + std::to_string(cores[j]->cluster_id()) + " is down");
      }
      if (cores[i]->find_link(cores[j]->cluster_id()) ||
          cores[j]->find_link(cores[i]->cluster_id())) {
        return fail(directory, domain,
                    "clusters " + std::to_string(cores[i]->cluster_id()) + " and " +
                        std::to_string(cores[j]->cluster_id()) + " were linked meanwhile");
      }
    }
  }
  for (std::size_t i = 0; i < cores.size(); ++i) {
    for (std::size_t j = i + 1; j < cores.size(); ++j) {
      for (const auto& [a, b] : {std::pair{cores[i], cores[j]}, std::pair{cores[j], cores[i]}}) {
        std::shared_ptr<Link> link = make_link(*a, *b);
        domain.links[{a->cluster_id(), b->cluster_id()}] = link;
        a->links()[b->cluster_id()] = std::move(link);
      }
    }
  }
  domain.status = RegisterMemStatus::OK;
  auto& forming = directory.forming_comm_domains();
  const auto it = forming.find(domain.name);
  if (it != forming.end() && it->second.get() == &domain) forming.erase(it);
}

// The background set-up of a domain, started by its first member: wait for the others, then
// connect and exchange memory.
void run_setup(Platform& platform, Directory& directory, std::shared_ptr<CommDomain> domain,
               Time timeout) {
  const bool all = domain->all_arrived->wait_for(timeout);
  if (domain->status != RegisterMemStatus::PREPARING) return;
  if (!all) {
    return fail(directory, *domain,
                std::to_string(domain->arrived.size()) + " of " +
                    std::to_string(domain->members.size()) +
                    " members called link within llm.LinkTotalTime");
  }
  platform.sleep(setup_time(platform, domain->members));
  if (domain->status != RegisterMemStatus::PREPARING) return;
  form(platform, directory, *domain);
}

const std::shared_ptr<CommDomain>& known_domain(const DataDistCore& core, std::uint64_t comm_id) {
  const auto it = core.comm_domains().find(comm_id);
  if (it == core.comm_domains().end()) {
    throw LLMException(LLMStatusCode::LLM_NOT_YET_LINK, "comm_id",
                       "no comm domain " + std::to_string(comm_id) + " in this process");
  }
  return it->second;
}

// The caller must not already be linked (by link_clusters or a live domain) to another member.
void check_not_linked(const DataDistCore& core, const std::vector<CommMember>& members) {
  for (const CommMember& m : members) {
    if (m.cluster_id == core.cluster_id()) continue;
    bool linked = core.find_link(m.cluster_id) != nullptr;
    for (const auto& [id, domain] : core.comm_domains()) {
      if (domain->status == RegisterMemStatus::FAILED) continue;
      for (const CommMember& other : domain->members) linked |= other.cluster_id == m.cluster_id;
    }
    if (linked) {
      throw LLMException(LLMStatusCode::LLM_ALREADY_LINK, "cluster_rank_info",
                         "cluster " + std::to_string(m.cluster_id) + " is already linked");
    }
  }
}

}  // namespace

void check_comm_name(const std::string& comm_name) {
  if (comm_name.empty()) throw_param_invalid("comm_name", "can not be empty");
  // Python's len(): characters, i.e. UTF-8 bytes that do not continue a character.
  const auto length = std::count_if(comm_name.begin(), comm_name.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  });
  if (static_cast<std::size_t>(length) >= kMaxCommNameLength) {
    throw_param_invalid("comm_name", "length should be smaller than 128");
  }
}

void check_cluster_rank_info(const ClusterRankInfo& info) {
  if (info.size() > kMaxCommMembers) {
    throw_param_invalid("cluster_rank_info", "size can not be greater than 4");
  }
  if (info.size() <= 1)
    throw_param_invalid("cluster_rank_info", "cluster num must be bigger than 1");
  for (std::size_t i = 1; i < info.size(); ++i) {
    if (info[i].second < info[i - 1].second) {
      throw_param_invalid("cluster_rank_info", "rank in cluster_rank_info must be ordered");
    }
  }
  std::set<std::uint64_t> ids;
  for (const auto& entry : info) {
    if (!ids.insert(entry.first).second) {
      throw_param_invalid("cluster_rank_info",
                          "cluster id " + std::to_string(entry.first) + " can not be duplicated");
    }
  }
}

std::uint64_t link_comm_domain(DataDistCore& core, const std::string& comm_name,
                               const ClusterRankInfo& cluster_rank_info,
                               const std::string& rank_table) {
  check_comm_name(comm_name);
  check_cluster_rank_info(cluster_rank_info);
  Platform& platform = core.platform();
  const std::vector<CommMember> members =
      resolve_members(platform, cluster_rank_info, parse_rank_table(rank_table));
  const auto self = std::find_if(members.begin(), members.end(), [&](const CommMember& m) {
    return m.cluster_id == core.cluster_id();
  });
  if (self == members.end()) {
    throw_param_invalid("cluster_rank_info",
                        "does not contain this cluster id " + std::to_string(core.cluster_id()));
  }
  if (self->device != core.device()) {
    throw_param_invalid(
        "rank_table.device_ip",
        "rank " + std::to_string(self->rank) + " of cluster " + std::to_string(core.cluster_id()) +
            " is " + platform.device_ip(self->device) + ", not this process's device " +
            std::to_string(core.device()) + " (" + platform.device_ip(core.device()) + ")");
  }
  if (core.comm_domains().size() >= kMaxCommDomains) {
    throw LLMException(LLMStatusCode::LLM_CLUSTER_NUM_EXCEED_LIMIT, "link",
                       "this process already has 512 comm domains");
  }
  const auto preparing = std::count_if(
      core.comm_domains().begin(), core.comm_domains().end(),
      [](const auto& entry) { return entry.second->status == RegisterMemStatus::PREPARING; });
  if (static_cast<std::size_t>(preparing) >= kMaxConcurrentCommSetups) {
    throw LLMException(LLMStatusCode::LLM_PROCESSING_LINK, "link",
                       "16 comm domains of this process are being set up; retry later");
  }
  check_not_linked(core, members);

  Directory& directory = core.directory();
  std::shared_ptr<CommDomain>& slot = directory.forming_comm_domains()[comm_name];
  std::shared_ptr<CommDomain> domain = slot;
  if (!domain) {
    domain = std::make_shared<CommDomain>();
    domain->name = comm_name;
    domain->members = members;
    domain->all_arrived = platform.make_signal();
    slot = domain;
    const Time timeout = from_ms(std::uint64_t{core.options().link_total_time_s} * 1000);
    platform.spawn("comm_domain_c" + std::to_string(core.cluster_id()),
                   [&platform, &directory, domain, timeout] {
                     run_setup(platform, directory, domain, timeout);
                   });
  } else if (domain->members != members) {
    fail(directory, *domain,
         "cluster " + std::to_string(core.cluster_id()) +
             " called link with another cluster_rank_info or rank table");
  }
  domain->arrived[core.cluster_id()] = directory.find_cluster(core.cluster_id());
  if (domain->arrived.size() == domain->members.size()) domain->all_arrived->set();
  core.set_called_link();
  const std::uint64_t comm_id = core.next_comm_id();
  core.comm_domains()[comm_id] = domain;
  return comm_id;
}

void unlink_comm_domain(DataDistCore& core, std::uint64_t comm_id) {
  const std::shared_ptr<CommDomain> domain = known_domain(core, comm_id);
  core.comm_domains().erase(comm_id);
  fail(core.directory(), *domain,
       "cluster " + std::to_string(core.cluster_id()) + " unlinked before the domain formed");
  if (domain->status != RegisterMemStatus::OK) return;
  Platform& platform = core.platform();
  std::vector<std::uint64_t> peers;
  Time rtt = 0;
  for (const CommMember& m : domain->members) {
    if (m.cluster_id == core.cluster_id()) continue;
    const std::shared_ptr<Link> link = core.find_link(m.cluster_id);
    const auto made = domain->links.find({core.cluster_id(), m.cluster_id});
    if (!link || made == domain->links.end() || made->second.lock() != link) continue;
    LockGuard lock(link->mutex());
    if (!link->up()) continue;
    link->set_down();
    core.links().erase(m.cluster_id);
    peers.push_back(m.cluster_id);
    rtt = std::max(rtt, platform.round_trip(core.device(), link->peer_device()));
  }
  platform.sleep(rtt);
  for (std::uint64_t peer : peers) {
    const auto made = domain->links.find({peer, core.cluster_id()});
    const std::shared_ptr<DataDistCore> other = core.directory().find_cluster(peer);
    if (other && made != domain->links.end() &&
        made->second.lock() == other->find_link(core.cluster_id())) {
      drop_peer_side(core, peer);
    }
  }
}

RegisterMemStatus query_comm_domain(const DataDistCore& core, std::uint64_t comm_id) {
  return known_domain(core, comm_id)->status;
}

void drop_all_comm_domains(DataDistCore& core) {
  for (const auto& [id, domain] : core.comm_domains()) {
    fail(core.directory(), *domain,
         "cluster " + std::to_string(core.cluster_id()) + " finalized before the domain formed");
  }
  core.comm_domains().clear();
}

}  // namespace kvsim::impl
