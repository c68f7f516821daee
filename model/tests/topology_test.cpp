#include "model/topology.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <tuple>

#include "model/errors.h"
#include "model/preset.h"

namespace kvsim::model {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Presets, EveryShippedPresetLoadsAndBuilds) {
  const auto names = available_presets();
  for (const char* want : {"atlas-a2", "atlas-a3", "cloudmatrix384", "dgx-h100", "dgx-h200",
                           "hgx-h800", "hgx-h20", "aws-p5en"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  for (const auto& name : names) {
    const TopologySpec spec = load_preset(name);
    EXPECT_EQ(spec.name, name);
    FluidNetwork net;
    Topology topo(spec, net);
    EXPECT_EQ(topo.memory_count(), static_cast<std::size_t>(topo.device_count() + spec.nodes));
  }
}

TEST(Presets, UnknownPresetListsTheAvailableOnes) {
  try {
    load_preset("atlas-a9");
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnknownPreset);
    EXPECT_NE(std::string(e.what()).find("atlas-a9"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("atlas-a2"), std::string::npos);
  }
}

TEST(Presets, OverridesChangeOneValue) {
  const TopologySpec spec =
      load_preset("atlas-a2", {{"scale_out.bandwidth", "400Gb/s"}, {"nodes", "4"}});
  EXPECT_DOUBLE_EQ(spec.scale_out.bandwidth, 50e9);
  EXPECT_EQ(spec.nodes, 4);
  EXPECT_THROW(load_preset("atlas-a2", {{"scale_out.speed", "1"}}), ModelError);
}

// Bad values are reported with the file, the line and the dotted key.
struct BadValue {
  const char* key;
  const char* value;
  const char* expect;
};

class PresetBadValues : public ::testing::TestWithParam<BadValue> {};

TEST_P(PresetBadValues, FailWithFileLineAndKey) {
  const auto p = GetParam();
  const std::string text = read_file(find_preset("atlas-a2"));
  try {
    parse_preset(text, "a2.yaml", {{p.key, p.value}});
    FAIL() << p.key << "=" << p.value << " accepted";
  } catch (const ModelError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::kFormat) << what;
    EXPECT_NE(what.find("a2.yaml"), std::string::npos) << what;
    EXPECT_NE(what.find(p.expect), std::string::npos) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Model, PresetBadValues,
    ::testing::Values(BadValue{"scale_up.bandwidth", "0GB/s", "scale_up.bandwidth"},
                      BadValue{"scale_out.bandwidth", "-5Gb/s", "scale_out.bandwidth"},
                      BadValue{"scale_out.bandwidth", "fast", "scale_out.bandwidth"},
                      BadValue{"scale_up.efficiency", "1.5", "scale_up.efficiency"},
                      BadValue{"hbm.capacity", "64 parsecs", "hbm.capacity"},
                      BadValue{"dma.engines", "0", "dma.engines"},
                      BadValue{"scale_up.type", "warp", "scale_up.type"},
                      BadValue{"scale_up_nodes", "2", "mesh"}));

TEST(Presets, UnknownAndMissingKeysNameTheLine) {
  std::string text = read_file(find_preset("atlas-a2"));
  try {
    parse_preset(text + "turbo: true\n", "x.yaml");
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'turbo' is not a known key"), std::string::npos)
        << e.what();
  }
  const auto pos = text.find("latency: 2us");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, 12, "latancy: 2us");
  try {
    parse_preset(text, "x.yaml");
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("scale_up.latency' is missing"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("x.yaml:"), std::string::npos) << e.what();
  }
}

TEST(Presets, KeysThatAreNotNamesAreRefusedWithTheirLine) {
  // A mapping, a list or null as a key: every schema's keys are names (yaml-cpp would otherwise
  // throw its own "bad conversion" with no file or line).
  for (const char* key : {"? {a: 1}", "? [a, b]", "~"}) {
    try {
      parse_preset(std::string("name: x\n") + key + ": 1\n", "x.yaml");
      FAIL() << key;
    } catch (const ModelError& e) {
      EXPECT_EQ(std::string(e.what()),
                "format: x.yaml:2: a key must be a plain name, not a mapping, a list or null")
          << key;
    }
  }
}

TEST(Topology, RoutesUseTheRightLinks) {
  FluidNetwork net;
  Topology a2(load_preset("atlas-a2"), net);
  auto names = [&](const Route& r) {
    std::vector<std::string> out;
    for (auto l : r.links) out.push_back(a2.links()[l].name);
    return out;
  };
  // Same node: the dedicated HCCS mesh link of the pair.
  const Route intra = a2.route(a2.device_memory(1), a2.device_memory(5), 1, 0);
  EXPECT_EQ(names(intra), std::vector<std::string>{"hccs n0d1-n0d5"});
  EXPECT_EQ(intra.latency, a2.spec().scale_up.latency);
  // Other node: source NIC out, destination NIC in.
  const Route inter = a2.route(a2.device_memory(2), a2.device_memory(9), 9, 0);
  EXPECT_EQ(names(inter), (std::vector<std::string>{"roce n0d2", "roce n1d1"}));
  // Host memory goes over the device's PCIe link.
  const Route h2d = a2.route(a2.host_memory(0), a2.device_memory(3), 3, 0);
  EXPECT_EQ(names(h2d), std::vector<std::string>{"pcie n0d3"});
  // Every mesh pair has its own link.
  std::set<std::uint32_t> seen;
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) {
      if (i != j) seen.insert(a2.route(a2.device_memory(i), a2.device_memory(j), i, 0).links.at(0));
    }
  }
  EXPECT_EQ(seen.size(), 28u);
}

