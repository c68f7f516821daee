// Fault campaigns on serving runs (label serving): seeded draws replay exactly and never overlap on
// one target; bad plans fail with file, line and key; and on the shipped campaign scenario an
// engine that gives failed requests up, or retries on the link the library left unusable, loses
// requests, while one that relinks and retries handles every seed, with every checked request's
// bytes verified, whichever way it moves the KV; the same for a link down during the handshakes,
// and for instances killed mid-replay (an engine that computes their requests again).
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>

#include "model/errors.h"
#include "model/preset.h"
#include "model/topology.h"
#include "sim/fault_campaign.h"
#include "sim/fault_plan.h"
#include "sim/scenario.h"

namespace kvsim::sim {
namespace {

const std::string kCampaign =
    std::string(KVSIM_SOURCE_DIR) + "/scenarios/serving/a2-1p1d-link-faults.yaml";

// A small 1P1D serving scenario, for plans and overrides to be added to.
const std::string kServingBase = R"(question: q
hardware: {preset: atlas-a2}
model: {name: llama-3-70b, tensor_parallel: 8, dtype: bf16}
cache: {layout: paged, block_tokens: 128}
workload: {requests: 2, interval: 1s, prompt_tokens: 1024, output_tokens: 4}
transfer: {method: pull_blocks, api: 2}
instances: {prefill: 1 x TP8, decode: 1 x TP8}
)";

std::vector<FaultTarget> two_nodes() {
  return {{"node 0", {"roce n0d0", "roce n0d1"}}, {"node 1", {"roce n1d0", "roce n1d1"}}};
}

TEST(FaultPlan, ASeedDrawsTheSameFaultsEveryTimeWithinThePlansBounds) {
  FaultPlan plan;
  plan.count = 6;
  plan.kinds = {FaultPlan::Kind::kLinkDown, FaultPlan::Kind::kLinkDegraded};
  plan.window_first = 10 * model::kMs;
  plan.window_last = 20 * model::kMs;
  plan.duration_first = 1 * model::kMs;
  plan.duration_last = 2 * model::kMs;
  const auto first = draw_faults(plan, 42, two_nodes());
  ASSERT_EQ(first.size(), 6u);
  const auto again = draw_faults(plan, 42, two_nodes());
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].describe(), again[i].describe());
  }
  EXPECT_NE(draw_faults(plan, 43, two_nodes())[0].describe(), first[0].describe());
  for (std::size_t i = 0; i < first.size(); ++i) {
    const DrawnFault& f = first[i];
    EXPECT_GE(f.at, plan.window_first);
    EXPECT_GE(f.until - f.at, plan.duration_first);
    EXPECT_LE(f.until - f.at, plan.duration_last);
    if (i > 0) {
      EXPECT_LE(first[i - 1].at, f.at) << "in time order";
    }
    // One target's faults never overlap: an up event would end the other early.
    for (std::size_t k = 0; k < i; ++k) {
      if (first[k].target == f.target) {
        EXPECT_LE(first[k].until, f.at);
      }
    }
  }
  // Each fault's links go down or degrade at its start and come back at its end.
  const std::vector<FaultSpec> events = link_events(first);
  ASSERT_EQ(events.size(), 6u * 2 * 2);
  EXPECT_EQ(events[1].event.kind, model::LinkEvent::Kind::kUp);
}

TEST(FaultPlan, ALostNicNeverComesBackAndLaterFaultsOnItAreDropped) {
  FaultPlan plan;
  plan.kinds = {FaultPlan::Kind::kNicLost};
  plan.count = 5;
  const auto faults = draw_faults(plan, 1, {{"roce n1d3", {"roce n1d3"}}});
  ASSERT_EQ(faults.size(), 1u);
  EXPECT_EQ(faults[0].until, 0u);
  const std::vector<FaultSpec> events = link_events(faults);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].event.kind, model::LinkEvent::Kind::kDown);
  EXPECT_NE(faults[0].describe().find("lost (down for good)"), std::string::npos);
  EXPECT_THROW(draw_faults(plan, 1, {}), std::invalid_argument);
}

