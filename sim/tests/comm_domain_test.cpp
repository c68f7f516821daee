// The comm-domain API on the world (spec §4: link, unlink, query_register_mem_status): the
// rendezvous in simulated time, its timeout, every validation rule with its status, pulls over a
// formed domain with real bytes, and its interplay with unlink, switch_role and finalize.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "impl/comm_domain.h"
#include "impl/data_dist_core.h"
#include "impl/tests/expect_error.h"
#include "sim/tests/impl_world_support.h"

namespace kvsim::sim::testing {
namespace {

using impl::ClusterRankInfo;
using impl::LLMRole;
using impl::LLMStatusCode;
using impl::RegisterMemStatus;
using impl::testing::Raises;
using impl::testing::RaisesLLM;
using impl::testing::RaisesParamInvalid;

constexpr Time kSecond = 1'000'000'000'000ULL;
// The driver sees a job's work done at time T once it has run past T (sleep(d) stops before
// the processes due at its end), hence the checks 1 ps after each boundary.
constexpr Time kPs = 1;

class CommDomains : public ImplWorld {
 protected:
  /// P (cluster 1, device 0) and D (cluster 2, device 8).
  void pair(std::map<std::string, std::string> extra = {}) {
    p_ = make_dist(LLMRole::PROMPT, 1, 0, false, extra);
    d_ = make_dist(LLMRole::DECODER, 2, 8, false, extra);
  }
  /// Both of the pair call link("pd", {1:0, 2:1}) and the domain forms.
  std::pair<std::uint64_t, std::uint64_t> link_pair() {
    const std::string table = rank_table({0, 8});
    const std::uint64_t p = p_->link("pd", kPd, table);
    const std::uint64_t d = d_->link("pd", kPd, table);
    platform_.sleep(2 * platform_.round_trip(0, 8) + kPs);
    EXPECT_EQ(p_->query_register_mem_status(p), RegisterMemStatus::OK);
    return {p, d};
  }

  /// Why a comm id of `dist` failed.
  static std::string failure(const impl::LLMDataDist& dist, std::uint64_t comm_id) {
    return dist.core()->comm_domains().at(comm_id)->failure;
  }