TEST(Topology, EachRouteTakesItsTiersPathInItsDirection) {
  TopologySpec spec = load_preset("cloudmatrix384", {{"nodes", "2"}, {"scale_up_nodes", "2"}});
  spec.scale_up.path = spec.scale_up_remote = spec.scale_out.path = spec.host_link.path = {};
  spec.dma.descriptor_cost = 1 * kUs;
  spec.scale_up.path.descriptor_cost = 2 * kUs;
  spec.scale_up.path.read_descriptor_cost = 3 * kUs;
  spec.scale_up_remote.descriptor_cost = 5 * kUs;
  spec.scale_up_remote.read_efficiency = spec.scale_up.efficiency / 2;
  spec.scale_up_remote.overlap = false;
  spec.host_link.path.read_efficiency = spec.host_link.efficiency / 4;
  FluidNetwork net;
  const Topology t(spec, net);
  const MemoryId d0 = t.device_memory(0), d1 = t.device_memory(1), d16 = t.device_memory(16);
  auto link_weight = [&](const Route& r) {
    const Link& l = t.links()[r.links.at(0)];
    for (const auto& u : r.uses) {
      if (u.resource == l.forward || u.resource == l.backward) return u.weight;
    }
    return -1.0;
  };
  const Route write = t.route(d0, d1, 0, 0), read = t.route(d0, d1, 1, 0);
  EXPECT_EQ(write.tier, PathTier::kScaleUp);
  EXPECT_FALSE(write.read);
  EXPECT_TRUE(read.read);
  EXPECT_EQ(write.descriptor_cost, 2 * kUs);
  EXPECT_EQ(read.descriptor_cost, 3 * kUs);
  EXPECT_TRUE(read.overlap);
  EXPECT_EQ(link_weight(write), 1.0);  // no path efficiency: the link's own
  // Another node of the same scale-up domain: the remote path, on the same links.
  const Route remote_write = t.route(d0, d16, 0, 0), remote_read = t.route(d0, d16, 16, 0);
  EXPECT_EQ(remote_write.tier, PathTier::kScaleUpRemote);
  EXPECT_EQ(remote_write.descriptor_cost, 5 * kUs);
  EXPECT_EQ(remote_read.descriptor_cost, 5 * kUs);  // no read cost of its own: the write's
  EXPECT_FALSE(remote_write.overlap);
  EXPECT_EQ(link_weight(remote_write), 1.0);
  EXPECT_EQ(link_weight(remote_read), 2.0);  // half the link's share: twice the weight
  // Host memory: PCIe only; its read efficiency weighs on the PCIe link alone.
  const Route h2d_read = t.route(t.host_memory(0), d1, 1, 0);
  EXPECT_EQ(h2d_read.tier, PathTier::kHost);
  EXPECT_EQ(h2d_read.descriptor_cost, 1 * kUs);  // the engine's default
  EXPECT_EQ(link_weight(h2d_read), 4.0);
  EXPECT_EQ(t.route(d1, d1, 1, 0).tier, PathTier::kLocal);
  // Across scale-up domains: the NICs.
  FluidNetwork net2;
  const Topology a2(load_preset("atlas-a2"), net2);
  EXPECT_EQ(a2.route(a2.device_memory(2), a2.device_memory(9), 9, 0).tier, PathTier::kScaleOut);
}