TEST(FaultPlan, SeedListsParseAndBadOnesNameTheOption) {
  EXPECT_EQ(parse_seeds("7"), (std::vector<std::uint64_t>{7}));
  EXPECT_EQ(parse_seeds("1-3,9"), (std::vector<std::uint64_t>{1, 2, 3, 9}));
  for (const char* bad : {"", "3-1", "x", "1,1", "-2", "1-20000", "1,,2"}) {
    try {
      parse_seeds(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--faults '"), std::string::npos) << e.what();
    }
  }
}

TEST(FaultPlan, BadPlansAndRecoveriesFailWithFileLineAndKey) {
  const std::string& base = kServingBase;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"fault_plan: {kinds: [link_flap]}\n", "<t>:8: key 'fault_plan.kinds'"},
      {"fault_plan: {window: [2s, 1s]}\n", "key 'fault_plan.window' must have FIRST <= LAST"},
      {"fault_plan: {duration: [1ms]}\n", "key 'fault_plan.duration' must be [FIRST, LAST]"},
      {"fault_plan: {scope: rack}\n", "key 'fault_plan.scope' must be node or nic"},
      {"fault_plan: {count: 0}\n", "key 'fault_plan.count'"},
      {"fault_plan: {when: 1s}\n", "fault_plan.when"},
      {"serving: {recovery: {relink: maybe}}\n", "key 'serving.recovery.relink'"},
      {"serving: {recovery: {retries: -1}}\n", "key 'serving.recovery.retries'"},
      {"serving: {recovery: {recompute: -1}}\n", "key 'serving.recovery.recompute'"},
      {"fault_plan: {kinds: [process_killed], processes: [prefill1]}\n",
       "<t>:8: key 'fault_plan.processes' has 'prefill1': must be a non-empty list of instance "
       "names (prefill0 to prefill0, decode0 to decode0)"},
      {"fault_plan: {processes: []}\n", "key 'fault_plan.processes' must be a non-empty list"},
      {"fault_plan: {delay: 0s}\n", "key 'fault_plan.delay' must be more than 0"},
  };
  for (const auto& [text, rule] : cases) {
    try {
      parse_scenario(base + text, "<t>");
      ADD_FAILURE() << "accepted " << text;
    } catch (const model::ModelError& e) {
      EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
    }
  }
}

TEST(FaultPlan, ProcessKilledNeedsAServingStudy) {
  std::string single = kServingBase;
  single.erase(single.find("instances:"));
  single += "placement: {prompt_node: 0, decode_node: 1}\n";
  try {
    parse_scenario(single + "fault_plan: {kinds: [link_down, process_killed]}\n", "<t>");
    ADD_FAILURE() << "accepted process_killed without instances";
  } catch (const model::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("<t>:8: key 'fault_plan.kinds' has process_killed, which "
                                         "kills serving instances, and the scenario has none"),
              std::string::npos)
        << e.what();
  }
}

