#include "model/hbm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "model/errors.h"

namespace kvsim::model {
namespace {

using Bytes = std::vector<std::uint8_t>;
constexpr std::uint64_t kGiB = 1ull << 30;

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Runs `f`, which must throw ModelError of `kind` with every one of `needles` in its message.
template <typename F>
void expect_error(F&& f, ErrorKind kind, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "expected ModelError(" << to_string(kind) << ")";
  } catch (const ModelError& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const auto& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << "'" << needle << "' not in: " << e.what();
    }
  }
}

std::uint64_t vm_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  }
  return 0;
}

// A 1 MiB memory with two adjacent allocations holding a pattern and literal bytes.
class HbmErrorTest : public ::testing::Test {
 protected:
  static constexpr std::uint64_t kBase = 0x10000;
  static constexpr std::uint64_t kCap = 1 << 20;

  void SetUp() override {
    a1_ = hbm_.allocate(4096);
    a2_ = hbm_.allocate(1000);
    hbm_.fill_pattern(a1_, 4096, 77);
    hbm_.write(a2_, Bytes(1000, 0x42));
  }

  struct State {
    std::uint64_t allocated;
    std::size_t extents;
    Bytes content;
    bool operator==(const State& o) const {
      return allocated == o.allocated && extents == o.extents && content == o.content;
    }
  };
  // Everything a rejected call must leave alone (content read unchecked, across both).
  State state() const {
    return {hbm_.allocated_bytes(), hbm_.content().extent_count(),
            hbm_.content().read(kBase, 8192)};
  }

  Hbm hbm_{"npu3.hbm", kBase, kCap, 1.6e12};
  std::uint64_t a1_ = 0;
  std::uint64_t a2_ = 0;
};

TEST(HbmTest, ConstructorRejectsBadParameters) {
  expect_error([] { Hbm("h0", 0, 0, 1e9); }, ErrorKind::kInvalidArgument, {"h0", "capacity"});
  expect_error([] { Hbm("h1", 0, 4096, 0); }, ErrorKind::kInvalidArgument, {"h1", "bandwidth"});
  expect_error([] { Hbm("h2", 0, 4096, std::nan("")); }, ErrorKind::kInvalidArgument,
               {"h2", "bandwidth"});
  expect_error([] { Hbm("h3", ~0ull - 100, 4096, 1e9); }, ErrorKind::kOutOfRange,
               {"h3", hex(~0ull - 100), "4096"});
}

TEST(HbmTest, FirstFitIsDeterministicAndAligned) {
  Hbm h("dram", 0x1010, 1 << 20, 1e9);
  EXPECT_EQ(h.allocate(100), 0x1040u);    // alignment is of the absolute address
  EXPECT_EQ(h.allocate(10, 1), 0x1010u);  // first fit: the gap below the first allocation
  EXPECT_EQ(h.allocate(8, 4096), 0x2000u);
  EXPECT_EQ(h.allocate(200, 1), 0x10a4u);
  EXPECT_EQ(h.allocated_bytes(), 318u);
  h.free(0x1040);                           // hole [0x101a, 0x10a4): 138 bytes
  EXPECT_EQ(h.allocate(120, 64), 0x1180u);  // the hole has only 100 bytes past 0x1040
  EXPECT_EQ(h.allocate(138, 1), 0x101au);   // exactly the hole
  EXPECT_TRUE(h.is_allocated(0x101a, 138));
  EXPECT_FALSE(h.is_allocated(0x101a, 139));
  EXPECT_FALSE(h.is_allocated(0x10a3, 2));  // spans two adjacent allocations
  EXPECT_FALSE(h.is_allocated(0x1170, 1));

  Hbm whole("whole", 0, 4096, 1e9);
  EXPECT_EQ(whole.allocate(4096, 4096), 0u);
  EXPECT_EQ(whole.allocated_bytes(), 4096u);
  whole.free(0);
  whole.allocate_at(1000, 96);
  EXPECT_EQ(whole.allocate(1000, 1), 0u);
  EXPECT_EQ(whole.allocate(4, 1), 1096u);
}

TEST(HbmTest, FreeForgetsContent) {
  Hbm h("npu0.hbm", 0, 1 << 20, 1e9);
  const std::uint64_t a = h.allocate(256);
  h.fill_pattern(a, 256, 1);
  h.free(a);
  h.allocate_at(a, 256);
  EXPECT_EQ(h.read(a, 256), Bytes(256, ContentStore::kUnwrittenByte));
  EXPECT_EQ(h.content().extent_count(), 0u);
}