TEST(Presets, PathKeysAreReadAndCheckedWithTheirLine) {
  const std::string base = read_file(find_preset("dgx-h100"));  // no path keys of its own
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = base;
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  const TopologySpec s =
      parse_preset(with("scale_up:\n",
                        "scale_up:\n  read_descriptor_cost: 4us\n  read_efficiency: 0.9\n"
                        "  overlap: false\n"),
                   "h100.yaml");
  EXPECT_EQ(s.scale_up.path.read_descriptor_cost, std::optional<SimTime>(4 * kUs));
  EXPECT_EQ(s.scale_up.path.read_efficiency, std::optional<double>(0.9));
  EXPECT_FALSE(s.scale_up.path.overlap);
  EXPECT_FALSE(s.scale_up.path.descriptor_cost);
  for (const auto& [from, to, expect] :
       {std::tuple{"scale_up:\n", "scale_up:\n  read_efficiency: 1.5\n",
                   "scale_up.read_efficiency"},
        std::tuple{"scale_out:\n", "scale_out:\n  remote: {overlap: false}\n", "scale_out.remote"},
        std::tuple{"scale_up:\n", "scale_up:\n  remote: {efficiency: 0}\n",
                   "scale_up.remote.efficiency"}}) {
    try {
      parse_preset(with(from, to), "h100.yaml");
      ADD_FAILURE() << to << " accepted";
    } catch (const ModelError& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("h100.yaml"), std::string::npos) << e.what();
    }
  }
}

TEST(Presets, APathOfThePresetReplacesTheTiersItLists) {
  const TopologySpec comm = load_preset("atlas-a2");
  EXPECT_EQ(comm.path, "comm_domain");
  EXPECT_EQ(comm.other_paths, (std::vector<std::string>{"comm_domain", "hixl_cs"}));
  const TopologySpec cs = load_preset("atlas-a2", {{"path", "hixl_cs"}});
  EXPECT_EQ(cs.path, "hixl_cs");
  EXPECT_EQ(cs.scale_up.path.descriptor_cost, std::optional<SimTime>(1 * kUs));
  EXPECT_FALSE(cs.scale_up.path.overlap);
  EXPECT_EQ(cs.scale_out.path.descriptor_cost, std::optional<SimTime>(900 * kNs));
  EXPECT_TRUE(cs.scale_out.path.overlap);
  // A tier the path does not list keeps the preset's own; the engine and links are untouched.
  EXPECT_EQ(cs.host_link.path.descriptor_cost, comm.host_link.path.descriptor_cost);
  EXPECT_EQ(cs.dma.descriptor_cost, comm.dma.descriptor_cost);
  EXPECT_EQ(cs.scale_up.efficiency, comm.scale_up.efficiency);
  try {
    load_preset("atlas-a2", {{"path", "rdma_magic"}});
    ADD_FAILURE() << "an unknown path accepted";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'path' must name one of the preset's paths "
                                         "(comm_domain, hixl_cs)"),
              std::string::npos)
        << e.what();
  }
}

std::vector<std::string> link_names(const Topology& t, const Route& r) {
  std::vector<std::string> out;
  for (auto l : r.links) out.push_back(t.links()[l].name);
  return out;
}

TEST(Topology, SharedNicsAndLeafSpineRoutes) {
  FluidNetwork net;
  const Topology t(load_preset("atlas-a2", {{"nodes", "4"},
                                            {"fabric.nics_per_node", "4"},
                                            {"fabric.nodes_per_leaf", "2"},
                                            {"fabric.spines", "2"},
                                            {"fabric.oversubscription", "2"}}),
                   net);
  // Devices 0 and 1 share NIC 0 of node 0; the same leaf needs no spine.
  EXPECT_EQ(link_names(t, t.route(t.device_memory(1), t.device_memory(8), 1, 0)),
            (std::vector<std::string>{"roce n0nic0", "roce n1nic0"}));
  // Another leaf: up to the spine the NIC pair hashes to, and down the same spine.
  const auto names = link_names(t, t.route(t.device_memory(2), t.device_memory(17), 2, 0));
  ASSERT_EQ(names.size(), 4u);
  EXPECT_EQ(names[0], "roce n0nic1");
  EXPECT_EQ(names[1].substr(0, 11), "leaf0-spine");
  EXPECT_EQ(names[2], "leaf1-spine" + names[1].substr(11));
  EXPECT_EQ(names[3], "roce n2nic0");
  const Route r = t.route(t.device_memory(2), t.device_memory(17), 2, 0);
  EXPECT_EQ(r.latency, t.spec().scale_out.latency + t.spec().fabric.uplink_latency);
  // An uplink carries the leaf's NIC bandwidth over oversubscription and spines:
  // 2 nodes x 4 NICs x 200 Gb/s x 0.95 / 2 / 2.
  const Link& up = t.links()[t.link_index("leaf0-spine0")];
  EXPECT_DOUBLE_EQ(up.nominal_effective, 2 * 4 * 25e9 * 0.95 / 2 / 2);
  // Oversubscribed: eight flows from leaf 0 to leaf 1, each on its own NIC pair, share their
  // spine's uplink equally (47.5 GB/s over the flows ECMP put there), under the NICs' 23.75.
  std::vector<FluidNetwork::FlowId> flows;
  std::vector<std::string> spine_of;
  for (int i = 0; i < 8; ++i) {
    const int src = (i / 4) * 8 + (i % 4) * 2, dst = 16 + (i / 4) * 8 + (i % 4) * 2;
    const Route route = t.route(t.device_memory(src), t.device_memory(dst), src, 0);
    spine_of.push_back(link_names(t, route)[1]);
    flows.push_back(net.add_flow(1e9, route.uses));
  }
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const auto sharing = std::count(spine_of.begin(), spine_of.end(), spine_of[i]);
    EXPECT_NEAR(net.rate(flows[i]), std::min(23.75e9, 47.5e9 / static_cast<double>(sharing)), 1e-3)
        << spine_of[i];
  }
  const auto on_spine0 = std::count(spine_of.begin(), spine_of.end(), "leaf0-spine0");
  EXPECT_GT(on_spine0, 0);  // ECMP spreads the pairs over both spines
  EXPECT_LT(on_spine0, 8);
}