TEST(FaultPlan, ProcessKilledDrawsAnInstanceAndItsRestartAndNeverKillsADeadOne) {
  FaultPlan plan;
  plan.kinds = {FaultPlan::Kind::kProcessKilled};
  plan.count = 6;
  const std::vector<FaultTarget> instances = {{"prefill0", {}, "", {}}, {"decode0", {}, "", {}}};
  const std::vector<DrawnFault> drawn = draw_faults(plan, 3, {}, {}, instances);
  ASSERT_EQ(drawn.size(), 6u);
  std::map<std::string, model::SimTime> up;  // when each came back
  for (const DrawnFault& f : drawn) {
    EXPECT_EQ(f.kind, FaultPlan::Kind::kProcessKilled);
    EXPECT_TRUE(f.target == "prefill0" || f.target == "decode0") << f.target;
    EXPECT_GE(f.until, f.at + plan.duration_first);
    EXPECT_LE(f.until, f.at + plan.duration_last);
    if (up.count(f.target) != 0) {
      EXPECT_GE(f.at, up[f.target]);
    }
    up[f.target] = f.until;
    EXPECT_EQ(f.describe().find(f.target + " killed at t="), 0u) << f.describe();
    EXPECT_NE(f.describe().find(", restarted at t="), std::string::npos) << f.describe();
  }
  const std::vector<ProcessFaultSpec> kills = process_faults(drawn);
  ASSERT_EQ(kills.size(), 6u);
  EXPECT_EQ(kills[2].instance, drawn[2].target);
  EXPECT_EQ(kills[2].restart, drawn[2].until);
  EXPECT_TRUE(link_events(drawn).empty());
  EXPECT_TRUE(memory_faults(drawn).empty());
  EXPECT_THROW(draw_faults(plan, 3, two_nodes(), {}, {}), std::invalid_argument);
  const FaultPlan links;  // link kinds: the same draws with or without instance targets
  const auto a = draw_faults(links, 4, two_nodes());
  const auto b = draw_faults(links, 4, two_nodes(), {}, instances);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].describe(), b[i].describe());
}

TEST(FaultPlan, WhereNodesShareAScaleUpPlaneANodeFaultTakesItsPortsIntoItToo) {
  // CloudMatrix384: two nodes of one UB domain move KV over UB, not RoCE; a fault on the NICs
  // alone would never meet a transfer.
  const auto targets_on = [](const std::string& preset, const std::vector<model::Override>& o) {
    model::FluidNetwork net;
    const model::Topology topo(model::load_preset(preset, o), net);
    return fault_targets(topo, {0, 1}, false);
  };
  const std::vector<FaultTarget> ub =
      targets_on("cloudmatrix384", {{"nodes", "2"}, {"scale_up_nodes", "2"}});
  ASSERT_EQ(ub.size(), 2u);
  EXPECT_EQ(ub[1].ports, "NICs and UB ports");
  EXPECT_NE(std::find(ub[1].links.begin(), ub[1].links.end(), "ub n1d0"), ub[1].links.end());
  EXPECT_NE(std::find(ub[1].links.begin(), ub[1].links.end(), "roce n1d0"), ub[1].links.end());
  EXPECT_EQ(std::find(ub[1].links.begin(), ub[1].links.end(), "ub n0d0"), ub[1].links.end());
  DrawnFault f;
  f.target = ub[1].name;
  f.ports = ub[1].ports;
  f.at = model::kMs;
  f.until = 2 * model::kMs;
  EXPECT_EQ(f.describe(), "node 1's NICs and UB ports down from t=0.001000 s to t=0.002000 s");
  // Nodes in different domains, and the A2's per-node HCCS mesh: their NICs only.
  for (const std::vector<FaultTarget>& nics :
       {targets_on("cloudmatrix384", {{"nodes", "2"}, {"scale_up_nodes", "1"}}),
        targets_on("atlas-a2", {})}) {
    ASSERT_FALSE(nics.empty());
    EXPECT_EQ(nics[0].ports, "NICs");
    for (const std::string& link : nics[0].links) EXPECT_EQ(link.rfind("roce ", 0), 0u) << link;
  }
}

