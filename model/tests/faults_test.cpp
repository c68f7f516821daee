// Link faults as inputs: down, up and degrade at given simulated times.
#include <gtest/gtest.h>

#include "model/errors.h"
#include "test_support.h"

namespace kvsim::model {
namespace {

using testing::FabricFixture;

class FaultsTest : public FabricFixture {
 protected:
  static constexpr std::uint64_t kBlock = 1 << 20;
  static constexpr std::size_t kBlocks = 70;  // three chunks: 32 + 32 + 6

  struct Run {
    std::optional<BatchOutcome> x, y, z;
    std::uint64_t x_src = 0, x_dst = 0;
  };

  // X: n0d0 -> n1d0 over RoCE; Y: n0d1 -> n1d1 over other NICs; Z: n0d2 -> n0d3 over HCCS.
  Run start(Fabric& f) {
    Topology& t = f.topology();
    Run r;
    r.x_src = alloc(t.device_memory(0), kBlocks * kBlock);
    r.x_dst = alloc(t.device_memory(8), kBlocks * kBlock);
    t.memory(t.device_memory(0)).fill_pattern(r.x_src, kBlocks * kBlock, 7);
    const std::uint64_t y_src = alloc(t.device_memory(1), kBlocks * kBlock);
    const std::uint64_t y_dst = alloc(t.device_memory(9), kBlocks * kBlock);
    const std::uint64_t z_src = alloc(t.device_memory(2), kBlocks * kBlock);
    const std::uint64_t z_dst = alloc(t.device_memory(3), kBlocks * kBlock);
    post_blocks({8, 0}, r.x_src, r.x_dst, kBlock, kBlocks, r.x);
    post_blocks({9, 0}, y_src, y_dst, kBlock, kBlocks, r.y);
    post_blocks({3, 0}, z_src, z_dst, kBlock, kBlocks, r.z);
    return r;
  }
};

TEST_F(FaultsTest, LinkDownMidTransferFailsExactlyTheBatchesThatUseItAtTheDocumentedTime) {
  Run healthy = start(build("atlas-a2"));
  sc_core::sc_start();
  ASSERT_TRUE(healthy.x->ok && healthy.y->ok && healthy.z->ok);
  Fabric& f = build("atlas-a2", {{"fault_detection_time", "250us"}});
  Run r = start(f);
  // Late enough that some chunks have finished sending, early enough that one has not.
  const SimTime down_at = healthy.x->finished - 300 * kUs;
  f.schedule_link_event("roce n1d0", down_at, {LinkEvent::Kind::kDown});
  sc_core::sc_start();
  ASSERT_TRUE(r.x && r.y && r.z);
  EXPECT_FALSE(r.x->ok);
  EXPECT_EQ(r.x->finished, down_at + 250 * kUs);
  EXPECT_NE(r.x->error.find("roce n1d0"), std::string::npos) << r.x->error;
  // The batches that do not cross the link finish exactly as without the fault.
  EXPECT_TRUE(r.y->ok);
  EXPECT_TRUE(r.z->ok);
  EXPECT_EQ(r.y->finished, healthy.y->finished);
  EXPECT_EQ(r.z->finished, healthy.z->finished);

  // Exactly the chunks that finished sending before the fault landed; nothing else did.
  Topology& t = f.topology();
  const Hbm& src = t.memory(t.device_memory(0));
  const Hbm& dst = t.memory(t.device_memory(8));
  std::uint64_t landed = 0;
  std::vector<bool> chunk_landed;
  for (std::size_t i = 0; i < kBlocks; ++i) {
    const std::uint64_t off = i * kBlock;
    const bool copied =
        !dst.content().first_difference(r.x_dst + off, src.content(), r.x_src + off, kBlock);
    if (copied) landed += kBlock;
    const std::size_t chunk = i / static_cast<std::size_t>(spec_.dma.chunk_descriptors);
    if (chunk_landed.size() <= chunk) chunk_landed.push_back(copied);
    EXPECT_EQ(copied, chunk_landed[chunk]) << "block " << i << " breaks its chunk";
    if (!copied) {
      const auto bytes = dst.read(r.x_dst + off, 64);
      for (auto b : bytes) ASSERT_EQ(b, ContentStore::kUnwrittenByte) << "block " << i;
    }
  }
  EXPECT_EQ(landed, r.x->landed_bytes);
  EXPECT_GT(landed, 0u);
  EXPECT_LT(landed, kBlocks * kBlock);
}

TEST_F(FaultsTest, BatchStartingOnADownLinkFailsAfterDetection) {
  Fabric& f = build("atlas-a2");
  f.schedule_link_event("roce n0d0", 0, {LinkEvent::Kind::kDown});
  Run r = start(f);
  sc_core::sc_start();
  EXPECT_FALSE(r.x->ok);
  EXPECT_EQ(r.x->landed_bytes, 0u);
  EXPECT_EQ(r.x->finished, spec_.dma.batch_setup +
                               spec_.dma.chunk_descriptors *
                                   testing::path_cost(spec_, spec_.scale_out.path, false) +
                               spec_.fault_detection_time);
  EXPECT_TRUE(r.y->ok);
}

TEST_F(FaultsTest, LinkComingBackServesLaterBatches) {
  Fabric& f = build("atlas-a2");
  f.schedule_link_event("roce n1d0", 0, {LinkEvent::Kind::kDown});
  f.schedule_link_event("roce n1d0", 5 * kMs, {LinkEvent::Kind::kUp});
  Topology& t = f.topology();
  const std::uint64_t a = alloc(t.device_memory(0), kBlock), b = alloc(t.device_memory(8), kBlock);
  sc_core::sc_start(sc_core::sc_time(6, sc_core::SC_MS));
  std::optional<BatchOutcome> out;
  post_blocks({8, 0}, a, b, kBlock, 1, out);
  sc_core::sc_start();
  ASSERT_TRUE(out && out->ok) << (out ? out->error : "no outcome");
  EXPECT_EQ(out->posted, 6 * kMs);
}

TEST_F(FaultsTest, DegradedLinkRunsAtTheDegradedRate) {
  Fabric& f = build("atlas-a2");
  f.schedule_link_event("roce n0d0", 0, {LinkEvent::Kind::kDegrade, 0.25});
  Topology& t = f.topology();
  const std::uint64_t bytes = 64ull << 20;
  const std::uint64_t a = alloc(t.device_memory(0), bytes), b = alloc(t.device_memory(8), bytes);
  std::optional<BatchOutcome> out;
  post_blocks({0, 0}, a, b, bytes, 1, out);
  sc_core::sc_start();
  ASSERT_TRUE(out && out->ok);
  EXPECT_EQ(out->finished,
            spec_.dma.batch_setup + testing::path_cost(spec_, spec_.scale_out.path, false) +
                transfer_time(static_cast<double>(bytes), 0.25 * spec_.scale_out.effective()) +
                spec_.scale_out.latency);
}

// A stall holds what a device's engines have queued until the window ends, then the batch runs
// as on an idle fabric; another device's engines are not held.
TEST_F(FaultsTest, AStalledQueueStartsNothingUntilItsWindowEnds) {
  const auto finish = [&](Fabric& f, EngineRef engine, int from, int to) {
    Topology& t = f.topology();
    const std::uint64_t a = alloc(t.device_memory(from), kBlock);
    const std::uint64_t b = alloc(t.device_memory(to), kBlock);
    std::optional<BatchOutcome> out;
    post_blocks(engine, a, b, kBlock, 1, out);
    sc_core::sc_start();
    EXPECT_TRUE(out && out->ok);
    return out ? out->finished : 0;
  };
  const SimTime idle = finish(build("atlas-a2"), {8, 0}, 0, 8);
  Fabric& f = build("atlas-a2");
  f.stall_engines(8, 0, 3 * kMs);
  EXPECT_EQ(finish(f, {8, 0}, 0, 8), 3 * kMs + idle);
  Fabric& g = build("atlas-a2");
  g.stall_engines(8, 0, 3 * kMs);
  EXPECT_EQ(finish(g, {9, 0}, 1, 9), idle) << "device 9's engines are not stalled";
  EXPECT_THROW(g.stall_engines(99, 0, 1), ModelError);
  EXPECT_THROW(g.stall_engines(8, 5 * kMs, 4 * kMs), ModelError);
}

TEST_F(FaultsTest, BadFaultInputsAreRejected) {
  Fabric& f = build("atlas-a2");
  EXPECT_THROW(f.schedule_link_event("roce n7d7", 0, {LinkEvent::Kind::kDown}), ModelError);
  EXPECT_THROW(f.schedule_link_event("roce n0d0", 0, {LinkEvent::Kind::kDegrade, 0.0}), ModelError);
  EXPECT_THROW(f.schedule_link_event("roce n0d0", 0, {LinkEvent::Kind::kDegrade, 1.5}), ModelError);
  sc_core::sc_start(sc_core::sc_time(1, sc_core::SC_US));
  EXPECT_THROW(f.schedule_link_event("roce n0d0", 0, {LinkEvent::Kind::kDown}), ModelError);
}

}  // namespace
}  // namespace kvsim::model
