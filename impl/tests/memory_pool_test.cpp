// MemoryPool: page-granular first fit with coalescing (llm.MemPoolConfig, spec §5).
#include "impl/memory_pool.h"

#include <gtest/gtest.h>

namespace kvsim::impl {
namespace {

TEST(MemoryPool, RoundsToPagesAndFitsFirst) {
  MemoryPool pool(0x10000, 16 * 1024, 10);  // 16 pages of 1 KiB
  EXPECT_EQ(pool.allocate(1), 0x10000u);
  EXPECT_EQ(pool.allocate(1025), 0x10000u + 1024);
  EXPECT_EQ(pool.used(), 3 * 1024u);
  EXPECT_FALSE(pool.allocate(0));
}

TEST(MemoryPool, ExhaustedPoolRefusesAndFreedRangesCoalesce) {
  MemoryPool pool(0, 4096, 10);
  const auto a = pool.allocate(1024);
  const auto b = pool.allocate(1024);
  const auto c = pool.allocate(2048);
  ASSERT_TRUE(a && b && c);
  EXPECT_FALSE(pool.allocate(1));
  EXPECT_TRUE(pool.free(*b));
  EXPECT_FALSE(pool.allocate(2048));  // only 1 KiB free at b
  EXPECT_TRUE(pool.free(*a));
  EXPECT_EQ(pool.allocate(2048), 0u);  // a and b merged
  EXPECT_FALSE(pool.free(12345));
  EXPECT_EQ(pool.used(), 4096u);
}

}  // namespace
}  // namespace kvsim::impl