TEST(FaultPlan, SetGivesListsAndMappingsAsYamlAndNamesTheLineOfTheKeyItReplaces) {
  const std::string base = kServingBase + "fault_plan: {kinds: [link_down]}\n";
  const Scenario s =
      parse_scenario(base, "<t>", {{"fault_plan.kinds", "[nic_lost, link_degraded]"}});
  ASSERT_TRUE(s.fault_plan);
  EXPECT_EQ(s.fault_plan->kinds, (std::vector<FaultPlan::Kind>{FaultPlan::Kind::kNicLost,
                                                               FaultPlan::Kind::kLinkDegraded}));
  const Scenario m = parse_scenario(base, "<t>", {{"fault_plan", "{kinds: [nic_lost], count: 3}"}});
  ASSERT_TRUE(m.fault_plan);
  EXPECT_EQ(m.fault_plan->count, 3);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"[link_down, ", "<t>: override fault_plan.kinds=[link_down, : not a YAML flow list"},
      {"[link_flap]", "<t>:8: key 'fault_plan.kinds' has 'link_flap'"},
  };
  for (const auto& [value, rule] : bad) {
    try {
      parse_scenario(base, "<t>", {{"fault_plan.kinds", value}});
      ADD_FAILURE() << "accepted " << value;
    } catch (const model::ModelError& e) {
      EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
    }
  }
}

// A campaign's result folders, in a fresh temporary folder removed afterwards.
std::vector<CampaignRun> campaign_in_temp(const Scenario& s,
                                          const std::vector<std::uint64_t>& seeds) {
  std::string dir = ::testing::TempDir() + "kvsim-faults-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  auto runs = run_fault_campaign(s, seeds, dir);
  std::filesystem::remove_all(dir);
  return runs;
}

// The campaign's seeds 1-8 on the shipped scenario, `sets` applied.
std::vector<CampaignRun> campaign(const std::vector<ScenarioOverride>& sets) {
  return campaign_in_temp(load_scenario(kCampaign, sets), parse_seeds("1-8"));
}

std::size_t unhandled(const std::vector<CampaignRun>& runs) {
  std::size_t n = 0;
  for (const CampaignRun& r : runs) n += r.findings.empty() ? 0 : 1;
  return n;
}

TEST(FaultCampaign, AnEngineThatGivesFailedRequestsUpLosesTheRequestsAfterAnOutageToo) {
  const std::vector<CampaignRun> runs = campaign({});
  ASSERT_EQ(runs.size(), 9u);
  EXPECT_TRUE(runs[0].findings.empty()) << "the run without faults is clean";
  EXPECT_GE(unhandled(runs), 2u);
  bool later_lost = false;
  for (const CampaignRun& r : runs) {
    for (const std::string& f : r.findings) later_lost |= f.find("LLM_FAILED") != std::string::npos;
  }
  EXPECT_TRUE(later_lost) << "requests after the failed one fail on the unusable link";
}

TEST(FaultCampaign, RetriesOnTheLinkTheLibraryLeftUnusableDoNotHelp) {
  const std::vector<CampaignRun> careless = campaign({});
  const std::vector<CampaignRun> runs = campaign({{"serving.recovery.retries", "5"}});
  EXPECT_EQ(unhandled(runs), unhandled(careless));
  for (std::size_t i = 1; i < runs.size(); ++i) {
    if (runs[i].result) {
      EXPECT_EQ(runs[i].result->relinks, 0);
    }
  }
}

// Seeds 1-2 of the shipped scenario, `sets` applied, each with one fault of `kind` from t=0 for
// `duration`: what the engines meet while they start up.
std::vector<CampaignRun> fault_at_start(FaultPlan::Kind kind, model::SimTime duration,
                                        const std::vector<ScenarioOverride>& sets) {
  Scenario s = load_scenario(kCampaign, sets);
  s.fault_plan->kinds = {kind};
  s.fault_plan->window_first = s.fault_plan->window_last = 0;
  s.fault_plan->duration_first = s.fault_plan->duration_last = duration;
  return campaign_in_temp(s, {1, 2});
}

TEST(FaultCampaign, ALinkDownDuringTheHandshakesStopsACarelessEngineAndNotACarefulOne) {
  for (const bool careful : {false, true}) {
    std::vector<ScenarioOverride> sets;
    if (careful) sets = {{"serving.recovery.retries", "20"}, {"serving.recovery.relink", "true"}};
    const auto runs = fault_at_start(FaultPlan::Kind::kLinkDown, 30 * model::kMs, sets);
    ASSERT_EQ(runs.size(), 3u);
    for (std::size_t i = 1; i < runs.size(); ++i) {
      if (careful) {
        EXPECT_TRUE(runs[i].findings.empty());
      } else {
        ASSERT_EQ(runs[i].findings.size(), 1u);
        EXPECT_NE(runs[i].findings[0].find("link_clusters failed with LLM_LINK_FAILED"),
                  std::string::npos)
            << runs[i].findings[0];
      }
    }
  }
}