  const ClusterRankInfo kPd{{1, 0}, {2, 1}};
  std::unique_ptr<impl::LLMDataDist> p_;
  std::unique_ptr<impl::LLMDataDist> d_;
};

TEST_F(CommDomains, TwoMembersFormAfterBothCalledAndTwoRoundTrips) {
  pair();
  const std::string table = rank_table({0, 8});
  const Time t0 = platform_.now();
  const std::uint64_t p_id = p_->link("pd", kPd, table);
  EXPECT_EQ(p_id, 1u);
  EXPECT_EQ(platform_.now(), t0);  // link returns at once
  EXPECT_EQ(p_->query_register_mem_status(p_id), RegisterMemStatus::PREPARING);
  platform_.sleep(kSecond);  // D has not called yet
  EXPECT_EQ(p_->query_register_mem_status(p_id), RegisterMemStatus::PREPARING);
  EXPECT_FALSE(p_->core()->find_link(2));
  const Time t_d = platform_.now();
  const std::uint64_t d_id = d_->link("pd", kPd, table);
  EXPECT_EQ(d_id, 1u);
  const Time setup = 2 * platform_.round_trip(0, 8);
  platform_.sleep(setup - kPs);
  EXPECT_EQ(d_->query_register_mem_status(d_id), RegisterMemStatus::PREPARING);
  platform_.sleep(2 * kPs);
  EXPECT_EQ(platform_.now(), t_d + setup + kPs);
  EXPECT_EQ(p_->query_register_mem_status(p_id), RegisterMemStatus::OK);
  EXPECT_EQ(d_->query_register_mem_status(d_id), RegisterMemStatus::OK);
  EXPECT_TRUE(p_->core()->find_link(2));
  EXPECT_TRUE(d_->core()->find_link(1));
  EXPECT_TRUE(world_.directory().forming_comm_domains().empty());
}

TEST_F(CommDomains, PullBlocksOverTheDomainThenUnlinkGivesNotYetLink) {
  pair();
  const auto desc = int8_desc(2, 8, 256);
  const TestCache remote = register_cache(*p_, 0, desc, 1, true, impl::BlocksCacheKey{1, 0});
  const TestCache local = register_cache(*d_, 8, desc, 2, true);
  const auto before = snapshot(local);
  const auto ids = link_pair();
  const std::uint64_t p_id = ids.first, d_id = ids.second;
  d_->cache_manager().pull_blocks(impl::BlocksCacheKey{1, 0}, local.view, {0, 1, 5}, {3, 4, 7});
  for (std::size_t i = 0; i < 2; ++i) {
    std::vector<std::uint8_t> expected(
        before.begin() + static_cast<std::ptrdiff_t>(i * 2048),
        before.begin() + static_cast<std::ptrdiff_t>((i + 1) * 2048));
    const auto src = read(remote.addrs[i], 2048);
    splice(expected, 3 * 256, src, 0, 512);
    splice(expected, 7 * 256, src, 5 * 256, 256);
    EXPECT_EQ(read(local.addrs[i], 2048), expected);
  }
  const Time t0 = platform_.now();
  d_->unlink(d_id);
  EXPECT_EQ(platform_.now(), t0 + platform_.round_trip(8, 0));
  EXPECT_FALSE(p_->core()->find_link(2));
  EXPECT_TRUE(RaisesLLM(
      [&] {
        d_->cache_manager().pull_blocks(impl::BlocksCacheKey{1, 0}, local.view, {0}, {0});
      },
      LLMStatusCode::LLM_NOT_YET_LINK, "src_cache_key"));
  EXPECT_TRUE(RaisesLLM([&] { d_->query_register_mem_status(d_id); },
                        LLMStatusCode::LLM_NOT_YET_LINK, "comm_id"));
  EXPECT_TRUE(RaisesLLM([&] { d_->unlink(d_id); }, LLMStatusCode::LLM_NOT_YET_LINK, "comm_id"));
  p_->unlink(p_id);  // its links are already gone; the comm id is forgotten
  EXPECT_TRUE(p_->core()->comm_domains().empty());
}

TEST_F(CommDomains, FourMembersLinkEveryPair) {
  const std::vector<int> devices{0, 1, 8, 9};
  std::vector<std::unique_ptr<impl::LLMDataDist>> dists;
  ClusterRankInfo info;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    dists.push_back(make_dist(LLMRole::MIX, 10 + i, devices[i], false));
    info.emplace_back(10 + i, static_cast<std::uint32_t>(i));
  }
  const std::string table = rank_table(devices);
  std::vector<std::uint64_t> ids;
  for (auto& d : dists) {
    ids.push_back(d->link("four", info, table));
    EXPECT_EQ(d->query_register_mem_status(ids.back()), RegisterMemStatus::PREPARING);
  }
  Time rtt = 0;
  for (int a : devices) {
    for (int b : devices) rtt = std::max(rtt, platform_.round_trip(a, b));
  }
  platform_.sleep(2 * rtt - kPs);
  EXPECT_EQ(dists[0]->query_register_mem_status(ids[0]), RegisterMemStatus::PREPARING);
  platform_.sleep(2 * kPs);
  for (std::size_t i = 0; i < dists.size(); ++i) {
    EXPECT_EQ(dists[i]->query_register_mem_status(ids[i]), RegisterMemStatus::OK);
    EXPECT_EQ(dists[i]->core()->links().size(), 3u);
  }
  dists[1]->unlink(ids[1]);  // the other three stay linked to each other
  EXPECT_EQ(dists[0]->core()->links().size(), 2u);
  EXPECT_TRUE(dists[2]->core()->find_link(13));
  EXPECT_FALSE(dists[2]->core()->find_link(11));
}

TEST_F(CommDomains, AMemberThatNeverCallsFailsTheDomainAfterLinkTotalTime) {
  pair();
  const std::string table = rank_table({0, 8});
  const std::uint64_t id = p_->link("pd", kPd, table);
  platform_.sleep(120 * kSecond - kPs);  // HCCL_CONNECT_TIMEOUT, llm.LinkTotalTime unset (§5)
  EXPECT_EQ(p_->query_register_mem_status(id), RegisterMemStatus::PREPARING);
  platform_.sleep(2 * kPs);
  EXPECT_EQ(p_->query_register_mem_status(id), RegisterMemStatus::FAILED);
  EXPECT_EQ(failure(*p_, id), "1 of 2 members called link within llm.LinkTotalTime");
  EXPECT_FALSE(p_->core()->any_link());
  // Too late: D starts a new domain of that name, which waits for P in vain.
  const std::uint64_t d_id = d_->link("pd", kPd, table);
  EXPECT_EQ(d_->query_register_mem_status(d_id), RegisterMemStatus::PREPARING);
  // A failed domain does not count as a link: P may join D's new domain at once.
  const std::uint64_t p_id2 = p_->link("pd", kPd, table);
  EXPECT_EQ(p_id2, 2u);
  platform_.sleep(2 * platform_.round_trip(0, 8) + kPs);
  EXPECT_EQ(p_->query_register_mem_status(p_id2), RegisterMemStatus::OK);
  EXPECT_EQ(p_->query_register_mem_status(id), RegisterMemStatus::FAILED);
}

TEST_F(CommDomains, LinkTotalTimeOptionSetsTheTimeout) {
  pair({{impl::kOptionLinkTotalTime, "3"}});
  const std::uint64_t id = p_->link("pd", kPd, rank_table({0, 8}));
  platform_.sleep(3 * kSecond - kPs);
  EXPECT_EQ(p_->query_register_mem_status(id), RegisterMemStatus::PREPARING);
  platform_.sleep(2 * kPs);
  EXPECT_EQ(p_->query_register_mem_status(id), RegisterMemStatus::FAILED);
}

TEST_F(CommDomains, MembersThatDisagreeFailTheDomain) {
  pair();
  const std::uint64_t p_id = p_->link("pd", kPd, rank_table({0, 8}));
  const std::uint64_t d_id = d_->link("pd", kPd, rank_table({1, 8}));  // rank 0 elsewhere
  EXPECT_EQ(p_->query_register_mem_status(p_id), RegisterMemStatus::FAILED);
  EXPECT_EQ(d_->query_register_mem_status(d_id), RegisterMemStatus::FAILED);
  EXPECT_EQ(failure(*p_, p_id),
            "cluster 2 called link with another cluster_rank_info or rank table");
  platform_.sleep(kSecond);
  EXPECT_FALSE(p_->core()->any_link());
  EXPECT_FALSE(d_->core()->any_link());
}

TEST_F(CommDomains, PairsLinkedByLinkClustersMeanwhileFailTheDomain) {
  p_ = make_dist(LLMRole::PROMPT, 1, 0, false);
  d_ = make_dist(LLMRole::DECODER, 2, 8, true);
  const std::string table = rank_table({0, 8});
  const std::uint64_t p_id = p_->link("pd", kPd, table);
  d_->link("pd", kPd, table);
  link(*p_, 2, 8);  // done before the domain's job, due at the same time, runs
  platform_.sleep(kPs);
  EXPECT_EQ(p_->query_register_mem_status(p_id), RegisterMemStatus::FAILED);
  EXPECT_EQ(failure(*p_, p_id), "clusters 1 and 2 were linked meanwhile");
  EXPECT_TRUE(p_->core()->find_link(2));  // link_clusters' link stays
}

TEST_F(CommDomains, UnlinkLeavesALinkMadeSinceByLinkClusters) {
  p_ = make_dist(LLMRole::PROMPT, 1, 0, false);
  d_ = make_dist(LLMRole::DECODER, 2, 8, true);
  const auto [p_id, d_id] = link_pair();
  p_->unlink_clusters({cluster_info(2, 8)});  // the domain's link, taken down on both sides
  link(*p_, 2, 8);
  const std::shared_ptr<impl::Link> own = p_->core()->find_link(2);
  p_->unlink(p_id);
  d_->unlink(d_id);
  EXPECT_EQ(p_->core()->find_link(2), own);
  EXPECT_TRUE(d_->core()->find_link(1));
}

TEST_F(CommDomains, UnlinkOrFinalizeWhilePreparingFailsTheOthers) {
  pair();
  auto d3 = make_dist(LLMRole::DECODER, 3, 9, false);
  const std::string table = rank_table({0, 8});
  const std::uint64_t p_id = p_->link("pd", kPd, table);
  d_->unlink(d_->link("pd", kPd, table));
  EXPECT_EQ(p_->query_register_mem_status(p_id), RegisterMemStatus::FAILED);
  EXPECT_EQ(failure(*p_, p_id), "cluster 2 unlinked before the domain formed");
  const ClusterRankInfo p3{{1, 0}, {3, 1}};
  p_->link("p3", p3, rank_table({0, 9}));
  const std::uint64_t d3_id = d3->link("p3", p3, rank_table({0, 9}));
  p_->finalize();  // both called, but the domain has not formed yet
  EXPECT_EQ(d3->query_register_mem_status(d3_id), RegisterMemStatus::FAILED);
  EXPECT_EQ(failure(*d3, d3_id), "cluster 1 finalized before the domain formed");
  platform_.sleep(kSecond);
  EXPECT_EQ(d3->query_register_mem_status(d3_id), RegisterMemStatus::FAILED);
  EXPECT_FALSE(d3->core()->any_link());
}

TEST_F(CommDomains, FinalizeDropsTheDomainLinksOnBothSides) {
  pair();
  link_pair();
  p_->finalize();
  EXPECT_FALSE(d_->core()->any_link());
}

TEST_F(CommDomains, SwitchRoleWithADomainIsExistLink) {
  pair({{impl::kOptionEnableSwitchRole, "1"}});
  const std::string table = rank_table({0, 8});
  const std::uint64_t p_id = p_->link("pd", kPd, table);
  EXPECT_TRUE(RaisesLLM([&] { p_->switch_role(LLMRole::DECODER); }, LLMStatusCode::LLM_EXIST_LINK,
                        "switch_role"));  // still PREPARING
  d_->link("pd", kPd, table);
  platform_.sleep(2 * platform_.round_trip(0, 8) + kPs);
  EXPECT_TRUE(RaisesLLM([&] { d_->switch_role(LLMRole::PROMPT); }, LLMStatusCode::LLM_EXIST_LINK,
                        "switch_role"));
  p_->unlink(p_id);
  p_->switch_role(LLMRole::DECODER);
  EXPECT_EQ(p_->role(), LLMRole::DECODER);
}

TEST_F(CommDomains, LinkMarksTheCacheManagerLinked) {
  pair();
  p_->link("pd", kPd, rank_table({0, 8}));  // D never calls: not yet linked, but called
  const auto desc = int8_desc(2, 8, 256);
  EXPECT_FALSE(register_cache(*p_, 0, desc, 1).view.remote_accessible);
  EXPECT_TRUE(RaisesParamInvalid(
      [&] { p_->cache_manager().register_cache(desc, alloc_tensors(0, desc, 2), {}, true); },
      "remote_accessible"));
}

TEST_F(CommDomains, ValidationRulesAndTheirStatus) {
  auto early =
      std::make_unique<impl::LLMDataDist>(platform_, world_.directory(), LLMRole::PROMPT, 5);
  EXPECT_TRUE(Raises<impl::RuntimeError>([&] { early->link("x", kPd, "{}"); }, "LLMDataDist.link"));
  EXPECT_TRUE(Raises<impl::RuntimeError>([&] { early->unlink(1); }, "LLMDataDist.unlink"));
  auto v1 = make_dist(LLMRole::DECODER, 7, 3, false, {{impl::kOptionEnableCacheManager, "0"}});
  const std::string v1_rule = "is not supported when llm.EnableCacheManager is not configured.";
  EXPECT_TRUE(RaisesParamInvalid([&] { v1->link("x", kPd, "{}"); }, "link", v1_rule));
  EXPECT_TRUE(RaisesParamInvalid([&] { v1->unlink(1); }, "unlink", v1_rule));
  EXPECT_TRUE(RaisesParamInvalid([&] { v1->query_register_mem_status(1); },
                                 "query_register_mem_status", v1_rule));

  pair();
  const std::string table = rank_table({0, 8});
  const auto rejects = [&](const std::string& name, const ClusterRankInfo& info,
                           const std::string& text, const std::string& argument,
                           const std::string& rule = "") {
    return RaisesParamInvalid([&] { p_->link(name, info, text); }, argument, rule);
  };
  EXPECT_TRUE(rejects("", kPd, table, "comm_name", "empty"));
  EXPECT_TRUE(rejects(std::string(128, 'n'), kPd, table, "comm_name", "smaller than 128"));
  EXPECT_TRUE(rejects("pd", {{1, 0}, {2, 1}, {3, 2}, {4, 3}, {5, 4}}, table, "cluster_rank_info",
                      "greater than 4"));
  EXPECT_TRUE(rejects("pd", {{1, 0}}, table, "cluster_rank_info", "bigger than 1"));
  EXPECT_TRUE(rejects("pd", {{2, 1}, {1, 0}}, table, "cluster_rank_info", "ordered"));
  EXPECT_TRUE(rejects("pd", {{1, 0}, {1, 1}}, table, "cluster_rank_info", "duplicated"));
  EXPECT_TRUE(rejects("pd", kPd, "not json", "rank_table", "JSON"));
  EXPECT_TRUE(rejects("pd", kPd, R"({"version":"2.0","server_list":[]})", "rank_table.version"));
  EXPECT_TRUE(rejects("pd", kPd, R"({"version":"1.0"})", "rank_table.server_list", "missing"));
  EXPECT_TRUE(rejects(
      "pd", kPd,
      R"({"version":"1.0","server_list":[{"device":[{"device_id":"0","device_ip":"10.0.0.1","rank_id":"x"}]}]})",
      "rank_table.server_list[0].device[0].rank_id"));
  EXPECT_TRUE(
      rejects("pd", kPd,
              R"({"version":"1.0","server_list":[{"device":[{"device_id":"0","rank_id":"0"}]}]})",
              "rank_table.server_list[0].device[0].device_ip", "missing"));
  EXPECT_TRUE(rejects(
      "pd", kPd,
      R"({"version":"1.0","server_list":[{"device":[{"device_id":"0","device_ip":"10.0.0.1","rank_id":"0"},{"device_id":"1","device_ip":"10.0.0.2","rank_id":"0"}]}]})",
      "rank_table.server_list[0].device[1].rank_id", "twice"));
  EXPECT_TRUE(rejects("pd", {{1, 0}, {2, 2}}, table, "rank_table", "rank_id 2"));
  std::string foreign = table;
  foreign.replace(foreign.find(platform_.device_ip(8)), platform_.device_ip(8).size(),
                  "192.168.0.1");
  EXPECT_TRUE(rejects("pd", kPd, foreign, "rank_table.device_ip", "not a device of this world"));
  EXPECT_TRUE(
      rejects("pd", kPd, rank_table({1, 8}), "rank_table.device_ip", "not this process's device"));
  EXPECT_TRUE(rejects("pd", kPd, rank_table({0, 0}), "rank_table.device_ip", "another rank"));
  EXPECT_TRUE(rejects("pd", {{3, 0}, {2, 1}}, table, "cluster_rank_info", "this cluster id 1"));
  EXPECT_TRUE(RaisesLLM([&] { p_->unlink(9); }, LLMStatusCode::LLM_NOT_YET_LINK, "comm_id"));
  EXPECT_TRUE(RaisesLLM([&] { p_->query_register_mem_status(9); }, LLMStatusCode::LLM_NOT_YET_LINK,
                        "comm_id"));
  // Nothing was applied: no comm id, no meeting, registrations still default remote-accessible.
  EXPECT_TRUE(p_->core()->comm_domains().empty());
  EXPECT_TRUE(world_.directory().forming_comm_domains().empty());
  EXPECT_FALSE(p_->core()->registers_as_linked());
  EXPECT_EQ(p_->link("pd", kPd, table), 1u);
}

TEST_F(CommDomains, AlreadyLinkedMembersAndSetupLimits) {
  p_ = make_dist(LLMRole::PROMPT, 1, 0, false);
  d_ = make_dist(LLMRole::DECODER, 2, 8, true);
  link(*p_, 2, 8);
  EXPECT_TRUE(RaisesLLM(
      [&] {
        p_->link("pd", kPd, rank_table({0, 8}));
      },
      LLMStatusCode::LLM_ALREADY_LINK, "cluster_rank_info"));
  p_->unlink_clusters({cluster_info(2, 8)});
  const std::uint64_t first = p_->link("pd", kPd, rank_table({0, 8}));
  EXPECT_TRUE(RaisesLLM(
      [&] {
        p_->link("pd2", kPd, rank_table({0, 8}));
      },
      LLMStatusCode::LLM_ALREADY_LINK, "cluster_rank_info"));
  p_->unlink(first);
  // Members that never come: 16 setups at once at most (§4), then 512 domains (§4).
  auto setup = [&](std::uint64_t n) {
    return p_->link("d" + std::to_string(n), {{1, 0}, {100 + n, 1}}, rank_table({0, 8}));
  };
  std::uint64_t n = 0;
  for (; n < impl::kMaxConcurrentCommSetups; ++n) setup(n);
  EXPECT_TRUE(RaisesLLM([&] { setup(n); }, LLMStatusCode::LLM_PROCESSING_LINK, "link"));
  while (n < impl::kMaxCommDomains) {
    platform_.sleep(121 * kSecond);  // the pending setups fail; their comm ids remain
    for (std::size_t i = 0; i < impl::kMaxConcurrentCommSetups; ++i) setup(n++);
  }
  EXPECT_EQ(p_->core()->comm_domains().size(), impl::kMaxCommDomains);
  platform_.sleep(121 * kSecond);
  EXPECT_TRUE(RaisesLLM([&] { setup(n); }, LLMStatusCode::LLM_CLUSTER_NUM_EXCEED_LIMIT, "link"));
  p_->unlink(first + 1);
  setup(n);
}

}  // namespace
}  // namespace kvsim::sim::testing