TEST(HbmTest, ZeroLengthAccessIsANoOpInsideTheMemory) {
  Hbm h("npu0.hbm", 0x1000, 0x1000, 1e9);
  h.write(0x1800, {});                     // not allocated, but inside the memory
  EXPECT_TRUE(h.read(0x2000, 0).empty());  // one past the end is allowed
  Hbm::copy(h, 0x1000, h, 0x2000, 0);
  EXPECT_EQ(h.content().extent_count(), 0u);
  expect_error([&] { h.read(0x2001, 0); }, ErrorKind::kOutOfRange, {"npu0.hbm", "0x2001"});
  expect_error([&] { h.write(0xfff, {}); }, ErrorKind::kOutOfRange, {"npu0.hbm", "0xfff"});
}

TEST(HbmTest, OverlappingCopyWithinOneMemoryIsMemmove) {
  Hbm h("npu0.hbm", 0, 1 << 20, 1e9);
  const std::uint64_t a = h.allocate(1000);
  Bytes ref(1000);
  for (std::size_t i = 0; i < ref.size(); ++i) ref[i] = static_cast<std::uint8_t>(i * 13);
  h.write(a, ref);
  Hbm::copy(h, a + 100, h, a + 150, 500);
  std::copy_backward(ref.begin() + 100, ref.begin() + 600, ref.begin() + 650);
  EXPECT_EQ(h.read(a, 1000), ref);
}

TEST_F(HbmErrorTest, AllocateRejectsZeroSizeAndBadAlignment) {
  const State before = state();
  expect_error([&] { hbm_.allocate(0); }, ErrorKind::kInvalidArgument, {"npu3.hbm", "size"});
  for (std::uint64_t alignment : {0u, 3u, 96u}) {
    expect_error([&] { hbm_.allocate(128, alignment); }, ErrorKind::kInvalidArgument,
                 {"npu3.hbm", "alignment " + std::to_string(alignment), "128"});
  }
  EXPECT_TRUE(state() == before);
  EXPECT_EQ(hbm_.allocate(64), a2_ + 1024);  // the allocator is unchanged too
}

TEST_F(HbmErrorTest, AllocateOutOfMemoryNamesSizeAndFreeBytes) {
  const State before = state();
  const std::uint64_t free_bytes = kCap - 4096 - 1000;
  expect_error([&] { hbm_.allocate(kCap); }, ErrorKind::kOutOfMemory,
               {"npu3.hbm", std::to_string(kCap) + " bytes", std::to_string(free_bytes)});
  // Fits in the free total, but no 2 MiB aligned address lies in [0x10000, 0x110000).
  expect_error([&] { hbm_.allocate(4096, 1 << 21); }, ErrorKind::kOutOfMemory,
               {"npu3.hbm", "4096 bytes"});
  EXPECT_TRUE(state() == before);
  EXPECT_EQ(hbm_.allocate(free_bytes - 24, 1), a2_ + 1000);  // everything that is left
  expect_error([&] { hbm_.allocate(25, 1); }, ErrorKind::kOutOfMemory, {"24 bytes free"});
}

TEST_F(HbmErrorTest, AllocateAtRejectsOutOfRangeOverlapAndZeroSize) {
  const State before = state();
  const std::uint64_t end = kBase + kCap;
  expect_error([&] { hbm_.allocate_at(kBase - 16, 64); }, ErrorKind::kOutOfRange,
               {"npu3.hbm", hex(kBase - 16), "64"});
  expect_error([&] { hbm_.allocate_at(end - 16, 64); }, ErrorKind::kOutOfRange,
               {"npu3.hbm", hex(end - 16), "64"});
  expect_error([&] { hbm_.allocate_at(end + 16, 1); }, ErrorKind::kOutOfRange, {hex(end + 16)});
  expect_error([&] { hbm_.allocate_at(end - 16, ~0ull); }, ErrorKind::kOutOfRange, {hex(end - 16)});
  expect_error([&] { hbm_.allocate_at(end - 16, 0); }, ErrorKind::kInvalidArgument,
               {"npu3.hbm", hex(end - 16)});
  // Starting at, inside, straddling the end of, and covering allocations.
  struct Case {
    std::uint64_t addr, size, holder, holder_size;
  };
  for (const Case& c :
       {Case{a2_, 8, a2_, 1000}, Case{a2_ + 8, 16, a2_, 1000}, Case{a2_ + 992, 100, a2_, 1000},
        Case{a1_ + 4000, 200, a1_, 4096}, Case{kBase, kCap, a1_, 4096}}) {
    expect_error([&] { hbm_.allocate_at(c.addr, c.size); }, ErrorKind::kOverlap,
                 {"npu3.hbm", hex(c.addr), std::to_string(c.size),
                  "allocation of " + std::to_string(c.holder_size) + " bytes at " + hex(c.holder)});
  }
  EXPECT_TRUE(state() == before);
  hbm_.allocate_at(a2_ + 1000, 24);  // exactly adjacent is fine
  EXPECT_EQ(hbm_.allocated_bytes(), 4096u + 1000 + 24);
}