TEST(FaultCampaign, AFullHbmAtStartUpStopsACarelessEngineAndNotOneThatAllocatesAgain) {
  for (const bool careful : {false, true}) {
    std::vector<ScenarioOverride> sets;
    if (careful) sets = {{"serving.recovery.retries", "5"}};
    const auto runs = fault_at_start(FaultPlan::Kind::kDeviceOom, 10 * model::kMs, sets);
    ASSERT_EQ(runs.size(), 3u);
    for (std::size_t i = 1; i < runs.size(); ++i) {
      ASSERT_EQ(runs[i].faults.size(), 1u);
      EXPECT_EQ(runs[i].faults[0].describe().find("'s devices out of memory from t=0.000000 s to "
                                                  "t=0.010000 s"),
                6u)
          << runs[i].faults[0].describe();
      if (careful) {
        EXPECT_TRUE(runs[i].findings.empty()) << runs[i].findings[0];
        ASSERT_TRUE(runs[i].result);
        EXPECT_EQ(runs[i].result->requests.size(), runs[0].result->requests.size());
      } else {
        ASSERT_EQ(runs[i].findings.size(), 1u);
        EXPECT_NE(runs[i].findings[0].find("KV cache does not fit in HBM"), std::string::npos)
            << runs[i].findings[0];
      }
    }
  }
}

TEST(FaultPlan, DeviceOomDrawsANodesDevicesOrOneAndLeavesOtherPlansDrawsAsTheyWere) {
  model::FluidNetwork net;
  const model::Topology topo(model::load_preset("atlas-a2", {}), net);
  const std::vector<FaultTarget> nodes = device_targets(topo, {1, 0, 1}, false);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[1].name, "node 1");
  EXPECT_EQ(nodes[1].devices, (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  const std::vector<FaultTarget> one = device_targets(topo, {1}, true);
  ASSERT_EQ(one.size(), 8u);
  EXPECT_EQ(one[3].name, "device n1d3");
  EXPECT_EQ(one[3].devices, (std::vector<int>{11}));
  FaultPlan plan;
  plan.kinds = {FaultPlan::Kind::kDeviceOom};
  plan.count = 6;
  const auto drawn = draw_faults(plan, 9, {}, nodes);
  const auto specs = memory_faults(drawn);
  EXPECT_EQ(specs.size(), 6u * 8u);
  EXPECT_TRUE(link_events(drawn).empty());
  EXPECT_THROW(draw_faults(plan, 9, two_nodes(), {}), std::invalid_argument);
  const FaultPlan links;  // link kinds: the same draws with or without device targets
  const auto a = draw_faults(links, 4, two_nodes());
  const auto b = draw_faults(links, 4, two_nodes(), nodes);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].describe(), b[i].describe());
}

class CarefulEngine : public ::testing::TestWithParam<std::string> {};

TEST_P(CarefulEngine, RelinkingAndRetryingHandlesEverySeedWithTheBytesIntact) {
  const std::vector<CampaignRun> runs = campaign({{"transfer.method", GetParam()},
                                                  {"serving.recovery.retries", "20"},
                                                  {"serving.recovery.relink", "true"}});
  EXPECT_EQ(unhandled(runs), 0u);
  int relinks = 0;
  for (const CampaignRun& r : runs) {
    ASSERT_TRUE(r.result.has_value());
    relinks += r.result->relinks;
    for (const RequestResult& q : r.result->requests) {
      EXPECT_TRUE(q.ok);
      if (q.checked) {
        EXPECT_TRUE(q.verified) << "request " << q.id;
      }
    }
  }
  EXPECT_GT(relinks, 0) << "some seed's outage hit a transfer";
  const std::string md = campaign_markdown(load_scenario(kCampaign), runs);
  EXPECT_EQ(md.find("UNHANDLED"), std::string::npos) << md;
}

