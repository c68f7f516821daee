// The A3 preset against HIXL's published bandwidth-by-block-size table (hardware.md 4): the model
// keeps physical parameters only, and must land within 15 % of every published point.
#include <gtest/gtest.h>

#include "test_support.h"

namespace kvsim::model {
namespace {

using testing::FabricFixture;

struct Point {
  const char* path;  ///< "hccs" (same node) or "roce" (other node)
  std::uint64_t block;
  double published_gbps;  ///< hicann/hixl benchmarks/performance.md, D2rD, hixl_cs rows
};

class Calibration : public FabricFixture, public ::testing::WithParamInterface<Point> {};

// Moves 128 MiB in `block`-sized descriptors, posted as llm_datadist posts them (batches of at
// most 1024 descriptors on one engine, spec 3.4), and compares the effective GB/s.
TEST_P(Calibration, WithinFifteenPercentOfPublished) {
  const Point p = GetParam();
  Fabric& f = build("atlas-a3");
  Topology& t = f.topology();
  const int src = 0, dst = std::string(p.path) == "hccs" ? 1 : spec_.devices_per_node;
  const std::uint64_t total = 128ull << 20;
  const std::uint64_t a = alloc(t.device_memory(src), total),
                      b = alloc(t.device_memory(dst), total);
  const std::size_t n = total / p.block;
  std::vector<std::optional<BatchOutcome>> outs((n + 1023) / 1024);
  for (std::size_t first = 0, k = 0; first < n; first += 1024, ++k) {
    const std::size_t count = std::min<std::size_t>(1024, n - first);
    post_blocks({src, 0}, a + first * p.block, b + first * p.block, p.block, count, outs[k]);
  }
  sc_core::sc_start();
  SimTime end = 0;
  for (const auto& o : outs) {
    ASSERT_TRUE(o && o->ok);
    end = std::max(end, o->finished);
  }
  const double gbps = static_cast<double>(total) / to_seconds(end) / 1e9;
  RecordProperty("model_gbps", std::to_string(gbps));
  std::printf("  %s %7llu B blocks: model %6.1f GB/s, published %6.1f GB/s (%+.1f%%)\n", p.path,
              static_cast<unsigned long long>(p.block), gbps, p.published_gbps,
              100.0 * (gbps / p.published_gbps - 1));
  EXPECT_NEAR(gbps, p.published_gbps, 0.15 * p.published_gbps);
}

INSTANTIATE_TEST_SUITE_P(
    HixlA3, Calibration,
    ::testing::Values(Point{"hccs", 16 << 10, 18.0}, Point{"hccs", 128 << 10, 122.4},
                      Point{"hccs", 1 << 20, 161.2}, Point{"hccs", 2 << 20, 164.6},
                      Point{"roce", 16 << 10, 18.2}, Point{"roce", 128 << 10, 23.6},
                      Point{"roce", 1 << 20, 23.8}, Point{"roce", 2 << 20, 23.9}),
    [](const auto& p) {
      return std::string(p.param.path) + "_" + std::to_string(p.param.block >> 10) + "K";
    });

}  // namespace
}  // namespace kvsim::model