TEST_F(HbmErrorTest, FreeRejectsUnknownInteriorAndDoubleFree) {
  const State before = state();
  expect_error([&] { hbm_.free(kBase + 0x8000); }, ErrorKind::kUnallocated,
               {"npu3.hbm", hex(kBase + 0x8000)});
  expect_error([&] { hbm_.free(a1_ + 64); }, ErrorKind::kUnallocated,  // unaligned: not a start
               {"npu3.hbm", hex(a1_ + 64), "inside the allocation of 4096 bytes at " + hex(a1_)});
  EXPECT_TRUE(state() == before);
  hbm_.free(a2_);
  const State freed = state();
  EXPECT_EQ(freed.allocated, 4096u);
  expect_error([&] { hbm_.free(a2_); }, ErrorKind::kUnallocated, {"npu3.hbm", hex(a2_)});
  EXPECT_TRUE(state() == freed);
}

TEST_F(HbmErrorTest, AccessOutsideTheMemoryIsOutOfRange) {
  const State before = state();
  const std::uint64_t end = kBase + kCap;
  expect_error([&] { hbm_.read(kBase - 1, 8); }, ErrorKind::kOutOfRange,
               {"npu3.hbm", "read", hex(kBase - 1), "8 bytes"});
  expect_error([&] { hbm_.write(end - 4, Bytes(8, 1)); }, ErrorKind::kOutOfRange,
               {"npu3.hbm", "write", hex(end - 4), "8 bytes"});
  expect_error([&] { hbm_.fill_pattern(a1_, ~0ull, 1); }, ErrorKind::kOutOfRange,
               {"npu3.hbm", "fill_pattern", hex(a1_), std::to_string(~0ull)});
  expect_error([&] { hbm_.check_access(~0ull - 2, 8, "probe"); }, ErrorKind::kOutOfRange,
               {"npu3.hbm", "probe", hex(~0ull - 2)});
  EXPECT_TRUE(state() == before);
}

TEST_F(HbmErrorTest, AccessNotInsideOneAllocationIsUnallocated) {
  const State before = state();
  const std::uint64_t gap = kBase + 0x8000;
  expect_error([&] { hbm_.read(gap, 16); }, ErrorKind::kUnallocated,
               {"npu3.hbm", "read", hex(gap), "16 bytes"});
  // Spans two adjacent live allocations: still not inside ONE.
  expect_error([&] { hbm_.write(a1_ + 4000, Bytes(200, 9)); }, ErrorKind::kUnallocated,
               {"npu3.hbm", "write", hex(a1_ + 4000), "200 bytes", hex(a1_ + 4096)});
  expect_error([&] { hbm_.fill_pattern(a2_ + 900, 200, 5); }, ErrorKind::kUnallocated,
               {"npu3.hbm", hex(a2_ + 900), "200 bytes"});
  EXPECT_FALSE(hbm_.is_allocated(a1_ + 4000, 200));
  EXPECT_TRUE(hbm_.is_allocated(a1_, 4096));
  EXPECT_TRUE(state() == before);
}

TEST_F(HbmErrorTest, RejectedCopyChangesNeitherSide) {
  Hbm other("npu4.hbm", 0, 1 << 20, 1e9);
  const std::uint64_t dst = other.allocate(2048);
  other.write(dst, Bytes(2048, 0x77));
  const State before = state();
  const Bytes other_before = other.content().read(0, 4096);
  // Bad destination, good source.
  expect_error([&] { Hbm::copy(hbm_, a1_, other, dst + 1024, 2048); }, ErrorKind::kUnallocated,
               {"npu4.hbm", "copy destination", hex(dst + 1024), "2048 bytes"});
  // Bad source, good destination.
  expect_error([&] { Hbm::copy(hbm_, a2_ + 500, other, dst, 1000); }, ErrorKind::kUnallocated,
               {"npu3.hbm", "copy source", hex(a2_ + 500), "1000 bytes"});
  expect_error([&] { Hbm::copy(hbm_, kBase - 8, other, dst, 16); }, ErrorKind::kOutOfRange,
               {"npu3.hbm", "copy source", hex(kBase - 8)});
  // Within one memory, destination past its allocation.
  expect_error([&] { Hbm::copy(hbm_, a1_, hbm_, a2_, 2048); }, ErrorKind::kUnallocated,
               {"npu3.hbm", "copy destination", hex(a2_)});
  EXPECT_TRUE(state() == before);
  EXPECT_EQ(other.content().read(0, 4096), other_before);
  EXPECT_EQ(other.allocated_bytes(), 2048u);
}