INSTANTIATE_TEST_SUITE_P(Methods, CarefulEngine,
                         ::testing::Values("pull_blocks", "layerwise", "push_blocks"));

// Seeds 2 and 3 of the shipped campaign, whose faults of `kind` hit the decode node (which
// pulls) for 1-3 s, checked careless and careful (20 retries with relink): the careless engine's
// pull waits past its llm.SyncKvCacheWaitTime (1 s) and fails with LLM_TIMEOUT, which leaves the
// link unusable; the careful one relinks and retries. `check` sees each run's fault.
void pulls_time_out_only_for_a_careless_engine(
    const std::string& kind, const std::function<void(const DrawnFault&)>& check) {
  for (const bool careful : {false, true}) {
    std::vector<ScenarioOverride> sets = {
        {"fault_plan", "{kinds: [" + kind + "], window: [500ms, 8s], duration: [1s, 3s]}"}};
    if (careful) {
      sets.push_back({"serving.recovery.retries", "20"});
      sets.push_back({"serving.recovery.relink", "true"});
    }
    const auto runs = campaign_in_temp(load_scenario(kCampaign, sets), {2, 3});
    ASSERT_EQ(runs.size(), 3u);
    for (std::size_t i = 1; i < runs.size(); ++i) {
      ASSERT_EQ(runs[i].faults.size(), 1u);
      EXPECT_EQ(runs[i].faults[0].target, "node 1") << "the decode side, which pulls";
      check(runs[i].faults[0]);
      if (careful) {
        EXPECT_TRUE(runs[i].findings.empty()) << runs[i].findings[0];
        ASSERT_TRUE(runs[i].result);
        EXPECT_GT(runs[i].result->relinks, 0);
      } else {
        ASSERT_EQ(runs[i].findings.size(), 1u);
        EXPECT_NE(runs[i].findings[0].find("LLM_TIMEOUT"), std::string::npos)
            << runs[i].findings[0];
      }
    }
  }
}

// A stuck completion queue: completions come 2 s late, the bytes on time.
TEST(FaultCampaign, LateCompletionsTimeACarelessEnginesPullsOutAndNotACarefulOnes) {
  FaultPlan plan;
  plan.kinds = {FaultPlan::Kind::kCompletionDelay};
  plan.delay = 2 * model::kSec;
  model::FluidNetwork net;
  const model::Topology topo(model::load_preset("atlas-a2", {}), net);
  const std::vector<DrawnFault> drawn =
      draw_faults(plan, 2, {}, device_targets(topo, {0, 1}, false));
  ASSERT_EQ(drawn.size(), 1u);
  EXPECT_EQ(drawn[0].devices.size(), 8u);
  const std::vector<CompletionDelaySpec> late = completion_delays(drawn);
  ASSERT_EQ(late.size(), 8u);
  EXPECT_EQ(late[0].delay, plan.delay);
  EXPECT_TRUE(link_events(drawn).empty() && memory_faults(drawn).empty());
  pulls_time_out_only_for_a_careless_engine("completion_delay", [](const DrawnFault& f) {
    EXPECT_EQ(f.describe().find("node 1's devices' copy completions 2 s late from t="), 0u)
        << f.describe();
  });
}

// A transfer queue that stops draining: the pull waits in it.
TEST(FaultCampaign, AStalledQueueTimesACarelessEnginesPullsOutAndNotACarefulOnes) {
  pulls_time_out_only_for_a_careless_engine("queue_stall", [](const DrawnFault& f) {
    EXPECT_EQ(f.describe().find("node 1's devices' transfer queues stalled"), 0u) << f.describe();
    EXPECT_EQ(queue_stalls({f}).size(), 8u);
    EXPECT_TRUE(completion_delays({f}).empty());
  });
}

