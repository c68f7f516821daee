// split_batches: batches of at most 1024 descriptors with disjoint destinations (spec §3.4).
#include "impl/copy_executor.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kvsim::impl
