// Timing, sharing, content and bad input of the Fabric (DMA engines over the fluid network).
#include "model/fabric.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "model/errors.h"
#include "test_support.h"

namespace kvsim::model {
namespace {

using testing::FabricFixture;

class FabricTest : public FabricFixture {};

using testing::path_cost;
using testing::path_share;

// Expected idle-path time of one batch of at most one chunk, from the spec's numbers alone.
SimTime idle_time(const TopologySpec& s, std::size_t descriptors, double bytes,
                  Bandwidth bottleneck, SimTime latency, SimTime cost) {
  return s.dma.batch_setup + descriptors * cost + transfer_time(bytes, bottleneck) + latency;
}
SimTime idle_time(const TopologySpec& s, std::size_t descriptors, double bytes,
                  Bandwidth bottleneck, SimTime latency) {
  return idle_time(s, descriptors, bytes, bottleneck, latency, s.dma.descriptor_cost);
}

struct IdleCase {
  const char* name;
  const char* preset;
  int src_device;  ///< -1: host memory of node 0
  int dst_device;
  std::vector<Override> overrides;
};

class IdlePath : public FabricTest, public ::testing::WithParamInterface<IdleCase> {};

TEST_P(IdlePath, CompletesAtLatencyPlusSetupPlusDescriptorsPlusBytesOverBottleneck) {
  const IdleCase& c = GetParam();
  const TopologySpec s = load_preset(c.preset, c.overrides);
  // The bottleneck, latency and per-descriptor cost, from the preset's definitions (not from
  // Route). The engine is the destination's: every case but the local copy is a read.
  Bandwidth bottleneck = s.dma.bandwidth;
  SimTime latency = 0;
  SimTime cost = s.dma.descriptor_cost;
  const int dpn = s.devices_per_node;
  const bool same_domain = c.src_device >= 0 && c.src_device / dpn / s.scale_up_nodes ==
                                                    c.dst_device / dpn / s.scale_up_nodes;
  const bool same_node = c.src_device >= 0 && c.src_device / dpn == c.dst_device / dpn;
  if (c.src_device < 0) {
    bottleneck = std::min({bottleneck,
                           s.host_link.bandwidth * path_share(s.host_link, s.host_link.path, true),
                           s.host_bandwidth, s.hbm_bandwidth});
    latency = s.host_link.latency;
    cost = path_cost(s, s.host_link.path, true);
  } else if (c.src_device == c.dst_device) {
    bottleneck = std::min(bottleneck, s.hbm_bandwidth / 2);  // reads and writes the same HBM
  } else if (same_domain) {
    const PathSpec& p = same_node ? s.scale_up.path : s.scale_up_remote;
    bottleneck = std::min(
        {bottleneck, s.scale_up.bandwidth * path_share(s.scale_up, p, true), s.hbm_bandwidth});
    latency = s.scale_up.latency;
    cost = path_cost(s, p, true);
  } else {
    bottleneck = std::min({bottleneck,
                           s.scale_out.bandwidth * path_share(s.scale_out, s.scale_out.path, true),
                           s.hbm_bandwidth});
    latency = s.scale_out.latency;
    cost = path_cost(s, s.scale_out.path, true);
  }
  for (std::size_t n :
       {std::size_t{1}, std::size_t{7}, static_cast<std::size_t>(s.dma.chunk_descriptors)}) {
    for (std::uint64_t block : {std::uint64_t{4096}, std::uint64_t{3} << 20}) {
      Fabric& f = build(c.preset, c.overrides);
      Topology& t = f.topology();
      const MemoryId src = c.src_device < 0 ? t.host_memory(0) : t.device_memory(c.src_device);
      const std::uint64_t a = alloc(src, n * block);
      const std::uint64_t b = alloc(t.device_memory(c.dst_device), n * block);
      std::optional<BatchOutcome> out;
      post_blocks({c.dst_device, 0}, a, b, block, n, out);
      sc_core::sc_start();
      ASSERT_TRUE(out.has_value());
      ASSERT_TRUE(out->ok) << out->error;
      EXPECT_EQ(out->finished,
                idle_time(s, n, static_cast<double>(n * block), bottleneck, latency, cost))
          << c.name << " n=" << n << " block=" << block;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Model, IdlePath,
    ::testing::Values(IdleCase{"hccs_mesh_a2", "atlas-a2", 0, 3, {}},
                      IdleCase{"roce_a2", "atlas-a2", 1, 12, {}},
                      IdleCase{"hccs_switch_a3", "atlas-a3", 2, 9, {}},
                      IdleCase{"ub_cm384", "cloudmatrix384", 0, 500, {}},
                      IdleCase{"nvlink_h100", "dgx-h100", 0, 5, {}},
                      IdleCase{"ib_h200", "dgx-h200", 0, 9, {}},
                      IdleCase{"pcie_h2d_a2", "atlas-a2", -1, 2, {}},
                      // HBM-bound: a slow memory under a fast link.
                      IdleCase{"hbm_bound", "atlas-a3", 0, 1, {{"hbm.bandwidth", "50GB/s"}}},
                      IdleCase{"local_copy", "atlas-a2", 4, 4, {{"hbm.bandwidth", "300GB/s"}}}),
    [](const auto& p) { return std::string(p.param.name); });

TEST_F(FabricTest, EqualFlowsOnOneLinkEachTakeKTimesTheSingleFlowDataTime) {
  // k sources on node 0 send to one device on node 1: they share its NIC's receive direction.
  const std::uint64_t bytes = 64ull << 20;
  SimTime single_data = 0;
  for (int k = 1; k <= 6; ++k) {
    Fabric& f = build("atlas-a2");
    Topology& t = f.topology();
    std::vector<std::optional<BatchOutcome>> outs(static_cast<std::size_t>(k));
    const MemoryId dst = t.device_memory(8);
    for (int i = 0; i < k; ++i) {
      const std::uint64_t a = alloc(t.device_memory(i), bytes);
      const std::uint64_t b = alloc(dst, bytes);
      post_blocks({i, 0}, a, b, bytes, 1, outs[static_cast<std::size_t>(i)]);
    }
    sc_core::sc_start();
    const SimTime fixed = spec_.dma.batch_setup + path_cost(spec_, spec_.scale_out.path, false) +
                          spec_.scale_out.latency;
    for (const auto& o : outs) {
      ASSERT_TRUE(o && o->ok);
      const SimTime data = o->finished - fixed;
      if (k == 1) single_data = data;
      EXPECT_NEAR(static_cast<double>(data),
                  static_cast<double>(k) * static_cast<double>(single_data), 1.0 * k)
          << "k=" << k;
    }
  }
  EXPECT_EQ(single_data, transfer_time(static_cast<double>(bytes), spec_.scale_out.effective()));
}

// Naive water-filling from the definition of max-min fairness: raise every unfrozen flow's rate
// together; when a resource fills, freeze the flows crossing it.
std::vector<double> water_fill(const std::vector<std::vector<int>>& flow_resources,
                               std::vector<double> capacity) {
  const std::size_t n = flow_resources.size();
  std::vector<double> rate(n, 0);
  std::vector<bool> frozen(n, false);
  for (;;) {
    double step = 1e300;
    for (std::size_t r = 0; r < capacity.size(); ++r) {
      int users = 0;
      for (std::size_t f = 0; f < n; ++f) {
        if (!frozen[f] &&
            std::count(flow_resources[f].begin(), flow_resources[f].end(), static_cast<int>(r)))
          ++users;
      }
      if (users > 0) step = std::min(step, capacity[r] / users);
    }
    if (step == 1e300) return rate;
    for (std::size_t f = 0; f < n; ++f) {
      if (frozen[f]) continue;
      rate[f] += step;
      for (int r : flow_resources[f]) capacity[static_cast<std::size_t>(r)] -= step;
    }
    for (std::size_t f = 0; f < n; ++f) {
      for (int r : flow_resources[f]) {
        if (capacity[static_cast<std::size_t>(r)] <= 1e-9 * step) frozen[f] = true;
      }
    }
  }
}

TEST_F(FabricTest, MaxMinSharingOverTwoLinksOfDifferentBandwidth) {
  // A: n0d0 -> n1d0, B: n0d1 -> n1d0, C: n0d1 -> n1d1; n1d0's NIC degraded to 40 %.
  // Resources: 0 = NIC n0d0 out, 1 = NIC n0d1 out, 2 = NIC n1d0 in (slow), 3 = NIC n1d1 in.
  Fabric& f = build("atlas-a2");
  const double line = spec_.scale_out.effective();
  f.schedule_link_event("roce n1d0", 0, {LinkEvent::Kind::kDegrade, 0.4});
  const std::vector<double> rates =
      water_fill({{0, 2}, {1, 2}, {1, 3}}, {line, line, 0.4 * line, line});
  ASSERT_GT(std::abs(rates[2] - rates[0]), 0.1 * line);  // the answer is not an equal split
  // Bytes proportional to the max-min rates: every flow then ends at the same instant, which no
  // other allocation achieves.
  const double unit = 256.0 * (1 << 20) / line;  // seconds
  Topology& t = f.topology();
  const int src[3] = {0, 1, 1}, dst[3] = {8, 8, 9};
  std::optional<BatchOutcome> out[3];
  for (int i = 0; i < 3; ++i) {
    const auto bytes = static_cast<std::uint64_t>(rates[static_cast<std::size_t>(i)] * unit);
    const std::uint64_t a = alloc(t.device_memory(src[i]), bytes);
    const std::uint64_t b = alloc(t.device_memory(dst[i]), bytes);
    post_blocks({src[i], i}, a, b, bytes, 1, out[i]);
  }
  sc_core::sc_start();
  for (auto& o : out) ASSERT_TRUE(o && o->ok);
  const SimTime expected = spec_.dma.batch_setup + path_cost(spec_, spec_.scale_out.path, false) +
                           static_cast<SimTime>(unit * static_cast<double>(kSec)) +
                           spec_.scale_out.latency;
  // Bytes were rounded down to whole bytes: allow a nanosecond; other allocations miss by
  // microseconds.
  for (auto& o : out)
    EXPECT_NEAR(static_cast<double>(o->finished), static_cast<double>(expected), 1000.0);
}

TEST_F(FabricTest, BytesLandExactlyAndOnlyWhereDescribed) {
  Fabric& f = build("atlas-a3");
  Topology& t = f.topology();
  Hbm& src = t.memory(t.device_memory(0));
  Hbm& dst = t.memory(t.device_memory(20));
  const std::uint64_t a = alloc(t.device_memory(0), 1 << 20),
                      b = alloc(t.device_memory(20), 1 << 20);
  src.fill_pattern(a, 1 << 20, 42);
  const std::vector<std::uint8_t> before = dst.read(b, 1 << 20);
  // Scattered blocks, out of order, 70 descriptors (three chunks).
  std::vector<CopyDescriptor> descs;
  for (std::uint64_t i = 0; i < 70; ++i)
    descs.push_back({a + ((i * 37) % 97) * 4096, b + i * 8192, 4096});
  std::optional<BatchOutcome> out;
  f.post({20, 1}, descs, [&](const BatchOutcome& o) { out = o; });
  sc_core::sc_start();
  ASSERT_TRUE(out && out->ok);
  EXPECT_EQ(out->landed_bytes, 70u * 4096);
  std::vector<std::uint8_t> expect = before;
  const std::vector<std::uint8_t> s = src.read(a, 1 << 20);
  for (const auto& d : descs)
    std::copy_n(s.begin() + static_cast<long>(d.src_addr - a), d.length,
                expect.begin() + static_cast<long>(d.dst_addr - b));
  EXPECT_EQ(dst.read(b, 1 << 20), expect);
}

// Unwritten bytes copied over written ones clear exactly the described ranges; a chunk with
// no content on either side (the shortcut that skips its copies) changes no byte.
TEST_F(FabricTest, CopiesOfUnwrittenBytesClearOnlyTheirDestinations) {
  Fabric& f = build("atlas-a3");
  Topology& t = f.topology();
  Hbm& dst = t.memory(t.device_memory(20));
  const std::uint64_t a = alloc(t.device_memory(0), 1 << 20),
                      b = alloc(t.device_memory(20), 1 << 20);
  dst.fill_pattern(b, 4096, 7);                // under descriptor 0
  dst.fill_pattern(b + 8192, 4096, 8);         // between the two destinations
  dst.fill_pattern(b + (512 << 10), 4096, 9);  // outside the second batch's spans
  const std::vector<std::uint8_t> before = dst.read(b, 1 << 20);
  int done = 0;
  f.post({20, 0}, {{a, b, 4096}, {a + 4096, b + 16384, 4096}},
         [&](const BatchOutcome& o) { done += o.ok; });
  f.post({20, 1}, {{a + 8192, b + 20480, 4096}, {a + 12288, b + 32768, 4096}},
         [&](const BatchOutcome& o) { done += o.ok; });
  sc_core::sc_start();
  ASSERT_EQ(done, 2);
  std::vector<std::uint8_t> expect = before;
  std::fill_n(expect.begin(), 4096, ContentStore::kUnwrittenByte);
  EXPECT_EQ(dst.read(b, 1 << 20), expect);
}

TEST_F(FabricTest, LargeChunkedBatchPipelinesDescriptorProcessingWithData) {
  // 128 descriptors of 1 MiB on A3 HCCS: after the first chunk, processing hides behind the data.
  Fabric& f = build("atlas-a3");
  Topology& t = f.topology();
  const std::uint64_t block = 1 << 20, n = 128;
  const std::uint64_t a = alloc(t.device_memory(0), n * block),
                      b = alloc(t.device_memory(1), n * block);
  std::optional<BatchOutcome> out;
  post_blocks({0, 0}, a, b, block, n, out);
  sc_core::sc_start();
  ASSERT_TRUE(out && out->ok);
  const SimTime serial = idle_time(spec_, n, static_cast<double>(n * block),
                                   spec_.scale_up.effective(), spec_.scale_up.latency);
  const SimTime overlapped =
      spec_.dma.batch_setup + spec_.dma.chunk_descriptors * spec_.dma.descriptor_cost +
      transfer_time(static_cast<double>(n * block), spec_.scale_up.effective()) +
      spec_.scale_up.latency;
  EXPECT_LT(out->finished, serial);
  EXPECT_NEAR(static_cast<double>(out->finished), static_cast<double>(overlapped), 8.0);
}

TEST_F(FabricTest, ReadsAndWritesTakeTheirPathsCostAndShareOfTheLink) {
  // A2 HCCS, one chunk: a write (the source's engine) and a read (the destination's) of the
  // same blocks on an idle mesh link, each at its own per-descriptor cost and bandwidth share.
  TopologySpec spec = load_preset("atlas-a2");
  spec.scale_up.path = PathSpec{};
  spec.scale_up.path.descriptor_cost = 12 * kUs;
  spec.scale_up.path.read_descriptor_cost = 7 * kUs;
  spec.scale_up.path.read_efficiency = 0.98;
  const std::uint64_t block = 256 << 10;
  const std::size_t n = 8;
  for (const bool read : {false, true}) {
    build_spec(spec);
    const auto out = run_blocks(0, 3, {read ? 3 : 0, 0}, block, n);
    ASSERT_TRUE(out && out->ok) << (out ? out->error : "no outcome");
    const SimTime cost = read ? 7 * kUs : 12 * kUs;
    const double share = read ? 0.98 : spec.scale_up.efficiency;
    EXPECT_EQ(out->finished,
              spec.dma.batch_setup + n * cost +
                  transfer_time(static_cast<double>(n * block), spec.scale_up.bandwidth * share) +
                  spec.scale_up.latency)
        << (read ? "read" : "write");
  }
}

TEST_F(FabricTest, APathWithoutOverlapAddsEachChunksProcessingToItsBytes) {
  // Two chunks across the UB plane on a path that does not overlap: each chunk is processed,
  // then sent, then the next is processed; with overlap the second chunk's processing hides.
  TopologySpec spec = load_preset("cloudmatrix384", {{"nodes", "2"}, {"scale_up_nodes", "2"}});
  spec.scale_up_remote = PathSpec{};
  spec.scale_up_remote.descriptor_cost = 4 * kUs;
  const std::uint64_t block = 1 << 20;
  const std::size_t n = 2 * static_cast<std::size_t>(spec.dma.chunk_descriptors);
  const Bandwidth bw = std::min(spec.scale_up.effective(), spec.hbm_bandwidth);
  const double chunk_bytes = static_cast<double>(n / 2 * block);
  for (const bool overlap : {false, true}) {
    spec.scale_up_remote.overlap = overlap;
    build_spec(spec);
    const auto out = run_blocks(0, 16, {0, 0}, block, n);
    ASSERT_TRUE(out && out->ok) << (out ? out->error : "no outcome");
    const SimTime chunk_cost = (n / 2) * 4 * kUs;
    const SimTime expect = overlap ? spec.dma.batch_setup + chunk_cost +
                                         2 * transfer_time(chunk_bytes, bw) + spec.scale_up.latency
                                   : spec.dma.batch_setup +
                                         2 * (chunk_cost + transfer_time(chunk_bytes, bw)) +
                                         spec.scale_up.latency;
    EXPECT_NEAR(static_cast<double>(out->finished), static_cast<double>(expect), 4.0)
        << (overlap ? "overlap" : "serial");
  }
}

TEST_F(FabricTest, ABatchSpreadsItsChunksOverTheDevicesRails) {
  // 256 MiB in 1 MiB descriptors between two nodes, one engine: with two 100G NICs per GPU the
  // chunks alternate rails and the bytes take half the time they take over one.
  const std::uint64_t block = 1 << 20;
  const std::size_t n = 256;
  SimTime data[2] = {0, 0};
  for (const int rails : {1, 2}) {
    build("dgx-h100", {{"fabric.nics_per_node", std::to_string(8 * rails)},
                       {"scale_out.bandwidth", "100Gb/s"}});
    const auto out = run_blocks(2, 10, {2, 0}, block, n);
    ASSERT_TRUE(out && out->ok) << (out ? out->error : "no outcome");
    data[rails - 1] = out->finished;
  }
  const auto one =
      static_cast<double>(transfer_time(256.0 * (1 << 20), spec_.scale_out.effective()));
  EXPECT_NEAR(static_cast<double>(data[0]), one, 0.02 * one);
  EXPECT_NEAR(static_cast<double>(data[1]), one / 2, 0.02 * one);
}

TEST_F(FabricTest, SameInputsGiveBitIdenticalTimes) {
  auto once = [&] {
    Fabric& f = build("atlas-a2");
    Topology& t = f.topology();
    std::vector<SimTime> times;
    std::vector<std::optional<BatchOutcome>> outs(24);
    for (int i = 0; i < 24; ++i) {
      const int s = i % 8, d = 8 + (i * 3) % 8;
      const std::uint64_t block = 4096u << (i % 6);
      const std::uint64_t a = alloc(t.device_memory(s), 40 * block),
                          b = alloc(t.device_memory(d), 40 * block);
      post_blocks({s, i % 4}, a, b, block, 40, outs[static_cast<std::size_t>(i)]);
    }
    sc_core::sc_start();
    for (auto& o : outs) times.push_back(o->finished);
    return times;
  };
  EXPECT_EQ(once(), once());
}

TEST_F(FabricTest, BadBatchesAreRejectedWithoutSideEffects) {
  Fabric& f = build("atlas-a2");
  Topology& t = f.topology();
  const std::uint64_t a = alloc(t.device_memory(0), 1 << 20),
                      b = alloc(t.device_memory(1), 1 << 20);
  auto expect_error = [&](EngineRef e, std::vector<CopyDescriptor> d, ErrorKind kind,
                          const char* words) {
    try {
      f.post(e, std::move(d), nullptr);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const ModelError& err) {
      EXPECT_EQ(err.kind(), kind) << err.what();
      EXPECT_NE(std::string(err.what()).find(words), std::string::npos) << err.what();
    }
  };
  expect_error({0, 9}, {{a, b, 16}}, ErrorKind::kOutOfRange, "DMA engine 9");
  expect_error({0, 0}, {}, ErrorKind::kInvalidArgument, "at least one descriptor");
  expect_error({0, 0}, {{a, b, 0}}, ErrorKind::kInvalidArgument, "descriptor 0 has length 0");
  expect_error({0, 0}, {{a, b, 16}, {a, b + 8, 16}}, ErrorKind::kOverlap,
               "descriptors 0 and 1 overlap");
  // Block copies (one length, destinations aligned alike) take the bitmap check: a repeated
  // block, at a length that is not a power of two, is named as the sort would name it.
  expect_error({0, 0}, {{a, b + 3 * 48, 48}, {a + 48, b, 48}, {a + 96, b + 3 * 48, 48}},
               ErrorKind::kOverlap, "descriptors 0 and 2 overlap");
  // Two segments of block copies (48- then 32-byte blocks), each free of repeats, whose spans
  // overlap: the second segment's block runs into the first's last.
  expect_error({0, 0}, {{a, b, 48}, {a + 48, b + 96, 48}, {a + 96, b + 128, 32}},
               ErrorKind::kOverlap, "descriptors 1 and 2 overlap");
  // Destinations below and above the first one, apart by a multiple of no length: sorted.
  expect_error({0, 0}, {{a, b + 100, 48}, {a + 48, b + 60, 48}, {a + 96, b + 160, 48}},
               ErrorKind::kOverlap, "descriptors 1 and 0 overlap");
  expect_error({0, 0}, {{a, b, 16}, {a + (1 << 20) - 8, b + 64, 16}}, ErrorKind::kUnallocated,
               "descriptor 1 source");
  expect_error({0, 0}, {{a, b + (4 << 20), 16}}, ErrorKind::kUnallocated,
               "descriptor 0 destination");
  expect_error({0, 0}, {{12345, b, 16}}, ErrorKind::kOutOfRange, "is in no memory");
  EXPECT_EQ(f.stats().batches_posted, 0u);
  sc_core::sc_start();
  EXPECT_EQ(f.now(), 0u);  // nothing was scheduled
}

}  // namespace
}  // namespace kvsim::model
