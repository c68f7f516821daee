// split_batches: batches of at most 1024 descriptors with disjoint destinations (spec §3.4).
#include "impl/copy_executor.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace kvsim::impl {
namespace {

TEST(SplitBatches, CutsEvery1024Descriptors) {
  std::vector<CopyDescriptor> descs;
  for (std::uint64_t i = 0; i < 2049; ++i) descs.push_back({i * 8, 100000 + i * 8, 8});
  const auto batches = split_batches(descs);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].size(), 1024u);
  EXPECT_EQ(batches[1].size(), 1024u);
  EXPECT_EQ(batches[2].size(), 1u);
  EXPECT_EQ(batches[1].front(), descs[1024]);
}

TEST(SplitBatches, OverlappingDestinationStartsANewBatchInOrder) {
  const std::vector<CopyDescriptor> descs = {{0, 1000, 100}, {200, 1200, 100}, {400, 1050, 10}};
  const auto batches = split_batches(descs);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].size(), 2u);
  EXPECT_EQ(batches[1], std::vector<CopyDescriptor>{descs[2]});
  EXPECT_TRUE(split_batches({}).empty());
}

// The rule as the library states it, one descriptor at a time: a batch ends at 1024 descriptors
// or before one whose destination overlaps an earlier one of the batch.
std::vector<std::vector<CopyDescriptor>> reference_split(const std::vector<CopyDescriptor>& descs) {
  std::vector<std::vector<CopyDescriptor>> batches;
  std::map<std::uint64_t, std::uint64_t> ranges;
  for (const CopyDescriptor& d : descs) {
    bool overlap = false;
    for (const auto& [start, end] : ranges)
      overlap |= start < d.dst_addr + d.length && d.dst_addr < end;
    if (batches.empty() || batches.back().size() >= kMaxBatchDescriptors || overlap) {
      batches.emplace_back();
      ranges.clear();
    }
    batches.back().push_back(d);
    ranges[d.dst_addr] = d.dst_addr + d.length;
  }
  return batches;
}

TEST(SplitBatches, AgreesWithTheOneByOneRuleOnRandomTables) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 40; ++round) {
    // Few destination slots now and then, so some windows overlap and some do not.
    const std::uint64_t slots = round % 4 == 0 ? 64 : 1u << 20;
    std::vector<CopyDescriptor> descs(rng() % 3000);
    for (CopyDescriptor& d : descs)
      d = {rng() % 1000 * 16, rng() % slots * 16, 16 + rng() % 2 * 16};
    EXPECT_EQ(split_batches(descs), reference_split(descs)) << "round " << round;
  }
}

}  // namespace
}  // namespace kvsim::impl