// Expected byte `i` of the 40 GiB source: a pattern with one literal patch.
struct BigSource {
  static constexpr std::uint64_t kLen = 40 * kGiB;
  static constexpr std::uint64_t kSeed = 0xC0FFEE;
  static constexpr std::uint64_t kPatch = 17 * kGiB + 3;
  Bytes patch = Bytes(4096);
  BigSource() {
    for (std::size_t i = 0; i < patch.size(); ++i) patch[i] = static_cast<std::uint8_t>(i ^ 0x5A);
  }
  std::uint8_t at(std::uint64_t i) const {
    if (i - kPatch < patch.size()) return patch[i - kPatch];
    return ContentStore::pattern_byte(kSeed, i);
  }
};

// Reads 64 bytes at 2000 random offsets of [0, len) plus the patch edges, comparing to `expect`.
template <typename F>
void check_samples(const Hbm& h, std::uint64_t addr, std::uint64_t len, F&& expect) {
  std::mt19937_64 rng(1234);
  std::vector<std::uint64_t> offsets = {0, len - 64, BigSource::kPatch - 30,
                                        BigSource::kPatch + 4090};
  for (int i = 0; i < 2000; ++i) offsets.push_back(rng() % (len - 64));
  for (std::uint64_t off : offsets) {
    const Bytes got = h.read(addr + off, 64);
    for (std::uint64_t j = 0; j < 64; ++j) {
      ASSERT_EQ(got[j], expect(off + j)) << h.name() << " offset " << off + j;
    }
  }
}

TEST(HbmBigCopyTest, FortyGiBCopiesCostExtentsNotBytes) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t rss_before = vm_rss_kib();
  const BigSource source;
  constexpr std::uint64_t kLen = BigSource::kLen;

  Hbm a("npu0.hbm", 0x100000000, 64 * kGiB, 1.6e12);
  Hbm b("npu1.hbm", 0x2000000000, 64 * kGiB, 1.6e12);
  const std::uint64_t src = a.allocate(kLen, 1 << 21);
  a.fill_pattern(src, kLen, BigSource::kSeed);
  a.write(src + BigSource::kPatch, source.patch);

  // Between two memories.
  const std::uint64_t dst = b.allocate(kLen, 1 << 21);
  Hbm::copy(a, src, b, dst, kLen);
  check_samples(b, dst, kLen, [&](std::uint64_t i) { return source.at(i); });
  EXPECT_EQ(b.content().first_difference(dst, a.content(), src, kLen), std::nullopt);
  EXPECT_EQ(b.content().literal_bytes(), 4096u);
  EXPECT_EQ(b.content().extent_count(), 3u);

  // Within one memory, disjoint: 20 GiB from the middle of the source.
  const std::uint64_t part = a.allocate(20 * kGiB);
  Hbm::copy(a, src + 10 * kGiB, a, part, 20 * kGiB);
  EXPECT_EQ(a.content().first_difference(part, b.content(), dst + 10 * kGiB, 20 * kGiB),
            std::nullopt);
  EXPECT_EQ(a.content().literal_bytes(), 4096u);

  // Within one memory, overlapping (memmove): [0, 40) GiB moves to [20, 60) GiB.
  Hbm c("npu2.hbm", 0, 64 * kGiB, 1.6e12);
  const std::uint64_t region = c.allocate(60 * kGiB);
  Hbm::copy(a, src, c, region, kLen);
  Hbm::copy(c, region, c, region + 20 * kGiB, kLen);
  check_samples(c, region + 20 * kGiB, kLen, [&](std::uint64_t i) { return source.at(i); });
  EXPECT_EQ(c.content().first_difference(region + 20 * kGiB, b.content(), dst, kLen), std::nullopt);
  std::uint64_t head_diff = 20 * kGiB;  // [20, 40) GiB was overwritten by the head
  while (source.at(head_diff - 20 * kGiB) == source.at(head_diff)) ++head_diff;
  EXPECT_EQ(c.content().first_difference(region, b.content(), dst, kLen),
            std::optional<std::uint64_t>(head_diff));
  EXPECT_EQ(c.content().first_difference(region + 20 * kGiB, c.content(), region, 20 * kGiB),
            std::nullopt);  // the head survived the move

  const std::uint64_t rss_after = vm_rss_kib();
  const std::uint64_t rss_growth_kib = rss_after > rss_before ? rss_after - rss_before : 0;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ info ] 40 GiB copies: %.3f s, RSS growth %llu KiB\n", seconds,
              static_cast<unsigned long long>(rss_growth_kib));
  EXPECT_LT(rss_growth_kib, 64u * 1024);
  EXPECT_LT(seconds, 1.0);
}

}  // namespace
}  // namespace kvsim::model