TEST(Topology, SeveralNicsPerDeviceAreRailsThatEnginesDrive) {
  // p5-like: 4 NICs per GPU (32 per node of 8). Engine e of a device drives rail e mod 4, at both
  // ends; two batches on two engines of one device move in parallel over two NIC pairs.
  const TopologySpec spec =
      load_preset("dgx-h100", {{"fabric.nics_per_node", "32"}, {"scale_out.bandwidth", "100Gb/s"}});
  FluidNetwork net;
  const Topology t(spec, net);
  const MemoryId a = t.device_memory(3), b = t.device_memory(8 + 5);
  EXPECT_EQ(link_names(t, t.route(a, b, 3, 0)),
            (std::vector<std::string>{"ib n0d3.0", "ib n1d5.0"}));
  EXPECT_EQ(link_names(t, t.route(a, b, 3, 2)),
            (std::vector<std::string>{"ib n0d3.2", "ib n1d5.2"}));
  const auto f0 = net.add_flow(1e9, t.route(a, b, 3, 0).uses);
  const auto f1 = net.add_flow(1e9, t.route(a, b, 3, 1).uses);
  EXPECT_NEAR(net.rate(f0), spec.scale_out.effective(), 1e-3);  // each its own 100G NIC pair
  EXPECT_NEAR(net.rate(f1), spec.scale_out.effective(), 1e-3);
  // More rails than 16 per device, or a count that is neither a divisor nor a multiple: refused.
  EXPECT_THROW(load_preset("dgx-h100", {{"fabric.nics_per_node", "136"}}), ModelError);
  EXPECT_THROW(load_preset("dgx-h100", {{"fabric.nics_per_node", "12"}}), ModelError);
}

TEST(Topology, BadFabricsAreRefused) {
  EXPECT_THROW(load_preset("atlas-a2", {{"fabric.nics_per_node", "3"}}), ModelError);
  EXPECT_THROW(load_preset("atlas-a2", {{"fabric.oversubscription", "0.5"}}), ModelError);
}

TEST(Topology, IntraRoceOptionMovesTrafficToNics) {
  FluidNetwork net;
  Topology a2(load_preset("atlas-a2", {{"scale_up_over_scale_out", "true"}}), net);
  const Route r = a2.route(a2.device_memory(0), a2.device_memory(1), 0, 0);
  EXPECT_EQ(a2.links()[r.links.at(0)].type, LinkType::kRoce);
}

TEST(Topology, SupernodeRoutesOverUbAcrossNodes) {
  FluidNetwork net;
  Topology cm(load_preset("cloudmatrix384"), net);
  EXPECT_EQ(cm.device_count(), 768);
  const Route r = cm.route(cm.device_memory(0), cm.device_memory(700), 0, 0);
  EXPECT_EQ(cm.links()[r.links.at(0)].type, LinkType::kUb);
}

TEST(Topology, DevicesHaveDistinctIpsAndAddressRanges) {
  FluidNetwork net;
  Topology a3(load_preset("atlas-a3"), net);
  EXPECT_EQ(a3.device_ip(0), "10.1.0.1");
  EXPECT_EQ(a3.device_by_ip("10.1.0.17"), 16);
  EXPECT_EQ(a3.device_by_ip("10.9.9.9"), -1);
  MemoryId m;
  ASSERT_NE(a3.memory_at(a3.memory(a3.device_memory(5)).base() + 100, &m), nullptr);
  EXPECT_EQ(m, a3.device_memory(5));
  EXPECT_THROW(a3.device_memory(32), ModelError);
  EXPECT_THROW(a3.link_index("hccs n9d9"), ModelError);
}

}  // namespace
}  // namespace kvsim::model