const std::string kKills =
    std::string(KVSIM_SOURCE_DIR) + "/scenarios/serving/a2-2p2d-process-kills.yaml";

TEST(FaultCampaign, AnEngineThatDoesNotRecomputeLosesWhatAKilledInstanceHeld) {
  const std::vector<CampaignRun> runs = campaign_in_temp(load_scenario(kKills), parse_seeds("1-8"));
  ASSERT_EQ(runs.size(), 9u);
  EXPECT_TRUE(runs[0].findings.empty()) << "the run without faults is clean";
  EXPECT_GE(unhandled(runs), 4u);
  bool killed_with = false, peers_broken = false;
  for (const CampaignRun& r : runs) {
    for (const std::string& f : r.findings) {
      killed_with |= f.find("killed with ") != std::string::npos;
      peers_broken |= f.find("LLM_SUSPECT_REMOTE_ERROR") != std::string::npos;
    }
  }
  EXPECT_TRUE(killed_with) << "requests that were in the dead instance";
  EXPECT_TRUE(peers_broken) << "pulls over the links to a prefill instance that came back";
}

class CarefulAfterKills : public ::testing::TestWithParam<std::string> {};

// Besides every seed handled: while an instance is down the router sends it nothing, and once it
// is back it serves again.
TEST_P(CarefulAfterKills, RecomputingAndRelinkingHandlesEverySeedAndTheInstanceServesAgain) {
  const Scenario s = load_scenario(kKills, {{"transfer.method", GetParam()},
                                            {"serving.recovery.recompute", "3"},
                                            {"serving.recovery.retries", "5"},
                                            {"serving.recovery.relink", "true"}});
  const std::vector<CampaignRun> runs = campaign_in_temp(s, parse_seeds("1-8"));
  EXPECT_EQ(unhandled(runs), 0u);
  int recomputes = 0, restarts = 0, served_after = 0, routed_while_down = 0;
  for (std::size_t i = 1; i < runs.size(); ++i) {
    ASSERT_TRUE(runs[i].result.has_value());
    ASSERT_EQ(runs[i].faults.size(), 1u);
    const DrawnFault& f = runs[i].faults[0];
    const bool prefill = f.target.rfind("prefill", 0) == 0;
    const int killed = std::stoi(f.target.substr(prefill ? 7 : 6));
    restarts += runs[i].result->restarts;
    for (const RequestResult& q : runs[i].result->requests) {
      EXPECT_TRUE(q.ok) << "request " << q.id << ": " << q.status;
      if (q.checked) {
        EXPECT_TRUE(q.verified) << "request " << q.id;
      }
      recomputes += q.recomputes;
      const int where = prefill ? q.prefill_instance : q.decode_instance;
      const model::SimTime start = prefill ? q.prefill_start : q.decode_start;
      const model::SimTime routed = q.arrival + s.engine.request_overhead;
      if (prefill && routed > f.at && routed < f.until) {
        ++routed_while_down;
        EXPECT_NE(where, killed) << "request " << q.id << " sent to " << f.target << " while down";
      }
      if (where == killed && start >= f.until) {
        ++served_after;
        // Nothing waits for a dead instance: what it serves after its restart came after it.
        EXPECT_GE(routed, f.until) << "request " << q.id << " waited for " << f.target;
      }
    }
  }
  EXPECT_GT(recomputes, 0);
  EXPECT_GT(restarts, 0);
  EXPECT_GT(routed_while_down, 0);
  EXPECT_GT(served_after, 0) << "a restarted instance serves again";
}

INSTANTIATE_TEST_SUITE_P(Methods, CarefulAfterKills,
                         ::testing::Values("pull_blocks", "layerwise", "push_blocks"));

}  // namespace
}  // namespace kvsim::sim
